# Drawn by rewind bench spec; edit and run `gnuplot tokens_per_second_stdlib-heldout.gp` in this directory to restyle.
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 1106,500 noenhanced font ',10'
} else {
  set terminal png size 1106,500 noenhanced
}
set output 'tokens_per_second_stdlib-heldout.png'
set title 'Tokens/s by configuration — Hf, workload stdlib-heldout'
set ylabel 'tokens/s (median of 3 reps; bars: min–max)'
set style data histogram
set style histogram errorbars gap 1 lw 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by 30 right nomirror
set grid ytics
set key top left vertical maxrows 2
set yrange [0:1106.7456734092486]
set arrow from graph 0, first 785.4576830009628 to graph 1, first 785.4576830009628 nohead dt 2 lw 2 lc rgb '#6a3d9a' front
set arrow from graph 0, first 849.7262834975688 to graph 1, first 849.7262834975688 nohead dt 2 lw 2 lc rgb '#b15928' front
plot 'tokens_per_second_stdlib-heldout.dat' using 2:3:4:xtic(1) title '1 slot' lc rgb '#6a3d9a', 'tokens_per_second_stdlib-heldout.dat' using 5:6:7 title '4 slots' lc rgb '#b15928', keyentry with lines dt 2 lw 2 lc rgb '#6a3d9a' title 'plain, 1 slot (785.5)', keyentry with lines dt 2 lw 2 lc rgb '#b15928' title 'plain, 4 slots (849.7)'

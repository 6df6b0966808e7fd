# Drawn by rewind bench spec; edit and run `gnuplot tokens_per_second_stdlib-heldout.gp` in this directory to restyle.
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,500 noenhanced font ',10'
} else {
  set terminal png size 900,500 noenhanced
}
set output 'tokens_per_second_stdlib-heldout.png'
set title 'Tokens/s by configuration — Hf, workload stdlib-heldout'
set ylabel 'tokens/s (median of 2 reps; bars: min–max)'
set style data histogram
set style histogram errorbars gap 1 lw 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by 30 right nomirror
set grid ytics
set key top left vertical maxrows 1
set yrange [0:974.0680546812538]
set arrow from graph 0, first 739.2815011772427 to graph 1, first 739.2815011772427 nohead dt 2 lw 2 lc rgb '#6a3d9a' front
plot 'tokens_per_second_stdlib-heldout.dat' using 2:3:4:xtic(1) title '1 slot' lc rgb '#6a3d9a', keyentry with lines dt 2 lw 2 lc rgb '#6a3d9a' title 'plain, 1 slot (739.3)'

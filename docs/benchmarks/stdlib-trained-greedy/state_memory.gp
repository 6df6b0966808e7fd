# Drawn by rewind bench spec; edit and run `gnuplot state_memory.gp` in this directory to restyle.
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,500 noenhanced font ',10'
} else {
  set terminal png size 900,500 noenhanced
}
set output 'state_memory.png'
set title 'Rollback state vs draft depth — Hf, workload stdlib-heldout, spec mtp'
set xlabel 'draft_max (tokens drafted per round)'
set ylabel 'rollback-relevant state, MiB (all slots)'
set xtics ("plain" 0, "1" 1, "2" 2, "3" 3, "4" 4, "5" 5, "6" 6, "7" 7)
set xrange [-0.5:7.5]
set yrange [0:*]
set grid
set key top left
set arrow from first 0, first 0.41015625 to graph 1, first 0.41015625 nohead dt 3 lc rgb 'gray50'
set arrow from first 0, first 1.640625 to graph 1, first 1.640625 nohead dt 3 lc rgb 'gray50'
plot 'state_memory.dat' index 0 using 1:2 with linespoints lw 2 ps 1.3 lc rgb '#1f77b4' dt 1 pt 5 title 'replay, 1 slot', 'state_memory.dat' index 1 using 1:2 with linespoints lw 2 ps 1.3 lc rgb '#1f77b4' dt 2 pt 7 title 'replay, 4 slots', 'state_memory.dat' index 2 using 1:2 with points ps 1.8 lc rgb 'black' pt 5 title 'plain, 1 slot', 'state_memory.dat' index 3 using 1:2 with points ps 1.8 lc rgb 'black' pt 7 title 'plain, 4 slots'

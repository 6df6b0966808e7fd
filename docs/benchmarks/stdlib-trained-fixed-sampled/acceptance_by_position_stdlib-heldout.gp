# Drawn by rewind bench spec; edit and run `gnuplot acceptance_by_position_stdlib-heldout.gp` in this directory to restyle.
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,500 noenhanced font ',10'
} else {
  set terminal png size 900,500 noenhanced
}
set output 'acceptance_by_position_stdlib-heldout.png'
set title 'Acceptance by draft position — Hf, workload stdlib-heldout, draft_max 7, 1 slot'
set xlabel 'draft position (1 = the first drafted token)'
set ylabel 'drafted tokens accepted at that position'
set xrange [0.5:7.5]
set xtics 1
set yrange [0:1]
set grid
set key top right
plot 'acceptance_by_position_stdlib-heldout.dat' index 0 using 1:2 with linespoints lw 2 ps 1.3 dt 1 pt 5 title 'mtp', 'acceptance_by_position_stdlib-heldout.dat' index 1 using 1:2 with linespoints lw 2 ps 1.3 dt 2 pt 7 title 'draft', 'acceptance_by_position_stdlib-heldout.dat' index 2 using 1:2 with linespoints lw 2 ps 1.3 dt 3 pt 9 title 'ngram'

# Drawn by rewind bench spec; edit and run `gnuplot tpot_vs_slots_stdlib-heldout.gp` in this directory to restyle.
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,500 noenhanced font ',10'
} else {
  set terminal png size 900,500 noenhanced
}
set output 'tpot_vs_slots_stdlib-heldout.png'
set title 'Time per output token vs slots — Hf, workload stdlib-heldout, draft_max 7'
set xlabel 'slots (concurrent requests)'
set ylabel 'TPOT ms (points: p50; bars up to p90)'
set xtics ("1" 1)
set logscale x 2
set xrange [0.7142857142857143:1.4]
set yrange [0:*]
set grid
set key outside right top
set bars 2
plot 'tpot_vs_slots_stdlib-heldout.dat' index 0 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb 'black' dt 1 pt 7 title 'plain', 'tpot_vs_slots_stdlib-heldout.dat' index 1 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#1f77b4' dt 1 pt 7 title 'mtp replay k7', 'tpot_vs_slots_stdlib-heldout.dat' index 2 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#1f77b4' dt 2 pt 9 title 'draft replay k7', 'tpot_vs_slots_stdlib-heldout.dat' index 3 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#1f77b4' dt 3 pt 11 title 'ngram replay k7'

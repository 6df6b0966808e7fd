# Drawn by rewind bench spec; edit and run `gnuplot tpot_vs_slots_knowledge.gp` in this directory to restyle.
set encoding utf8
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
  set terminal pngcairo size 900,500 noenhanced font ',10'
} else {
  set terminal png size 900,500 noenhanced
}
set output 'tpot_vs_slots_knowledge.png'
set title 'Time per output token vs slots — qwen35-small-q8_0, workload knowledge, draft_max 7'
set xlabel 'slots (concurrent requests)'
set ylabel 'TPOT ms (points: p50; bars up to p90)'
set xtics ("1" 1, "4" 4)
set logscale x 2
set xrange [0.7142857142857143:5.6]
set yrange [0:*]
set grid
set key outside right top
set bars 2
plot 'tpot_vs_slots_knowledge.dat' index 0 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb 'black' dt 1 pt 7 title 'plain', 'tpot_vs_slots_knowledge.dat' index 1 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#1f77b4' dt 1 pt 7 title 'oracle replay k7', 'tpot_vs_slots_knowledge.dat' index 2 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#ff7f0e' dt 1 pt 7 title 'oracle snapshot k7', 'tpot_vs_slots_knowledge.dat' index 3 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#2ca02c' dt 1 pt 7 title 'oracle checkpoint k7', 'tpot_vs_slots_knowledge.dat' index 4 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#1f77b4' dt 2 pt 9 title 'ngram replay k7', 'tpot_vs_slots_knowledge.dat' index 5 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#ff7f0e' dt 2 pt 9 title 'ngram snapshot k7', 'tpot_vs_slots_knowledge.dat' index 6 using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '#2ca02c' dt 2 pt 9 title 'ngram checkpoint k7'

# The comparison chart (bench/run.sh compare): gnuplot -e "dir='OUT'" bench/compare/compare.gp
# reads OUT/compare.dat (bench_compare) and draws OUT/compare.png.
set terminal pngcairo size 1200,800 font "sans,10"
set output dir.'/compare.png'
set termoption noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set xtics nomirror rotate by -15
set key below horizontal
set yrange [0:*]
set multiplot layout 2,2 title "The five policies side by side (".title.")"
set title 'Cost: ns per check (less is better)'
plot dir.'/compare.dat' using 2:xtic(1) title 'hot key', '' using 3 title '1,000,000 keys', \
     '' using 4 title '2 threads, one key'
set title 'Memory: heap bytes per key, 1,000,000 keys'
plot dir.'/compare.dat' using 5:xtic(1) title 'bytes per key' lc rgb '#4477aa'
set title 'Accuracy (1 = the limit)'
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#aa3333'
set yrange [0:2.8]
plot dir.'/compare.dat' using 6:xtic(1) title 'most in any window / limit', '' using 7 title 'steady client admitted'
unset arrow 1
set title 'After a burst, in windows (log scale)'
set logscale y
set yrange [0.001:5]
plot dir.'/compare.dat' using 8:xtic(1) title 'passes again after', '' using 9 title 'Retry-After told'
unset multiplot

# Charts of one suite run. Usage: gnuplot -c bench/charts.gp bench/results (or -e "dir='...'")
if (!exists("dir")) dir = exists("ARG1") && ARG1 ne "" ? ARG1 : "."
set terminal pngcairo size 900,420 font "sans,10"
set key left top
set termoption noenhanced
set grid ytics
set style data steps
set xrange [*:*]
set xlabel "time (s)"
set ylabel "admitted so far (one key)"

set output dir."/boundary_burst.png"
set title "Boundary burst: 100 just before and 100 just after a window edge (limit 100 per 1 s)"
set xrange [0.9:2.6]
plot for [i=2:6] dir."/series_boundary_burst.dat" using 1:i title columnhead(i) lw 2 dt i-1
set xrange [*:*]

set output dir."/on_off.png"
set title "On/off: 3x the limit for 1 s, then 2 s idle (limit 100 per 1 s, burst 100)"
plot for [i=2:6] dir."/series_on_off_3x.dat" using 1:i title columnhead(i) lw 2 dt i-1

set output dir."/cost.png"
set title "Cost per check (ns, lower is better), beside the floors of the same run"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -25
set xlabel ""
set ylabel "ns per check"
set logscale y
plot dir."/cost.dat" using 2:xtic(1) title "hot key", "" using 3 title "1,000,000 keys"

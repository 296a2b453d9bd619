# The traffic chart (bench/run.sh compare --traffic LOG):
#   gnuplot -c bench/compare/traffic.gp OUT TITLE CLIENTS_DENIED
# reads OUT/traffic_policies.dat and OUT/traffic_clients.dat (bench_compare_traffic), draws OUT/traffic.png.
# CLIENTS_DENIED: the rows of traffic_clients.dat; with none, the second panel says so.
dir = ARG1
title = ARG2
denied = int(ARG3)
set terminal pngcairo size 1200,800 font "sans,10"
set output dir.'/traffic.png'
set termoption noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key top right
stats dir.'/traffic_policies.dat' using 2 nooutput
if (STATS_max > 0) { set yrange [0:*] } else { set yrange [0:1] }
set multiplot layout 2,1 title "An access log through the five policies (".title.")"
set title 'Requests denied, and clients denied, per policy'
plot dir.'/traffic_policies.dat' using 2:xtic(1) title 'requests denied', '' using 3 title 'clients denied'
set title 'The clients denied most: requests each policy denied them'
if (denied > 0) {
  set xtics rotate by -20
  plot for [i=2:6] dir.'/traffic_clients.dat' using i:xtic(1) title columnhead(i)
} else {
  unset xtics
  unset ytics
  unset grid
  unset border
  set xrange [0:1]
  set yrange [0:1]
  set label 1 'No client was denied under any policy at these parameters.' at 0.5, 0.5 center
  plot NaN notitle
}
unset multiplot

# The traffic chart (bench/run.sh compare --traffic LOG): gnuplot -e "dir='OUT'" bench/compare/traffic.gp
# reads OUT/traffic_policies.dat and OUT/traffic_clients.dat (bench_compare_traffic), draws OUT/traffic.png.
set terminal pngcairo size 1200,800 font "sans,10"
set output dir.'/traffic.png'
set termoption noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set key top right
set yrange [0:*]
set multiplot layout 2,1 title "An access log through the five policies (".title.")"
set title 'Requests denied, and clients denied, per policy'
plot dir.'/traffic_policies.dat' using 2:xtic(1) title 'requests denied', '' using 3 title 'clients denied'
set title 'The clients denied most: requests each policy denied them'
set xtics rotate by -20
plot for [i=2:6] dir.'/traffic_clients.dat' using i:xtic(1) title columnhead(i)
unset multiplot

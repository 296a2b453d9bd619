# The comparison chart (bench/run.sh compare):
#   gnuplot -c bench/compare/compare.gp OUT TITLE KEYS KEYS_SHOWN
# reads OUT/compare.dat (bench_compare) and draws OUT/compare.png. KEYS: the many-keys count (0: the cost
# was not measured, those panels say so); KEYS_SHOWN: the same for people ("1,000,000"). Every range
# comes from the data.
dir = ARG1
title = ARG2
keys = int(ARG3)
keys_shown = ARG4
data = dir.'/compare.dat'
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
set multiplot layout 2,2 title "The five policies side by side (".title.")"
if (keys > 0) {
  set yrange [0:*]
  set title 'Cost: ns per check (less is better)'
  plot data using 2:xtic(1) title 'hot key', '' using 3 title keys_shown.' keys', '' using 4 title '2 threads, one key'
  set title 'Memory: heap bytes per key, '.keys_shown.' keys'
  plot data using 5:xtic(1) title 'bytes per key' lc rgb '#4477aa'
} else {
  do for [panel in "Cost Memory"] {
    set title panel
    set yrange [0:1]
    set label 1 'not measured (--keys 0)' at graph 0.5, graph 0.5 center
    plot data using (0):xtic(1) notitle lc rgb '#ffffff'
    unset label 1
  }
}
set title 'Accuracy (1 = the limit)'
set autoscale y  # stats counts only the points inside the current range
stats data using 6 nooutput
top = STATS_max
stats data using 7 nooutput
top = (STATS_max > top ? STATS_max : top) * 1.15
set yrange [0:(top > 1.2 ? top : 1.2)]
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#aa3333'
plot data using 6:xtic(1) title 'most in any window / limit', '' using 7 title 'steady client admitted'
unset arrow 1
set title 'After a burst, in windows (log scale)'
set autoscale y
stats data using (($8 > 0) ? $8 : NaN) nooutput
low = STATS_min
high = STATS_max
stats data using (($9 > 0) ? $9 : NaN) nooutput
low = STATS_min < low ? STATS_min : low
high = STATS_max > high ? STATS_max : high
set logscale y
set yrange [low / 2:high * 2]
plot data using 8:xtic(1) title 'passes again after', '' using 9 title 'Retry-After told'
unset multiplot

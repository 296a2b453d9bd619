# The chart of bench_adaptive's capacity-change run: the limit and the p99 latency per 100 ms of each limiter
# while the capacity halves and doubles back (include/ratelimit/concurrency/README.md "Evaluation").
# Usage: bench_adaptive --series adaptive_series.csv; gnuplot -c bench/adaptive.gp adaptive_series.csv out.svg
series = exists("ARG1") && ARG1 ne "" ? ARG1 : "adaptive_series.csv"
out = exists("ARG2") && ARG2 ne "" ? ARG2 : "adaptive.svg"
set terminal svg size 900,640 font "sans,11" background "white"
set output out
set datafile separator ","
set termoption noenhanced
set grid ytics
set key outside right top
set xrange [0:30]
set multiplot layout 2,1
set title "Limit (capacity C = 100, 50 from 10 s to 20 s; Poisson arrivals at 2 x 100)"
set ylabel "limit (requests in service)"
set yrange [0:160]
plot series index 1 using 1:2 with steps lw 2 lc rgb "black" dt 2 title "capacity", \
     series index 1 using 1:3 with steps lw 1.5 lc rgb "#1f77b4" title "gradient", \
     series index 2 using 1:3 with steps lw 1.5 lc rgb "#2ca02c" title "vegas", \
     series index 0 using 1:3 with steps lw 1 lc rgb "#ff7f0e" title "aimd"
set title "p99 latency per 100 ms (queue wait + service); SLO = 2 x unloaded p99"
set ylabel "p99 (ms)"
set xlabel "simulated time (s)"
set yrange [0:500]
plot series index 1 using 1:4 with lines lw 1.5 lc rgb "#1f77b4" title "gradient", \
     series index 2 using 1:4 with lines lw 1.5 lc rgb "#2ca02c" title "vegas", \
     series index 0 using 1:4 with lines lw 1 lc rgb "#ff7f0e" title "aimd", \
     series index 4 using 1:4 with lines lw 1 lc rgb "#7f7f7f" title "static 100", \
     series index 5 using 1:4 with lines lw 1 lc rgb "#d62728" title "static 400"
unset multiplot

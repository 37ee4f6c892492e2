set terminal svg size 960,360 dynamic font 'sans,11'
set output 'marlin-w4a16-g128-zp-f16.svg'
set multiplot layout 1,3 title 'marlin-w4a16-g128-zp-f16'
set style fill solid 0.6
set boxwidth 0.8
unset key
set xlabel '|err|/E'
set ylabel 'elements (log)'
set logscale y
set yrange [0.8:*]
set xtics ('0' 0, '.25' 5, '.5' 10, '.75' 15, '>=1' 20)
plot 'marlin-w4a16-g128-zp-f16.dat' index 1 using 1:2 with boxes lc rgb '#3b6ea8'
set xlabel 'ulps to RN(y)'
set xtics ('0' 0, '1' 1, '2' 2, '3' 3, '4-7' 4, '8-15' 5, '>=16' 6)
plot 'marlin-w4a16-g128-zp-f16.dat' index 2 using 1:2 with boxes lc rgb '#5a9a5a'
set xtics auto
set logscale xy
set xlabel 'K'
set ylabel '|err|'
set format y '%.0e'
set yrange [*:*]
set key top left font ',9'
plot 'marlin-w4a16-g128-zp-f16.dat' index 0 using 1:2 with points pt 7 ps 0.4 lc rgb '#3b6ea8' title 'max |err|', '' index 0 using 1:3 with points pt 6 ps 0.5 lc rgb '#c0392b' title 'α·G'
unset multiplot

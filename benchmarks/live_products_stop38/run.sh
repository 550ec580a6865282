#!/bin/bash
# Stop 38: the old product (snapshot before part 3, its shipped file) against the new, hybrid@64, seed 0, side by side.
out=/work/main/benchmarks/live_products_stop38
mkdir -p $out
for w in R18:1 C2D:3 TBG:2 CAP:3; do
  for code in old new; do
    f=$out/${w/:/_}-$code-s0.json
    [ -s $f ] && continue
    if [ $code = old ]; then pp=/tmp/s38/snap_old; else pp=/work/main; fi
    wd=$(mktemp -d)
    echo "[side] $w $code $(date -u +%H:%M:%S)" >&2
    (cd $wd && PYTHONPATH=$pp nice -n 5 python -m tvm_latmodel.cli.main tune --workload $w --trials 64 --seed 0 --json --work-dir $wd/db > $f.tmp 2>$wd/err.log) && mv $f.tmp $f
    python -c "import tvm_latmodel,sys" 
    rm -rf $wd
  done
done

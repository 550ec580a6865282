#!/bin/bash
# stop 28 part 4: gathered operands lane by lane, arithmetic vector; judged on fresh set 3.
# The OLD results are part 3's files (same code, same data), copied here before the run.
# OLD = HEAD's code (snapshot /tmp/snap28c) with the shipped file A (the product as it is);
# NEW = the change (snapshot /tmp/snap28d) with C, the shipped residual refitted on the new terms.
set -e
OLD=/tmp/snap28c
NEW=/tmp/snap28e
N=/work/main/tuning_logs/cpu-znver4-net
SET3="$N/FCV_8 $N/FCV_9 $N/FCV_10 $N/FCV_11 $N/FCV_12 $N/FCV_13 $N/MXP_4 $N/FDN_5 $N/FDN_6 $N/FDN_7 $N/RSZ_2"
O=/work/main/benchmarks/pretrained_stop28_p4
mkdir -p $O
A=$OLD/tvm_latmodel/model/pretrained/cpu-x86.json
C=/tmp/s28/C4.json
[ -s $C ] || (cd $NEW && PYTHONPATH=$NEW python -W ignore scripts/train_shipped_model.py tuning_logs/remeasured-znver4/* --hold-out -o $C)
echo "$(date -u +%T) C fitted"
run() { root=$1; out=$2; shift 2; [ -s $O/$out ] || (cd $root && PYTHONPATH=$root python -W ignore -m tvm_latmodel.cli.main replay "$@" --json > $O/$out.tmp) && mv -f $O/$out.tmp $O/$out 2>/dev/null || true; echo "$(date -u +%T) $out"; }
run $OLD set3_analytical_old_0.json --model analytical $SET3
run $NEW set3_analytical_new_0.json --model analytical $SET3
run $OLD set3_A_old_0.json --model hybrid --pretrained $A $SET3
run $NEW set3_C_new_0.json --model hybrid --pretrained $C $SET3
for s in 0 1 2 3 4; do
  run $OLD set3_A_old_16_s$s.json --model hybrid --pretrained $A --shots 16 --seed $s $SET3
  run $NEW set3_C_new_16_s$s.json --model hybrid --pretrained $C --shots 16 --seed $s $SET3
done
echo done

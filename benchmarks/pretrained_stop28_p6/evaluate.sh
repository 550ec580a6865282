#!/bin/bash
# stop 28 part 6: gathered vectors shared across unrolled copies (+ LLVM unroll over vector loops); judged on fresh set 4.
# OLD = HEAD's code (snapshot /tmp/snap28c) with the shipped file A (the product as it is);
# NEW = the change (snapshot /tmp/snap28d) with C, the shipped residual refitted on the new terms.
set -e
OLD=/tmp/snap28c
NEW=/tmp/snap28f
N=/work/main/tuning_logs/cpu-znver4-net
SET4="$N/FCV_14 $N/FCV_15 $N/FCV_16 $N/FCV_17 $N/FCV_18 $N/FCV_19 $N/FCV_20 $N/MXP_5 $N/MXP_6 $N/FDN_8"  # TAK_0 dropped: all 33 runs failed (random int64 indices), no valid record
O=/work/main/benchmarks/pretrained_stop28_p6
mkdir -p $O
A=$OLD/tvm_latmodel/model/pretrained/cpu-x86.json
C=/tmp/s28/C6.json
[ -s $C ] || (cd $NEW && PYTHONPATH=$NEW python -W ignore scripts/train_shipped_model.py tuning_logs/remeasured-znver4/* --hold-out -o $C)
echo "$(date -u +%T) C fitted"
run() { root=$1; out=$2; shift 2; [ -s $O/$out ] || (cd $root && PYTHONPATH=$root python -W ignore -m tvm_latmodel.cli.main replay "$@" --json > $O/$out.tmp) && mv -f $O/$out.tmp $O/$out 2>/dev/null || true; echo "$(date -u +%T) $out"; }
run $OLD set4_analytical_old_0.json --model analytical $SET4
run $NEW set4_analytical_new_0.json --model analytical $SET4
run $OLD set4_A_old_0.json --model hybrid --pretrained $A $SET4
run $NEW set4_C_new_0.json --model hybrid --pretrained $C $SET4
for s in 0 1 2 3 4; do
  run $OLD set4_A_old_16_s$s.json --model hybrid --pretrained $A --shots 16 --seed $s $SET4
  run $NEW set4_C_new_16_s$s.json --model hybrid --pretrained $C --shots 16 --seed $s $SET4
done
echo done

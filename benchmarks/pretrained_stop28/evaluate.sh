#!/bin/bash
# stop 28 part 2: shipped residual refitted on the 53 logs with the strided auto-vector terms (C) vs the shipped file (A), on fresh set 2
set -e
S=/tmp/snap28b
cd $S
export PYTHONPATH=$S
N=/work/main/tuning_logs/cpu-znver4-net
SET2="$N/FCV_4 $N/FCV_5 $N/FCV_6 $N/FCV_7 $N/MXP_2 $N/MXP_3 $N/FDN_2 $N/FDN_3 $N/FDN_4 $N/RSZ_1 $N/APL_1"
SET1="$N/FCV_0 $N/FCV_1 $N/FCV_2 $N/FCV_3 $N/MXP_0 $N/MXP_1 $N/FDN_0 $N/FDN_1 $N/LNM_0 $N/RSZ_0 $N/APL_0"
O=/work/main/benchmarks/pretrained_stop28
mkdir -p $O
A=$S/tvm_latmodel/model/pretrained/cpu-x86.json
C=/tmp/s28/C.json
[ -s $C ] || python -W ignore scripts/train_shipped_model.py tuning_logs/remeasured-znver4/* --hold-out -o $C
echo "$(date -u +%T) C fitted"
run() { out=$1; shift; [ -s $O/$out ] || python -W ignore -m tvm_latmodel.cli.main replay "$@" --json > $O/$out.tmp && mv $O/$out.tmp $O/$out; echo "$(date -u +%T) $out"; }
run set2_analytical_0.json --model analytical $SET2
run set2_A_0.json --model hybrid --pretrained $A $SET2
run set2_C_0.json --model hybrid --pretrained $C $SET2
for s in 0 1 2 3 4; do
  run set2_A_16_s$s.json --model hybrid --pretrained $A --shots 16 --seed $s $SET2
  run set2_C_16_s$s.json --model hybrid --pretrained $C --shots 16 --seed $s $SET2
done
run set1_C_0.json --model hybrid --pretrained $C $SET1
run set1_A_0.json --model hybrid --pretrained $A $SET1
echo done

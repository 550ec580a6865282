#!/bin/bash
# stop 26: shipped residual refit on parts 1-2's features, judged by stop 19's rule against
# benchmarks/pretrained_stop25/A_* (the file shipped now, on the code before); also the file shipped now on the new code (A').
set -e
S=$1   # snapshot of the new code
cd $S
export PYTHONPATH=$S
L=tuning_logs/remeasured-znver4
TRAIN="C1D_0 C2D_1 C3D_1 GMM_1 GRP_0 DIL_1 DEP_0 T2D_3 CAP_2 NRM_3 SFM_3 CBR_2 TBG_0 C1D_1 C1D_2 MBV2_0 MBV2_1 MBV2_2 MBV2_3 MBV2_4"
EVAL=""
for d in $(ls $L); do case " $TRAIN " in *" $d "*) ;; *) EVAL="$EVAL $L/$d";; esac; done
O=/work/main/benchmarks/pretrained_stop26
mkdir -p $O
A=$S/tvm_latmodel/model/pretrained/cpu-x86.json
[ -s /tmp/s26/B.json ] || python -W ignore scripts/train_shipped_model.py $(for t in $TRAIN; do echo $L/$t; done) --hold-out XFM -o /tmp/s26/B.json
run() { out=$1; shift; [ -s $O/$out ] || python -W ignore -m tvm_latmodel.cli.main replay "$@" --json $EVAL > $O/$out.tmp && mv $O/$out.tmp $O/$out; echo "$(date -u +%T) $out"; }
run analytical_0.json --model analytical
run B_0.json --model hybrid --pretrained /tmp/s26/B.json
for s in 0 1 2 3 4; do
  run B_16_s$s.json --model hybrid --pretrained /tmp/s26/B.json --shots 16 --seed $s
done
run Anew_0.json --model hybrid --pretrained $A
for s in 0 1 2 3 4; do
  run Anew_16_s$s.json --model hybrid --pretrained $A --shots 16 --seed $s
done
echo done

#!/bin/bash
# Stop 43 part 2 (PROTOCOL_stop43.md): null changes judged against HEAD on the used sets 22 and 23.
# /tmp/s43/old = `git archive` of 7141b32's tree (the package as it ships); /tmp/s43/null = the same with
# benchmarks/modes/null_change_stop43.patch applied (latency x exp(sigma z), z from a hash of the summary).
# HEAD's replays are copied from the judges of stops 42-43, so only the null side is replayed.
# Part 2: the defaults (17:01-17:31); part 2 continued: SIGMAS=0.02 SALTS="c d e f" (from 17:57).
# Results: benchmarks/judge_null_stop43/<set>_s<sigma>_<salt>/ (the null side's replays and summary.md).
cd /work/main
S22="T2D_8 C3D_4 DIL_6 CBR_8 GMM_11 C1D_11 DEP_18 C2D_17 GRP_10 NRM_9"
S23="T2D_9 C3D_5 DIL_7 CBR_9 GMM_12 C1D_12 DEP_19 C2D_18 GRP_11 NRM_10"
for sigma in ${SIGMAS:-0.02 0.1}; do for salt in ${SALTS:-a b}; do for set in 22 23; do
  if [ $set = 22 ]; then S=$S22; SRC=benchmarks/judge_set22_stop42; else S=$S23; SRC=benchmarks/judge_set23_stop43; fi
  L=""; for n in $S; do L="$L tuning_logs/cpu-rocketlake-te/$n"; done
  OUT=/tmp/s43/null_out/set${set}_s${sigma}_${salt}; mkdir -p $OUT
  cp -n $SRC/set${set}_A_old_*.json $SRC/set${set}_analytical_old_0.json $OUT/
  PYTHONHASHSEED=0 LATMODEL_NULL_SIGMA=$sigma LATMODEL_NULL_SALT=$salt nice -n 5 python3 scripts/judge_shipped_change.py $L \
    --old /tmp/s43/old --new /tmp/s43/null --old-model /tmp/s43/old/tvm_latmodel/model/pretrained/cpu-x86.json \
    --new-model /tmp/s43/old/tvm_latmodel/model/pretrained/cpu-x86.json --out $OUT --name set$set \
    --top1-tolerance 0.01 --seeds 0 1 2 3 4 > $OUT.log 2>&1
done; done; done
echo ALLDONE

#!/usr/bin/env bash
# Training throughput of the main job (configs/default.yaml) at 1, 2 and 4 ranks on this machine,
# and the scaling relative to 1 rank, in one run. Same data, model and global batch (32) for every
# world size; compute.threads is set so ranks × threads = the cores. Not a test.
#   usage: bench/run_train_scaling.sh [BUILD_DIR] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}; STEPS=${2:-40}
ZT=$B/zerotune
CORES=$(nproc)
"$ZT" make-demo-data --out runs/demo_data --train-rows 4000 --test-rows 200 --seed 1234 >/dev/null
printf "%-6s %-8s %-14s %-10s\n" ranks threads tokens/s scaling
base=""
for W in 1 2 4; do
  T=$(( CORES / W )); [ "$T" -ge 1 ] || T=1
  exp=bench_scaling_w$W
  rm -rf runs/$exp
  start=$(date +%s.%N)
  "$ZT" launch --num_processes $W train --config configs/default.yaml exp_name=$exp \
    trainer.max_steps=$STEPS trainer.eval_strategy=no trainer.save_strategy=no \
    trainer.logging_steps=$STEPS compute.threads=$T trainer.per_device_train_batch_size=$((32 / W / 2)) \
    >runs/$exp.log 2>&1
  end=$(date +%s.%N)
  tokens=$(python3 -c "import json;print([json.loads(l) for l in open('runs/$exp/metrics.jsonl')][-1]['num_tokens'])")
  tps=$(python3 -c "print(round($tokens/($end-$start)))")
  [ -n "$base" ] || base=$tps
  printf "%-6s %-8s %-14s %-10s\n" $W $T $tps $(python3 -c "print(f'{$tps/$base:.2f}x')")
done
echo "(tokens/s = input tokens of $STEPS optimizer steps / wall time of the whole command, start-up included)"

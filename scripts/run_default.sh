#!/usr/bin/env bash
# The embedded default job: writes the deterministic arithmetic dataset, then trains the tiny
# Qwen2-architecture model from scratch with the shipped Qwen2.5 tokenizer under 2 local ranks and
# ZeRO stage 2 (configs/default.yaml) — on the GPUs when there are any (one rank per GPU, at most
# 2; the global batch stays 32, so one GPU runs accumulation 4), else on the CPU. Outputs: runs/default/{args.yaml, metrics.jsonl,
# tensorboard/, checkpoint-*/, final/}. Extra arguments are config overrides (key.path=value).
set -euo pipefail
cd "$(dirname "$0")/.."
ZT=./build/zerotune
[ -x "$ZT" ] || { echo "run_default: $ZT is missing; run ./scripts/build.sh first" >&2; exit 1; }
"$ZT" make-demo-data --out runs/demo_data --train-rows 4000 --test-rows 200 --seed 1234
# zerotune refuses to overwrite an earlier run in the same exp_dir; this demo replaces its own.
rm -rf runs/default
ranks=2
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [ "${gpus:-0}" -gt 0 ] && "$ZT" version 2>/dev/null | grep -q "cuda"; then
  ranks=$(( gpus < 2 ? gpus : 2 ))
  echo "run_default: $gpus GPU(s) visible: $ranks rank(s) on the GPU"
fi
"$ZT" launch --num_processes "$ranks" train --config configs/default.yaml compute.n_gpus="$ranks" "$@"
echo "run_default: logs in runs/default/metrics.jsonl, TensorBoard in runs/default/tensorboard, final model in runs/default/final"

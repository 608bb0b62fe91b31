#!/usr/bin/env bash
# The embedded default job: writes the deterministic arithmetic dataset, then trains the tiny
# Qwen2-architecture model from scratch with the shipped Qwen2.5 tokenizer under 2 local ranks and
# ZeRO stage 2 (configs/default.yaml). Outputs: runs/default/{args.yaml, metrics.jsonl,
# tensorboard/, checkpoint-*/, final/}. Extra arguments are config overrides (key.path=value).
set -euo pipefail
cd "$(dirname "$0")/.."
ZT=./build/zerotune
[ -x "$ZT" ] || { echo "run_default: $ZT is missing; run ./scripts/build.sh first" >&2; exit 1; }
"$ZT" make-demo-data --out runs/demo_data --train-rows 4000 --test-rows 200 --seed 1234
# zerotune refuses to overwrite an earlier run in the same exp_dir; this demo replaces its own.
rm -rf runs/default
"$ZT" launch --num_processes 2 train --config configs/default.yaml "$@"
echo "run_default: logs in runs/default/metrics.jsonl, TensorBoard in runs/default/tensorboard, final model in runs/default/final"

#!/usr/bin/env bash
# Deterministic reduce-scatter (all-to-all + rank-order sum) vs ncclReduceScatter on N local GPUs,
# one process per GPU with the torchrun-style variables (bench/bench_nccl_reduce_scatter.cpp).
#   bench/run_nccl_reduce_scatter.sh [N=2] [build_dir=build]
set -euo pipefail
n=${1:-2}
build=${2:-build}
port=$((29500 + RANDOM % 2000))
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$build/bench/bench_nccl_reduce_scatter" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status

#!/usr/bin/env bash
# The Hopper attention backward at every query-heads-per-block G (AttnProblem::bwd_heads_per_block)
# and at the cost model's choice, for the issue-18 layer shapes (D 128 12/2, D 64 14/2 and 32/8 at
# 4 x 2k, 1 x 8k, 1 x 32k; at 4 x 2k each G in both block orders, --order seq and tile, which
# differ only with several sequences): one bench_cuda_attention run each (random inputs), backward
# ms and TFLOP/s, and the hash of dq, dk, dv (it differs across G: dK/dV group the heads' terms
# differently; the auto row equals its G's row). It fails when a run fails, when a forced G is not
# the one run, when the model's choice is not a divisor, or when the two block orders' hashes
# differ; the timings are for reading, not pass/fail. Run on the GPU machine with the bundle
# (sources scripts/gpu_env.sh).
# Usage: bench/run_attn_heads_per_block.sh [OUT_FILE]
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. "$ROOT/scripts/gpu_env.sh" || exit 1
B=$BUNDLE/bin/bench_cuda_attention
out=${1:-}
status=0
{
  printf '%-22s %-10s %10s %8s  %s\n' shape G "bwd ms" TFLOP/s hash
  for shape in "2048 4 12 2 128" "8192 1 12 2 128" "32768 1 12 2 128" \
               "2048 4 14 2 64" "8192 1 14 2 64" "32768 1 14 2 64" \
               "2048 4 32 8 64" "8192 1 32 8 64" "32768 1 32 8 64"; do
    read -r S n Hq Hkv D <<<"$shape"
    rep=$((Hq / Hkv))
    gs=()
    for ((g = 1; g <= rep; ++g)); do ((rep % g == 0)) && gs+=("$g"); done
    runs=() seq_hash=
    for g in "${gs[@]}"; do
      if ((n > 1)); then runs+=("$g:seq" "$g:tile"); else runs+=("$g:"); fi
    done
    for run in "${runs[@]}" auto:; do
      g=${run%%:*} o=${run#*:}
      args=("$S" "$n" "$Hq" "$Hkv" "$D" bf16 auto --random)
      [ "$g" != auto ] && args+=(--hpb "$g")
      [ -n "$o" ] && args+=(--order "$o")
      if ! r=$("$B" "${args[@]}" 2>&1); then
        echo "FAIL: bench_cuda_attention ${args[*]}: $r"
        status=1
        continue
      fi
      G=$(sed -n 's/.*query heads per block \([0-9]*\).*/\1/p' <<<"$r")
      ms=$(awk '/backward/ && /ms/ {print $2}' <<<"$r")
      tf=$(awk '/backward/ && /ms/ {print $4}' <<<"$r")
      h=$(sed -n 's/.*backward \([0-9a-f]\{16\}\).*/\1/p' <<<"$r")
      if [ -z "$G" ] || [ -z "$ms" ] || ((rep % G != 0)) || { [ "$g" != auto ] && [ "$G" != "$g" ]; }; then
        echo "FAIL: ${args[*]}: no timing, or heads per block '$G' is not the one asked for: $r"
        status=1
        continue
      fi
      # The order decides which block runs when, never a value: both orders' hashes must agree.
      if [ "$o" = seq ]; then
        seq_hash=$h
      elif [ "$o" = tile ] && [ "$h" != "$seq_hash" ]; then
        echo "FAIL: ${args[*]}: hash $h differs from --order seq's $seq_hash"
        status=1
      fi
      label=$g${o:+/$o}
      [ "$g" = auto ] && label="auto($G)"
      printf '%-22s %-10s %10s %8s  %s\n' "${n}x${S} ${Hq}/${Hkv} D$D" "$label" "$ms" "$tf" "$h"
    done
  done
  exit "$status"
} | if [ -n "$out" ]; then tee "$out"; else cat; fi
exit "${PIPESTATUS[0]}"

#!/usr/bin/env bash
# End-to-end A/B of two or more builds on a GPU machine, in one call: for each variant directory
# (made here by `scripts/gpu_train_ab.sh --pack NAME [BUILD_DIR]`) bench_cuda_lm_head once, then
# bench_train_gpu on each (config, shape, GC) row, the variants interleaved and each row repeated
# (AB_REPS, default 2), so that the machine's drift falls on both alike. Prints one line per run:
# config shape GC variant rep tokens/s peak-GiB [step losses] — equal losses mean equal bits.
# The shared libraries come from gpu_bundle/lib (scripts/gpu_bundle.sh): carry ["gpu_bundle",
# "ab_bundle"]. The token files are those of `gpu_check.sh bench` (numpy default_rng(0)).
#
# Usage (here):   scripts/gpu_train_ab.sh --pack NAME [BUILD_DIR]
# Usage (device): scripts/gpu_train_ab.sh [NAME ...]   (every ab_bundle/* when none is named)
#   AB_ROWS (default "qwen2.5-1.5b:4x2048:nogc qwen2.5-1.5b:1x8192:gc llama-3.2-1b:4x2048:nogc
#   llama-3.2-1b:1x8192:gc"), AB_REPS, AB_WARMUP (1), AB_STEPS (3).
# Exit status: 1 when a run exits non-zero or prints no JSON.
set -uo pipefail
cd "$(dirname "$0")/.."
AB=ab_bundle
if [ "${1:-}" = "--pack" ]; then
  exec scripts/ab_pack.sh "${2:?"--pack NAME [BUILD_DIR]"}" "${3:-build}" bench/bench_train_gpu bench/bench_cuda_lm_head
fi

ROOT=$PWD
. "$ROOT/scripts/gpu_env.sh" || exit 1
names=("$@")
[ ${#names[@]} -eq 0 ] && for d in "$AB"/*/; do names+=("$(basename "$d")"); done
[ ${#names[@]} -eq 0 ] && { echo "gpu_train_ab.sh: no variant in $AB/" >&2; exit 2; }
rows=${AB_ROWS:-"qwen2.5-1.5b:4x2048:nogc qwen2.5-1.5b:1x8192:gc llama-3.2-1b:4x2048:nogc llama-3.2-1b:1x8192:gc"}
reps=${AB_REPS:-2} warmup=${AB_WARMUP:-1} steps=${AB_STEPS:-3}
tmp=$(mktemp -d)
status=0
config_path() {
  case $1 in
    qwen2.5-1.5b) echo "$SHARED/models/qwen2.5-1.5b/config.json" ;;
    llama-3.2-1b) echo "$ROOT/tests/data/families/configs/llama-3.2-1b_hub.json" ;;
    *) return 1 ;;
  esac
}
for n in "${names[@]}"; do
  find "$AB/$n" -name '*.gz' -exec gzip -df {} \;
  chmod +x "$AB/$n"/bench_* 2>/dev/null
  echo "== bench_cuda_lm_head 8192: $n ($(cat "$AB/$n/commit" 2>/dev/null))"
  timeout 300 "$AB/$n/bench_cuda_lm_head" 8192 2>&1 | grep -E "dW|512 MiB|2048 MiB" || status=1
done
echo "== bench_train_gpu (config shape GC variant rep: tokens/s peak-GiB losses)"
for row in $rows; do
  IFS=: read -r cfg shape gc <<<"$row"
  path=$(config_path "$cfg") || { echo "unknown config $cfg"; status=1; continue; }
  seqs=${shape%x*} seq=${shape#*x}
  tok=$tmp/tokens_${cfg}_$shape.bin
  python3 - "$path" "$tok" $((warmup + steps)) "$seqs" "$seq" <<'PY'
import json, sys, numpy as np
c = json.load(open(sys.argv[1]))
v = c.get("vocab_size") or c["text_config"]["vocab_size"]
rows, seqs, seq = (int(x) for x in sys.argv[3:6])
np.random.default_rng(0).integers(0, v, size=(rows, seqs, seq), dtype=np.int32).tofile(sys.argv[2])
PY
  flags=""
  [ "$gc" = gc ] && flags=--gc
  for rep in $(seq 1 "$reps"); do
    for n in "${names[@]}"; do
      # shellcheck disable=SC2086  # flags: zero or one word
      line=$(timeout 300 "$AB/$n/bench_train_gpu" --config "$path" --tokens "$tok" --seqs "$seqs" \
        --seq "$seq" --warmup "$warmup" --steps "$steps" $flags 2>&1 | tail -1)
      if ! echo "$line" | grep -q '^{'; then
        echo "$cfg $shape $gc $n $rep FAILED: $line"
        status=1
        continue
      fi
      echo "$line" | python3 -c '
import json, sys
r = json.loads(sys.stdin.read()); a = sys.argv[1:]
print(*a, round(r["tokens_per_s"]), r.get("peak_gib", r.get("alloc_gib")), r.get("losses"))' \
        "$cfg" "$shape" "$gc" "$n" "$rep"
    done
  done
done
rm -rf "$tmp"
exit $status

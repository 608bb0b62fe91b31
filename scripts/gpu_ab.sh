#!/usr/bin/env bash
# A/B of attention kernel variants on a GPU machine, in one call: for each variant directory (made
# here by `scripts/gpu_ab.sh --pack NAME [BUILD_DIR]` from a build of that variant) it runs the
# attention GPU tests and bench_cuda_attention at the issue-18 shapes (--random inputs), each
# command under a timeout (a hung kernel costs its timeout, not the whole call), printing as it
# goes, then one table of forward / backward TFLOP/s per variant. Each shape's output hashes are
# compared with the first variant's (a variant meant to be bitwise equal must print "same"; a
# difference is printed, not failed on: some variants change the rounding on purpose). The shared
# libraries come from gpu_bundle/lib (scripts/gpu_bundle.sh), so carry ["gpu_bundle", "ab_bundle"].
#
# Usage (here):   scripts/gpu_ab.sh --pack NAME [BUILD_DIR]   copies BUILD_DIR's (default build)
#                                                             zt_test_gpu and bench_cuda_attention,
#                                                             stripped and gzipped, to ab_bundle/NAME
# Usage (device): scripts/gpu_ab.sh [NAME ...]                 every ab_bundle/* when none is named
# Exit status: 1 when a variant's tests fail, time out, or a benchmark prints no figures.
set -uo pipefail
cd "$(dirname "$0")/.."
AB=ab_bundle
if [ "${1:-}" = "--pack" ]; then
  exec scripts/ab_pack.sh "${2:?"--pack NAME [BUILD_DIR]"}" "${3:-build}" zt_test_gpu bench/bench_cuda_attention
fi

ROOT=$PWD
. "$ROOT/scripts/gpu_env.sh" || exit 1
names=("$@")
[ ${#names[@]} -eq 0 ] && for d in "$AB"/*/; do names+=("$(basename "$d")"); done
[ ${#names[@]} -eq 0 ] && { echo "gpu_ab.sh: no variant in $AB/" >&2; exit 2; }
shapes=("2048 4 12 2 128" "8192 1 12 2 128" "32768 1 12 2 128" "2048 4 14 2 64" "8192 1 14 2 64"
        "32768 1 14 2 64" "2048 4 32 8 64" "8192 1 32 8 64" "32768 1 32 8 64")
status=0
table=$(mktemp) hashes=$(mktemp)
for n in "${names[@]}"; do
  d=$AB/$n
  find "$d" -name '*.gz' -exec gzip -df {} \;
  chmod +x "$d"/zt_test_gpu "$d"/bench_cuda_attention 2>/dev/null
  echo "== $n ($(cat "$d/commit" 2>/dev/null))"
  out=$(timeout 180 "$d/zt_test_gpu" --gtest_filter='CudaAttention.*' 2>&1)
  rc=$?
  echo "$out" | grep -E "Hopper vs mma|PASSED|FAILED|Failure" | head -12
  [ $rc -eq 0 ] || { echo "   tests: exit $rc (124: timed out)"; status=1; }
  row="$n"
  for s in "${shapes[@]}"; do
    line=$(timeout 60 "$d/bench_cuda_attention" $s --random 2>&1)
    f=$(echo "$line" | awk '$1 == "forward" {print $4}') b=$(echo "$line" | awk '$1 == "backward" {print $4}')
    [ -n "$f" ] && [ -n "$b" ] || { echo "   bench $s: no figures"; status=1; f=-; b=-; }
    # A variant built before --random existed reads it as the dtype and runs on constant inputs.
    echo "$line" | grep -q "(random inputs)" ||
      { echo "   bench $s: not on random inputs (a build older than --random?)"; status=1; }
    # Bitwise check against the first variant on the same random inputs (the hash line: FNV-1a
    # of the forward's O and lse, the backward's dQ, dK, dV).
    hf=$(echo "$line" | awk '$1 == "hash" {print $3}') hb=$(echo "$line" | awk '$1 == "hash" {print $5}')
    key=$(echo "$s" | tr ' ' _)
    same=""
    if [ "$n" = "${names[0]}" ]; then
      echo "$key $hf $hb" >>"$hashes"
    else
      read -r _ rf rb < <(grep "^$key " "$hashes")
      [ "$hf" = "$rf" ] && sf=same || sf=DIFFERS
      [ "$hb" = "$rb" ] && sb=same || sb=DIFFERS
      same=" (vs ${names[0]}: fwd $sf, bwd $sb)"
    fi
    echo "   $s: fwd $f bwd $b  hash $hf $hb$same"
    row="$row $f/$b"
  done
  echo "$row" >>"$table"
done
echo "== forward/backward TFLOP/s (shapes: 4x2k, 8k, 32k at 12/2 D128; 14/2 D64; 32/8 D64)"
awk '{printf "%-14s", $1; for (i = 2; i <= NF; i++) printf " %11s", $i; print ""}' "$table"
exit $status

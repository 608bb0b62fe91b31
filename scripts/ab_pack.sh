#!/usr/bin/env bash
# Packs binaries of a build for a GPU A/B (scripts/gpu_ab.sh, scripts/gpu_train_ab.sh): copies each
# BUILD_DIR/PATH, stripped and gzipped, into ab_bundle/NAME, with the commit it was built from.
# Usage: scripts/ab_pack.sh NAME BUILD_DIR PATH...   (PATH relative to BUILD_DIR, e.g. bench/bench_train_gpu)
# Exit status: 2 when a binary is not built.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?"NAME BUILD_DIR PATH..."} b=${2:?"NAME BUILD_DIR PATH..."}
shift 2
mkdir -p "ab_bundle/$name"
for p in "$@"; do
  f=$b/$p
  [ -x "$f" ] || { echo "ab_pack.sh: $f not built" >&2; exit 2; }
  cp "$f" "ab_bundle/$name/" && strip "ab_bundle/$name/$(basename "$f")" &&
    gzip -f "ab_bundle/$name/$(basename "$f")"
done
git rev-parse --short HEAD >"ab_bundle/$name/commit" 2>/dev/null
echo "packed ab_bundle/$name ($(du -sh "ab_bundle/$name" | cut -f1))"

#!/usr/bin/env bash
# Configures and builds zerotune into ./build (Release).
# Usage: scripts/build.sh [-j N | -jN] [cmake configure argument …]
#   -j N, -jN   build with N parallel jobs (default: nproc), as make's -j
#   the rest    go to cmake's configure step (e.g. -DZT_CUDA=OFF); its output is build.configure.log
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=""
cmake_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -j)
      [ $# -ge 2 ] || { echo "build.sh: -j needs a number of jobs (-j N or -jN)" >&2; exit 2; }
      jobs="$2"
      shift 2
      ;;
    -j*)
      jobs="${1#-j}"
      shift
      ;;
    *)
      cmake_args+=("$1")
      shift
      ;;
  esac
done
if [ -z "$jobs" ]; then
  jobs="$(nproc)"
elif ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
  echo "build.sh: -j $jobs: expected a positive number of jobs" >&2
  exit 2
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${cmake_args[@]+"${cmake_args[@]}"} \
  >build.configure.log 2>&1 || { cat build.configure.log; exit 1; }
cmake --build build -j "$jobs"

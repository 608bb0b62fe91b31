#!/usr/bin/env bash
# Packs a built tree for the GPU machine (run here, where it was built): the binaries that
# scripts/gpu_check.sh runs, plus the shared libraries the GPU image lacks, into gpu_bundle/
# (git-ignored; name it in the device tool's `carry`). The GPU image (Ubuntu 24.04, CUDA 13) has
# the CUDA libraries, NCCL, OpenBLAS, OpenMPI, libgomp and pyarrow 25 (whose Arrow/Parquet
# libraries the binaries use there, which is why scripts/setup.sh pins pyarrow 25.0.1); what it
# lacks (yaml-cpp 0.7, utf8proc, …) is copied from this machine. Binaries are stripped to keep the
# carried tree small (the tool carries 64 MiB in all).
# Usage: scripts/gpu_bundle.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
out=gpu_bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=("$B/zerotune")
[ -x "$B/zt_test_gpu" ] && bins+=("$B/zt_test_gpu")
for b in "$B"/bench/bench_*; do [ -x "$b" ] && bins+=("$b"); done
# The CUPTI tracer (a library the driver injects: gpu_check.sh timeline); libcupti comes with it.
[ -f "$B/bench/libzt_gpu_trace.so" ] && bins+=("$B/bench/libzt_gpu_trace.so")
for b in "${bins[@]}"; do
  cp "$b" "$out/bin/"
  strip "$out/bin/$(basename "$b")"
done
# Libraries: every resolved dependency except the system's, CUDA's, NCCL, Arrow/Parquet (from the
# image's pyarrow), OpenBLAS, OpenMPI and libgomp (the image has them with the same sonames).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libstdc\+\+|libgcc_s|libpthread|libdl\.|librt\.|libcuda|libcudart|libcublas|libnccl|libarrow|libparquet|libopenblas|libmpi|libopen-|libgomp|libhwloc|libevent|libz\.|libpmix|libudev|libcrypto|libssl)'
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \//{print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ "$name" =~ $skip ]]; then cp -L "$path" "$out/lib/$name"; fi
done
# The shared files the GPU tests and benchmarks read (../shared does not travel to the GPU machine).
S=../shared/data
for f in models/qwen2.5-0.5b-instruct/config.json models/qwen2.5-1.5b/config.json \
         models/qwen2.5-1.5b-instruct/config.json tokenizers/qwen2.5-instruct/tokenizer.json \
         tokenizers/qwen2.5-instruct/tokenizer_config.json \
         datasets/ultrafeedback/seed_format/sft.parquet datasets/ultrafeedback/seed_format/test_sft.parquet \
         tokenizers/qwen3/tokenizer.json tokenizers/qwen3/tokenizer_config.json; do
  mkdir -p "$out/shared_data/$(dirname "$f")"
  cp "$S/$f" "$out/shared_data/$f"
done
# The users' stack as a peer (TRL SFTTrainer + accelerate + DeepSpeed; bench/peer_deepspeed.sh runs it
# from gpu_bundle/peers/ and passes it the shared_data/ paths above: the Qwen2.5-1.5B config, the
# tokenizer, sft.parquet / test_sft.parquet). Its Python packages travel as wheels in .whl/ (bench/README.md).
if [ -d ../shared/peers ]; then
  mkdir -p "$out/peers"
  cp ../shared/peers/*.py ../shared/peers/*.sh "$out/peers/"
fi
# Compressed to stay inside the tool's 64 MiB with the tree (gpu_check.sh unpacks every *.gz under
# the bundle before it runs): binaries carry sm_89 + sm_90 fatbins (59 MB -> ~17 MB), tokenizers 7 -> 2 MB.
gzip -9f "$out/shared_data/tokenizers/qwen3/tokenizer.json" "$out/shared_data/tokenizers/qwen2.5-instruct/tokenizer.json"
gzip -6f "$out"/bin/*
# The users' own files (gpu_check.sh familyjob runs them unchanged).
if [ -d ../shared/seed_configs ]; then
  mkdir -p "$out/seed_configs"
  cp ../shared/seed_configs/*.yaml "$out/seed_configs/"
fi
# Where the build machine's binaries look for test data (gpu_check.sh links these paths there).
{
  echo "BUILD_TEST_DATA=$(cd tests/data && pwd)"
  echo "BUILD_SHARED_DATA=$(cd "$S" && pwd)"
} >"$out/paths"
du -sh "$out"
ls "$out/lib"

#!/usr/bin/env bash
# Tokenizer throughput, zerotune vs HF `tokenizers` (Rust, through its Python binding), on the same
# texts in one run: every prompt, chosen and rejected text of the UltraFeedback sample, encoded
# with encode_batch (add_special_tokens=False) on the same number of threads (RAYON_NUM_THREADS for
# HF), best of $REPEAT runs after a warm-up run. Prints tokens/s of both and the ratio.
#
#   bench/run_tokenize.sh                  # threads "1 2", Qwen2.5 tokenizer
#   THREADS="1 2 4" BUILD_DIR=build-x TOKENIZER=path/to/dir bench/run_tokenize.sh
#
# Environment: BUILD_DIR (default build; holds bench/bench_tokenize), PYTHON (default
# /work/goldenv/bin/python; if it cannot import tokenizers, a venv with `pip install tokenizers` is
# made at $BENCH_VENV, default $BUILD_DIR/venv-tokenizers), TOKENIZER, DATA, THREADS, REPEAT.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
PYTHON="${PYTHON:-/work/goldenv/bin/python}"
TOKENIZER="${TOKENIZER:-$ROOT/../shared/data/tokenizers/qwen2.5-instruct}"
DATA="${DATA:-$ROOT/../shared/data/datasets/ultrafeedback/train_prefs_1000.jsonl}"
THREADS="${THREADS:-1 2}"
REPEAT="${REPEAT:-3}"
BENCH="$BUILD_DIR/bench/bench_tokenize"

if [ ! -x "$BENCH" ]; then
  echo "run_tokenize: $BENCH not found; build it: cmake --build $BUILD_DIR --target bench_tokenize" >&2
  exit 1
fi
if ! "$PYTHON" -c "import tokenizers" >/dev/null 2>&1; then
  VENV="${BENCH_VENV:-$BUILD_DIR/venv-tokenizers}"
  echo "run_tokenize: $PYTHON cannot import tokenizers; installing it into $VENV" >&2
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q tokenizers
  PYTHON="$VENV/bin/python"
fi

hf_bench() {  # threads
  RAYON_NUM_THREADS="$1" TOKENIZERS_PARALLELISM=true "$PYTHON" - "$TOKENIZER" "$DATA" "$REPEAT" "$1" <<'EOF'
import json, os, sys, time
import tokenizers
from tokenizers import Tokenizer

path, data, repeat, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if os.path.isdir(path):
    path = os.path.join(path, "tokenizer.json")
texts = []
with open(data, encoding="utf-8") as f:
    for line in f:
        row = json.loads(line)
        texts += [row["prompt"], row["chosen"], row["rejected"]]
t0 = time.perf_counter()
tok = Tokenizer.from_file(path)
load = time.perf_counter() - t0


def best_of(fn):
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


tokens = sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
sec = best_of(lambda: tok.encode_batch(texts, add_special_tokens=False))
extra = ""
if hasattr(tok, "encode_batch_fast"):
    fast = best_of(lambda: tok.encode_batch_fast(texts, add_special_tokens=False))
    extra = f" fast_seconds={fast:.4f} fast_tokens_per_s={tokens / fast:.0f}"
print(f"hf tokenizers={tokenizers.__version__} load_s={load:.3f} threads={threads} "
      f"tokens={tokens} seconds={sec:.4f} tokens_per_s={tokens / sec:.0f}{extra}")
EOF
}

field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

echo "tokenizer: $TOKENIZER"
echo "data:      $DATA"
for t in $THREADS; do
  zt_out="$("$BENCH" --tokenizer "$TOKENIZER" --data "$DATA" --threads "$t" --repeat "$REPEAT")"
  zt="$(echo "$zt_out" | grep '^zerotune')"
  hf="$(hf_bench "$t")"
  echo "$zt_out"
  echo "$hf"
  zt_tok="$(field "$zt" tokens)"
  hf_tok="$(field "$hf" tokens)"
  if [ "$zt_tok" != "$hf_tok" ]; then
    echo "run_tokenize: WARNING: token counts differ (zerotune $zt_tok, HF $hf_tok)" >&2
  fi
  zt_tps="$(field "$zt" tokens_per_s)"
  hf_tps="$(field "$hf" tokens_per_s)"
  hf_fast="$(field "$hf" fast_tokens_per_s)"
  ratio="$(awk -v a="$zt_tps" -v b="$hf_tps" 'BEGIN { printf "%.2f", a / b }')"
  line="threads=$t zerotune=${zt_tps} tok/s  hf encode_batch=${hf_tps} tok/s  ratio=${ratio}x"
  if [ -n "$hf_fast" ]; then
    line="$line  (hf encode_batch_fast=${hf_fast} tok/s, ratio $(awk -v a="$zt_tps" -v b="$hf_fast" 'BEGIN { printf "%.2f", a / b }')x)"
  fi
  echo "RESULT $line"
done

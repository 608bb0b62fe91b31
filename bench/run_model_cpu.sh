#!/usr/bin/env bash
# Forward+backward tokens/s of the same small Qwen2 model (hidden 512, 4 layers, 8/2 heads,
# intermediate 1536, vocab 32000, untied; one sequence of 2048 tokens, every token a target) in
# zerotune's CPU backend and in PyTorch (transformers, fp32, eager attention), with the same thread
# count, in one run. Prints both JSON lines and the ratio.
#
# Usage: bench/run_model_cpu.sh [BUILD_DIR]   (BUILD_DIR default: build; needs bench_model_cpu)
# Environment: THREADS (default 2), TOKENS (2048), STEPS (3), PYTHON (/work/goldenv/bin/python,
# needs torch + transformers), EXTRA (extra bench_model_cpu flags, e.g. "--checkpointing").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${1:-build}"
THREADS="${THREADS:-2}"
TOKENS="${TOKENS:-2048}"
STEPS="${STEPS:-3}"
PYTHON="${PYTHON:-/work/goldenv/bin/python}"
BIN="$BUILD/bench/bench_model_cpu"
[ -x "$BIN" ] || { echo "run_model_cpu: $BIN not built (cmake --build $BUILD --target bench_model_cpu)" >&2; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/config.json" <<'EOF'
{
  "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 32000,
  "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 4,
  "num_attention_heads": 8, "num_key_value_heads": 2, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
  "hidden_act": "silu", "initializer_range": 0.02, "torch_dtype": "float32"
}
EOF

export OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"
ZT="$("$BIN" --config "$TMP/config.json" --tokens "$TOKENS" --steps "$STEPS" ${EXTRA:-})"
echo "$ZT"

PT="$("$PYTHON" - "$TMP/config.json" "$TOKENS" "$STEPS" "$THREADS" <<'EOF'
import json, sys, time
import torch
from transformers import AutoConfig, AutoModelForCausalLM
cfg_path, tokens, steps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(1234)
cfg = AutoConfig.from_pretrained(cfg_path)
model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)
model.train()
ids = torch.randint(0, cfg.vocab_size, (1, tokens), generator=torch.Generator().manual_seed(7))
def step():
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    return float(out.loss)
loss = step()  # warm-up
t0 = time.perf_counter()
for _ in range(steps):
    loss = step()
sec = (time.perf_counter() - t0) / steps
print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                  "tokens": tokens, "steps": steps, "loss": loss, "seconds_per_step": sec,
                  "tokens_per_second": tokens / sec}))
EOF
)"
echo "$PT"
python3 - "$ZT" "$PT" <<'EOF'
import json, sys
z, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
zt, pt = z["tokens_per_second"], p["tokens_per_second"]
print(f"zerotune {zt:.0f} tok/s, pytorch {pt:.0f} tok/s, ratio zerotune/pytorch = {zt / pt:.2f} "
      f"({z['threads']} threads, {z['tokens']} tokens, forward+backward, fp32)")
EOF

#!/usr/bin/env bash
# Side by side on one host's GPUs (2 × H200): the users' stack — TRL SFTTrainer + accelerate + DeepSpeed
# ZeRO, the peer gpu_bundle/peers/trl_deepspeed_sft.{py,sh} (scripts/gpu_bundle.sh copies it there from
# ../shared/peers) — and zerotune (gpu_bundle/bin/zerotune), on the same job: the Qwen2.5-1.5B config
# (random init), the UltraFeedback seed-format sft.parquet (199 rows) formatted with the chat template,
# per-device micro-batch 4, global batch 40 (gradient accumulation 5 on 2 GPUs), max_length 4096, bf16,
# gradient checkpointing, learning rate 2e-5 linear (TRL's SFTConfig defaults), STEPS optimizer steps,
# no eval, no checkpoint; ZeRO-1/2/3 each with CPU optimizer offload ("off") and without ("nooff").
# The peer runs with OMP_NUM_THREADS=1 and full_determinism as the users' train.sh / sft.yaml do.
#
# Run ON the GPU machine from the repo root, with gpu_bundle/ and .whl/ carried:
#   PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
#     .whl/*.whl && export PYTHONPATH=/tmp/site && bench/peer_deepspeed.sh [PEER_BUDGET_S] [ZT_BUDGET_S]
#   PEER_BUDGET_S (default 420): the peer starts no run that its last run's time says cannot end inside
#     this many seconds from its start (model init included); a run still going at the end is cut off and
#     enters the summary as complete=false from its logged steps (the peer launcher's own mechanism).
#   ZT_BUDGET_S (default 120, 0 = skip zerotune): the same for zerotune's runs, which go first.
# Environment: RUNS (the peer's runs in order, default below; NAME@VER runs DeepSpeed VER installed from
#   .whl/ds-VER/*.whl, e.g. z1_off@0.18.2, the users' version), ZT_RUNS (zerotune's, default the same
#   names), STEPS (8; the first 2 are not timed), LIGER (0; the users' sft.yaml says 1), NPROC (2),
#   OUT (default ./peer_results), ZT_EXTRA (more zerotune overrides, last so they win; e.g. for a CPU
#   check of this script: "compute.backend=cpu compute.global_batch_size=8").
# Output in $OUT (7 files): peer_deepspeed.jsonl — one JSON line per run of either system (fields:
#   bench/peer_deepspeed_summary.py); results.jsonl, results.jsonl.partial, log_runs.txt — the peer's
#   own records and log; zt_metrics.jsonl — zerotune's metrics.jsonl lines tagged with "run"; host_mem.tsv
#   — bench/host_mem_sampler.py's samples; run_log.txt — this script's log (versions, zerotune's log tails).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
PEER_BUDGET=${1:-420}
ZT_BUDGET=${2:-120}
OUT=${OUT:-$ROOT/peer_results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUNDLE=$ROOT/gpu_bundle
D=$BUNDLE/shared_data
WORK=${WORK:-/tmp/peer_ds}
mkdir -p "$WORK"
STEPS=${STEPS:-8}
NPROC=${NPROC:-2}
MB=4
GB=40
RUNS=${RUNS:-"z1_off z2_off z2_nooff z1_nooff z3_nooff z3_off"}
ZT_RUNS=${ZT_RUNS:-"z1_off z2_off z2_nooff z1_nooff z3_nooff z3_off"}
LOG=$OUT/run_log.txt
# never NVLink multicast on the shared hosts (KINDS.md); also for the ranks accelerate and zerotune start
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
START=$(date +%s)
say() { echo "[peer_deepspeed +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }

TRAIN=$D/datasets/ultrafeedback/seed_format/sft.parquet
EVAL=$D/datasets/ultrafeedback/seed_format/test_sft.parquet
CONFIG_DIR=$D/models/qwen2.5-1.5b
TOK_DIR=$D/tokenizers/qwen2.5-instruct
for f in "$TRAIN" "$EVAL" "$CONFIG_DIR/config.json" "$TOK_DIR/tokenizer.json" \
         "$BUNDLE/peers/trl_deepspeed_sft.py" "$BUNDLE/peers/trl_deepspeed_sft.sh"; do
  [ -f "$f" ] || { say "missing $f: build gpu_bundle/ with scripts/gpu_bundle.sh and carry it"; exit 2; }
done
nvidia-smi -L 2>&1 | tee -a "$LOG"

# A second DeepSpeed for NAME@VER runs: .whl/ds-VER/*.whl → /tmp/ds-VER (the peer puts it first on PYTHONPATH).
for d in .whl/ds-*/; do
  [ -d "$d" ] || continue
  v=$(basename "$d")
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "/tmp/$v" "$d"*.whl \
    && say "installed $d into /tmp/$v"
done
PEER_OK=1
if python3 -c "import torch, transformers, accelerate, trl, datasets, deepspeed, pydantic
print('versions: torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__,
      'accelerate', accelerate.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__,
      'deepspeed', deepspeed.__version__, 'pydantic', pydantic.__version__, 'GPUs', torch.cuda.device_count())" \
    >>"$LOG" 2>&1; then
  tail -1 "$LOG"
else
  PEER_OK=0
  say "the peer's packages do not import (see run_log.txt): PYTHONPATH=${PYTHONPATH:-} — peer skipped"
fi

python3 bench/host_mem_sampler.py --out "$OUT/host_mem.tsv" --interval 1 &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT

# ---- zerotune: the same job through its HF-shaped config (configs/sft_ultrafeedback.yaml + overrides)
ZT=$BUNDLE/bin/zerotune
: >"$OUT/zt_metrics.jsonl"
if [ "$ZT_BUDGET" -gt 0 ] && [ -x "$ZT" ]; then
  PA_DIR=$(python3 -c 'import pyarrow, os; print(os.path.dirname(pyarrow.__file__))' 2>/dev/null || true)
  ZT_VERSION=$(LD_LIBRARY_PATH="$BUNDLE/lib:$PA_DIR:${LD_LIBRARY_PATH:-}" "$ZT" version 2>&1 | head -1)
  say "zerotune: $ZT_VERSION; runs: $ZT_RUNS; budget ${ZT_BUDGET}s"
  zt0=$(date +%s)
  est=30  # seconds a run is expected to take before one has been timed
  for name in $ZT_RUNS; do
    stage=$(echo "$name" | sed -E 's/^z([0-3])_.*/\1/')
    off=false; case "$name" in *_off*) off=true;; esac
    left=$(( ZT_BUDGET - ($(date +%s) - zt0) ))
    if [ "$left" -lt "$est" ]; then say "zerotune SKIP $name: ${left}s left < ${est}s"; continue; fi
    tag=zt_$name
    exp=$WORK/zt/$tag
    rm -rf "$exp"
    t0=$(date +%s)
    # shellcheck disable=SC2086  # ZT_EXTRA is a list of KEY=VALUE words
    LD_LIBRARY_PATH="$BUNDLE/lib:$PA_DIR:${LD_LIBRARY_PATH:-}" timeout -k 5 "$left" \
      "$ZT" launch --num_processes "$NPROC" train --config configs/sft_ultrafeedback.yaml \
      compute.n_gpus="$NPROC" compute.backend=cuda compute.global_batch_size=$GB compute.zero_stage="$stage" \
      compute.offload_optimizer=$off model.name_or_path="$CONFIG_DIR" model.tokenizer_name_or_path="$TOK_DIR" \
      dataset.train.path="$TRAIN" dataset.eval.path="$EVAL" trainer.per_device_train_batch_size=$MB \
      trainer.max_length=4096 trainer.max_steps="$STEPS" trainer.num_train_epochs=3 trainer.learning_rate=2.0e-5 \
      trainer.lr_scheduler_type=linear trainer.warmup_ratio=0 trainer.logging_steps=1 trainer.eval_strategy=no \
      trainer.save_strategy=no trainer.gradient_checkpointing=true trainer.bf16=true trainer.report_to=none \
      exp_dir="$exp" ${ZT_EXTRA:-} >"$WORK/$tag.log" 2>&1
    rc=$?
    dt=$(( $(date +%s) - t0 ))
    say "zerotune END $tag (stage $stage, offload $off) rc=$rc ${dt}s"
    { echo "----- $tag rc=$rc ${dt}s (log tail)"; grep -v "^{'loss'" "$WORK/$tag.log" | tail -15; } >>"$LOG"
    python3 - "$exp/metrics.jsonl" "$WORK/$tag.log" "$tag" "$rc" "$STEPS" "$ZT_VERSION" >>"$OUT/zt_metrics.jsonl" <<'PY'
import json, os, re, sys
path, log, tag, rc, steps, ver = sys.argv[1:]
meta = dict(run=tag, _meta=True, rc=int(rc), max_steps=int(steps), version=ver)
# the batch shape zerotune planned, from its log line "plan: N samples, world size W, micro-batch M,
# accumulation A → global batch G; …"
m = re.search(r"plan: .*?world size (\d+), micro-batch (\d+), accumulation (\d+) . global batch (\d+)",
              open(log, errors="replace").read() if os.path.exists(log) else "")
if m:
    meta.update(world_size=int(m.group(1)), per_device_batch=int(m.group(2)), grad_accum=int(m.group(3)),
                global_batch=int(m.group(4)))
print(json.dumps(meta))
if os.path.exists(path):
    for line in open(path):
        if line.strip():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            r["run"] = tag
            print(json.dumps(r))
PY
    rm -rf "$exp/final"  # the exported model (zerotune always exports at the end, as the users' sft.py saves)
    [ "$rc" -eq 0 ] && est=$(( dt + 5 ))
  done
else
  say "zerotune: skipped (budget $ZT_BUDGET s, binary $([ -x "$ZT" ] && echo present || echo missing))"
fi

# ---- the peer: TRL SFTTrainer + accelerate + DeepSpeed, its own launcher and budget
if [ "$PEER_OK" = 1 ] && [ "$PEER_BUDGET" -gt 0 ]; then
  say "peer: runs $RUNS; budget ${PEER_BUDGET}s; LIGER=${LIGER:-0}"
  PWORK=$WORK/peer
  OUT=$OUT WORK=$PWORK NPROC=$NPROC RUNS=$RUNS DEADLINE_S=$PEER_BUDGET EST_S=${EST_S:-120} LIGER=${LIGER:-0} \
    INIT_EXTRA="--config_dir $CONFIG_DIR --tokenizer_dir $TOK_DIR" \
    EXTRA="--train $TRAIN --eval $EVAL --max_steps $STEPS --per_device_train_batch_size $MB --global_batch_size $GB
           --eval_on_start 0 --eval_steps 1000000 --output_dir $PWORK/runs" \
    bash "$BUNDLE/peers/trl_deepspeed_sft.sh"
  say "peer: launcher rc=$?"
fi

kill "$SAMPLER" 2>/dev/null
wait "$SAMPLER" 2>/dev/null
python3 bench/peer_deepspeed_summary.py --peer "$OUT/results.jsonl" --peer-partial "$OUT/results.jsonl.partial" \
  --zt-metrics "$OUT/zt_metrics.jsonl" --host-mem "$OUT/host_mem.tsv" --world-size "$NPROC" \
  --out "$OUT/peer_deepspeed.jsonl" 2>&1 | tee -a "$LOG"
say "done: $OUT/peer_deepspeed.jsonl"

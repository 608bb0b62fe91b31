#!/usr/bin/env python3
"""Checks that zerotune checkpoints' trainer_state.json load as transformers' TrainerState.

Run with transformers 4.57.1 (the users' version):
    python tools/check_trainer_state_loads.py EXP_DIR_OR_CHECKPOINT [REFERENCE_CHECKPOINT]

For every checkpoint-*/trainer_state.json under EXP_DIR (or the one CHECKPOINT): loads it with
`TrainerState.load_from_json` (which is `TrainerState(**json.loads(text))`), checks that saving the
loaded state with `save_to_json` gives back the same JSON value (nothing dropped or retyped), that
every log_history record has a "step" no later than global_step, and that zerotune's own keys are
absent. With REFERENCE_CHECKPOINT (a TRL / transformers checkpoint), also that both files have the
same keys and that each field has the same JSON type where both are set. Exit 0 when all pass.
"""
import json
import sys
import tempfile
from pathlib import Path

from transformers import TrainerState

ZEROTUNE_KEYS = {"applied_steps", "num_tokens_seen", "world_size", "zero_stage", "run_id", "plan",
                 "lr_schedule", "optimizer", "data_pipeline", "eval_pending", "train_loss_sum",
                 "metric_for_best_model", "greater_is_better"}


def check(path, ref):
    raw = json.loads(path.read_text())
    state = TrainerState.load_from_json(str(path))
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "trainer_state.json"
        state.save_to_json(str(out))
        again = json.loads(out.read_text())
    problems = []
    if again != raw:
        problems.append("save_to_json(load_from_json(file)) differs from the file")
    if ZEROTUNE_KEYS & set(raw):
        problems.append(f"zerotune keys: {sorted(ZEROTUNE_KEYS & set(raw))}")
    late = [e for e in state.log_history if e["step"] > state.global_step]
    if late:
        problems.append(f"log_history records after global_step: {late}")
    if ref is not None:
        if set(raw) != set(ref):
            problems.append(f"keys differ from the reference: {sorted(set(raw) ^ set(ref))}")
        for k in set(raw) & set(ref):
            if raw[k] is not None and ref[k] is not None and type(raw[k]) is not type(ref[k]):
                problems.append(f"{k}: {type(raw[k]).__name__}, reference {type(ref[k]).__name__}")
    print(f"{path}: loaded (global_step {state.global_step}, {len(state.log_history)} records, "
          f"epoch {state.epoch}, total_flos {state.total_flos})"
          + ("" if not problems else "; " + "; ".join(problems)))
    return not problems


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    root = Path(sys.argv[1])
    ref = None
    if len(sys.argv) == 3:
        ref = json.loads((Path(sys.argv[2]) / "trainer_state.json").read_text())
    files = ([root / "trainer_state.json"] if (root / "trainer_state.json").exists()
             else sorted(root.glob("checkpoint-*/trainer_state.json")))
    if not files:
        raise SystemExit(f"{root}: no trainer_state.json")
    ok = all([check(f, ref) for f in files])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Makes tests/data/train/trainer_state_fields.golden.json from transformers' TrainerState, and
tests/data/train/trainer_state_steps.golden.json: the logging_steps / eval_steps / save_steps a
TrainerState holds (and trainer_state.json writes) for given TrainingArguments values.

Run with transformers 4.57.1 (the users' version; torch installed, as transformers' Trainer needs):
    python tools/make_trainer_state_golden.py

Records what a checkpoint's trainer_state.json must hold for `TrainerState.load_from_json` (which is
`TrainerState(**json.loads(text))`) to load it and for the file to be the one `save_to_json` writes:
every dataclass field in declaration order with its annotation, the JSON types its values take
(from the annotation: int -> integer, float -> number, bool -> boolean, str -> string, list -> array,
dict -> object, Optional adds null; plus the types the values written in the steps golden's cases
take, since the dataclass does not enforce its annotations: logging_steps / eval_steps /
save_steps, annotated int, hold the float given where its strategy is not steps, 10.0 or 2.5) and
its default, the key order save_to_json writes (sorted), and the TrainerControl state kept under
stateful_callbacks. The tests read it without Python.

The steps golden: per case, the strategies and the logging_steps / eval_steps / save_steps given
(null, an integer or a float, as a YAML config gives them) to TRL 0.25.1's SFTConfig (transformers'
TrainingArguments.__post_init__: eval_steps null or 0 under eval_strategy steps takes
logging_steps; a value > 1 under its strategy steps becomes int(value)), then
`TrainerState.compute_steps(args, max_steps)` (a value < 1 becomes math.ceil(max_steps * value); a
null stays the dataclass default 500): the three values as json.dumps writes them (10 or 10.0, a
fraction such as 2.5 as given where its strategy is not steps). Where TrainingArguments refuses the
values (a fraction above 1 under its strategy steps) the case has "error": the exception's type
and message, and no state.
"""
import dataclasses
import json
import typing
from pathlib import Path

import transformers
from transformers import TrainerControl, TrainerState

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "train" / "trainer_state_fields.golden.json"
STEPS_OUT = ROOT / "tests" / "data" / "train" / "trainer_state_steps.golden.json"

# (logging_strategy, logging_steps, eval_strategy, eval_steps, save_strategy, save_steps, max_steps)
STEPS_CASES = [
    ("steps", 10, "steps", None, "steps", 500, 100),      # eval_steps null: logging_steps
    ("steps", 10.0, "steps", None, "steps", 20.0, 100),   # whole floats under steps: int()
    ("steps", 1.0, "steps", None, "steps", 1.0, 100),     # 1.0 is not > 1: stays a float
    ("steps", 0.1, "steps", None, "steps", 0.25, 37),     # ratios: math.ceil(37 * r)
    ("steps", 10, "steps", 0, "steps", 0, 100),           # eval_steps 0: logging_steps
    ("steps", 10, "steps", 0.0, "no", 0.0, 100),
    ("steps", 10, "steps", 10.0, "steps", 500, 100),
    ("steps", 10, "steps", 0.07, "steps", 0.07, 100),     # 100 * 0.07 = 7.000000000000001
    ("steps", 10, "epoch", None, "epoch", 500, 100),      # eval_steps null, not steps: 500
    ("steps", 10, "epoch", 0, "epoch", 0, 100),           # an explicit 0 stays 0
    ("steps", 10, "no", 0.0, "no", 0, 100),               # 0.0: math.ceil(100 * 0.0), an int
    ("steps", 10, "epoch", 10.0, "epoch", 20.0, 100),     # whole floats not under steps: floats
    ("steps", 10, "no", 10.0, "best", 20.0, 100),
    ("steps", 10, "epoch", 0.25, "epoch", 0.5, 37),       # ratios resolve whatever the strategy
    ("epoch", 10.0, "steps", None, "steps", 500, 100),    # eval copies logging's 10.0, int()s it
    ("epoch", 10.0, "epoch", None, "epoch", 500, 100),
    ("no", 1.0, "steps", None, "steps", 500, 100),
    ("steps", 0.5, "epoch", None, "steps", 2, 3),
    # fractions above 1: taken (and recorded as given) where their strategy is not steps
    ("epoch", 2.5, "epoch", 7.5, "epoch", 12.5, 100),
    ("no", 1.5, "no", 0.5, "no", 3.25, 37),               # 0.5: a ratio whatever the strategy
    ("steps", 10, "epoch", 2.5, "steps", 20, 100),
    ("epoch", 2.5, "steps", 10, "steps", 20, 100),
    ("steps", 10, "no", None, "epoch", 2.5, 100),
    # ... and refused under steps; eval_steps null copies logging_steps' 2.5 under eval steps
    ("steps", 2.5, "no", None, "steps", 500, 100),
    ("steps", 10, "steps", 2.5, "steps", 500, 100),
    ("steps", 10, "no", None, "steps", 2.5, 100),
    ("epoch", 2.5, "steps", None, "steps", 500, 100),
    ("epoch", 2.5, "steps", 0, "epoch", 500, 100),
]

# JSON types of the Python types TrainerState's annotations use.
SCALARS = {int: ["integer"], float: ["number"], bool: ["boolean"], str: ["string"]}


def json_types(tp):
    """The JSON value types json.dumps gives a value of annotation `tp` (a float field may hold an
    int: Python's json writes 0 for total_flos's default 0, so "number" covers both)."""
    if isinstance(tp, str):  # a forward reference: list["TrainerCallback"]
        raise SystemExit(f"unexpected string annotation {tp!r}")
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        out = []
        for a in typing.get_args(tp):
            for t in (["null"] if a is type(None) else json_types(a)):
                if t not in out:
                    out.append(t)
        return out
    if origin in (list, tuple) or tp in (list, tuple):
        return ["array"]
    if origin is dict or tp is dict:
        return ["object"]
    if tp in SCALARS:
        return SCALARS[tp]
    if tp is TrainerCallback:
        return ["object"]
    raise SystemExit(f"no JSON type for annotation {tp!r}")


def annotation_text(tp):
    """`int`, `Optional[float]`, `list[dict[str, float]]`: the annotation as the source writes it."""
    text = tp.__name__ if isinstance(tp, type) and not typing.get_args(tp) else str(tp)
    return text.replace("typing.", "").replace(f"{__name__}.", "")


class TrainerCallback:  # stands for the forward reference in stateful_callbacks' annotation
    pass


def json_type_of(value):
    """The JSON type json.dumps writes `value` as (bool before int: a bool is an int)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    raise SystemExit(f"unexpected steps value {value!r}")


def main():
    written = write_steps_golden()
    hints = typing.get_type_hints(TrainerState, localns={"TrainerCallback": TrainerCallback})
    fields = []
    for f in dataclasses.fields(TrainerState):
        default = f.default if f.default is not dataclasses.MISSING else None
        types = list(json_types(hints[f.name]))  # a copy: SCALARS holds the lists
        # The types of the values TrainerState actually held in the steps cases.
        for t in written.get(f.name, []):
            if t not in types:
                types.append(t)
        # stateful_callbacks is annotated as a list of callbacks but __post_init__ turns it into a
        # dict {class name: state}, which save_to_json writes and load_from_json takes back.
        if f.name == "stateful_callbacks":
            types = ["object", "null"]
        fields.append({
            "name": f.name,
            "annotation": annotation_text(hints[f.name]),
            "json_types": types,
            "default": default,
        })
    state = TrainerState(stateful_callbacks=[TrainerControl()])
    saved = json.loads(json.dumps(dataclasses.asdict(state), indent=2, sort_keys=True))
    golden = {
        "transformers": transformers.__version__,
        "fields": fields,
        "saved_key_order": list(saved),
        "trainer_control_state": TrainerControl().state(),
    }
    OUT.write_text(json.dumps(golden, indent=2) + "\n")
    print(f"wrote {OUT} ({len(fields)} fields, transformers {transformers.__version__})")


def write_steps_golden():
    import tempfile

    import trl
    from trl import SFTConfig

    cases = []
    written = {}  # field -> the JSON types of its values in the cases' states
    for ls, lv, es, ev, ss, sv, max_steps in STEPS_CASES:
        case = {
            "logging_strategy": ls, "logging_steps": lv, "eval_strategy": es, "eval_steps": ev,
            "save_strategy": ss, "save_steps": sv, "max_steps": max_steps,
        }
        try:
            args = SFTConfig(output_dir=tempfile.mkdtemp(), report_to=[], use_cpu=True,
                             bf16=False, logging_strategy=ls, logging_steps=lv, eval_strategy=es,
                             eval_steps=ev, save_strategy=ss, save_steps=sv)
        except ValueError as e:
            case["error"] = {"type": type(e).__name__, "message": str(e)}
            cases.append(case)
            continue
        state = TrainerState()
        state.compute_steps(args, max_steps)
        values = {"logging_steps": state.logging_steps, "eval_steps": state.eval_steps,
                  "save_steps": state.save_steps}
        for name, v in values.items():
            types = written.setdefault(name, [])
            if json_type_of(v) not in types:
                types.append(json_type_of(v))
        # json.dumps of the state's values: an int, or a float written with its ".0"
        case["state"] = json.loads(json.dumps(values))
        case["state_text"] = json.dumps(list(values.values()))
        cases.append(case)
    golden = {"transformers": transformers.__version__, "trl": trl.__version__, "cases": cases}
    STEPS_OUT.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {STEPS_OUT} ({len(cases)} cases)")
    return written


if __name__ == "__main__":
    main()

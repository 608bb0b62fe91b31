#!/usr/bin/env python3
"""Makes tests/data/train/trainer_state_fields.golden.json from transformers' TrainerState.

Run with transformers 4.57.1 (the users' version; torch installed, as transformers' Trainer needs):
    python tools/make_trainer_state_golden.py

Records what a checkpoint's trainer_state.json must hold for `TrainerState.load_from_json` (which is
`TrainerState(**json.loads(text))`) to load it and for the file to be the one `save_to_json` writes:
every dataclass field in declaration order with its annotation, the JSON types its values take
(from the annotation: int -> integer, float -> number, bool -> boolean, str -> string, list -> array,
dict -> object, Optional adds null) and its default, the key order save_to_json writes (sorted),
and the TrainerControl state kept under stateful_callbacks. The tests read it without Python.
"""
import dataclasses
import json
import typing
from pathlib import Path

import transformers
from transformers import TrainerControl, TrainerState

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "train" / "trainer_state_fields.golden.json"

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


def main():
    hints = typing.get_type_hints(TrainerState, localns={"TrainerCallback": TrainerCallback})
    fields = []
    for f in dataclasses.fields(TrainerState):
        default = f.default if f.default is not dataclasses.MISSING else None
        types = json_types(hints[f.name])
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


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes tests/data/cli/dict_field_strings.json: what transformers 4.57.1's
TrainingArguments.__post_init__ makes of a dict field (lr_scheduler_kwargs, …) given as a string:
one that starts with "{" is json.loads'ed and its string values converted by _convert_str_dict;
any other string is left as it is.

Run with transformers 4.57.1 (no torch needed):
    python tools/make_dict_field_goldens.py
Each case: {"text", "value"} (the field's value after __post_init__'s loop), or {"text",
"error"} (the exception's type) where json.loads raises.
"""
import copy
import json
import os

import transformers
from transformers.training_args import TrainingArguments, _convert_str_dict

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "cli")

TEXTS = [
    '{"min_lr": 1e-6}',
    '{"min_lr_rate": "0.1", "num_cycles": "3"}',
    '{"num_cycles": "true"}',  # True, which a schedule computes with as 1
    '{"a": "TRUE", "b": "False", "c": "007", "d": "0.5", "e": ".5", "f": "5.", "g": "1e-6",'
    ' "h": "-3", "i": " 5", "j": "1.2.3", "k": ".", "l": "", "m": {"n": "12", "o": ["1"]},'
    ' "p": 3, "q": "yes", "r": "1_000", "s": "a", "s": "2", "t": null, "u": "tRuE"}',
    '{}',
    '{"x": {"y": {"z": "false"}}}',
    ' {"min_lr": 1e-6}',
    'min_lr=1e-6',
    '',
    '{"min_lr": 1e-6',
    "{'min_lr': 1e-6}",
    '{"min_lr": 1e-6} x',
]


def after_post_init(text):
    """TrainingArguments.__post_init__'s loop over _VALID_DICT_FIELDS, for one field's value."""
    assert "lr_scheduler_kwargs" in TrainingArguments._VALID_DICT_FIELDS
    passed_value = text
    if isinstance(passed_value, str) and passed_value.startswith("{"):
        loaded_dict = json.loads(passed_value)
        return _convert_str_dict(loaded_dict)
    return passed_value


def main():
    assert transformers.__version__ == "4.57.1", transformers.__version__
    cases = []
    for text in TEXTS:
        try:
            cases.append({"text": text, "value": after_post_init(copy.copy(text))})
        except Exception as e:  # noqa: BLE001 - the type is the golden
            cases.append({"text": text, "error": type(e).__name__})
    with open(os.path.join(OUT, "dict_field_strings.json"), "w") as f:
        json.dump({"generator": "tools/make_dict_field_goldens.py",
                   "transformers": transformers.__version__, "cases": cases}, f, indent=1)
        f.write("\n")
    print(len(cases), "cases")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Makes tests/data/tokenizer/config_flags.golden.json with transformers' AutoTokenizer.

Run with transformers 4.57.1 (the users' version; torch not needed):
    python tools/make_tokenizer_flag_goldens.py

transformers' LlamaTokenizerFast / GemmaTokenizerFast / … rebuild the post-processor from
tokenizer_config.json's add_bos_token / add_eos_token (update_post_processor); PreTrainedTokenizerFast
and Qwen2Tokenizer keep tokenizer.json's. For test tokenizers of tests/data/families with each flag
variant written into a copy of tokenizer_config.json, records the ids of a few texts with and without
special tokens, as AutoTokenizer gives them.
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

import transformers
from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ROOT / "tests" / "data" / "families"
TEXTS = ["hello world", "Q: hi A"]
CASES = [
    # (tokenizer directory, flags written into tokenizer_config.json; None: key removed)
    ("mistral_v3", {}),
    ("mistral_v3", {"add_eos_token": True}),
    ("mistral_v3", {"add_bos_token": False}),
    ("mistral_v3", {"add_bos_token": False, "add_eos_token": True}),
    ("mistral_v3", {"add_bos_token": None, "add_eos_token": None}),
    ("gemma_style", {"add_eos_token": True}),
    ("mistral_v3", {"tokenizer_class": "PreTrainedTokenizerFast", "add_eos_token": True,
                    "add_bos_token": False}),
]


def main():
    out = {"transformers": transformers.__version__, "cases": []}
    for name, flags in CASES:
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            shutil.copy(FAMILIES / name / "tokenizer.json", d / "tokenizer.json")
            cfg = json.loads((FAMILIES / name / "tokenizer_config.json").read_text())
            for k, v in flags.items():
                if v is None:
                    cfg.pop(k, None)
                else:
                    cfg[k] = v
            (d / "tokenizer_config.json").write_text(json.dumps(cfg))
            tok = AutoTokenizer.from_pretrained(str(d))
            out["cases"].append({
                "tokenizer": name,
                "config": {k: cfg.get(k) for k in ("tokenizer_class", "add_bos_token",
                                                   "add_eos_token")},
                "class": type(tok).__name__,
                "texts": [{"text": t,
                           "special": tok(t).input_ids,
                           "plain": tok(t, add_special_tokens=False).input_ids} for t in TEXTS],
            })
    dest = ROOT / "tests" / "data" / "tokenizer" / "config_flags.golden.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {dest}", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Makes tests/data/tokenizer/config_flags.golden.json with transformers' AutoTokenizer.

Run with transformers 4.57.1 (the users' version; torch not needed):
    python tools/make_tokenizer_flag_goldens.py

transformers' LlamaTokenizerFast / GemmaTokenizerFast / … rebuild the post-processor from
tokenizer_config.json's add_bos_token / add_eos_token (update_post_processor); PreTrainedTokenizerFast
and Qwen2Tokenizer keep tokenizer.json's. For test tokenizers of tests/data/families (and configs/tokenizers/qwen2.5-instruct) with each
variant written into a copy of tokenizer_config.json, or none at all (and a config.json beside it
where the class comes from there), records the class AutoTokenizer loads, its bos / eos / pad / unk
token and the ids of a few texts with and without special tokens.
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
    # (tokenizer directory, changes to its tokenizer_config.json — None removes the key —, the
    #  config.json written beside it or None)
    ("mistral_v3", {}, None),
    ("mistral_v3", {"add_eos_token": True}, None),
    ("mistral_v3", {"add_bos_token": False}, None),
    ("mistral_v3", {"add_bos_token": False, "add_eos_token": True}, None),
    ("mistral_v3", {"add_bos_token": None, "add_eos_token": None}, None),
    ("gemma_style", {"add_eos_token": True}, None),
    ("mistral_v3", {"tokenizer_class": "PreTrainedTokenizerFast", "add_eos_token": True,
                    "add_bos_token": False}, None),
    # the class's default tokens where the config names none
    ("mistral_v3", {"bos_token": None, "eos_token": None, "add_eos_token": True}, None),
    ("gemma_style", {"bos_token": None}, None),
    # no tokenizer_class: AutoTokenizer takes config.json's tokenizer_class, else its model_type's
    ("mistral_v3", {"tokenizer_class": None, "add_eos_token": True}, {"model_type": "mistral"}),
    ("mistral_v3", {"tokenizer_class": None, "add_eos_token": True},
     {"model_type": "qwen2", "tokenizer_class": "LlamaTokenizerFast"}),
    ("mistral_v3", {"tokenizer_class": None, "add_eos_token": True}, {"model_type": "qwen2"}),
    # the other classes that rebuild it
    ("llama3.2", {"tokenizer_class": "GPTNeoXTokenizerFast", "add_eos_token": True,
                  "eos_token": "<|eot_id|>"}, None),
    ("llama3.2", {"tokenizer_class": None, "add_bos_token": True, "bos_token": "<|begin_of_text|>"},
     {"model_type": "olmo2"}),
    ("mistral_v3", {"tokenizer_class": "CodeLlamaTokenizerFast", "add_eos_token": True}, None),
    ("llama3.2", {"tokenizer_class": "CohereTokenizerFast", "bos_token": "<|begin_of_text|>",
                  "eos_token": "<|eot_id|>", "add_eos_token": True}, None),
    # no tokenizer_config.json at all (changes None): the class of config.json's model_type with
    # its default tokens (Qwen2TokenizerFast: eos / unk / pad <|endoftext|>, no BOS), for the model
    # types zerotune trains (a class default missing from tokenizer.json is added as a new token)
    ("qwen2.5-instruct", None, {"model_type": "qwen2"}),
    ("qwen2.5-instruct", None, {"model_type": "qwen3"}),
    ("qwen2.5-instruct", None, {"model_type": "olmo2"}),
    ("qwen2.5-instruct", None, {"model_type": "smollm3"}),
    ("llama3.2", None, {"model_type": "llama"}),
    ("mistral_v3", None, {"model_type": "mistral"}),
    ("gemma_style", None, {"model_type": "gemma3_text"}),
    ("phi3_style", None, {"model_type": "phi3"}),
    # a tokenizer_config.json naming Qwen2Tokenizer and no special tokens: the class defaults too
    ("qwen2.5-instruct", {"eos_token": None, "pad_token": None, "unk_token": None}, None),
]
# Where each tokenizer directory is (the Qwen one is configs/', the others tests/data/families/).
DIRS = {"qwen2.5-instruct": ROOT / "configs" / "tokenizers" / "qwen2.5-instruct"}


def main():
    out = {"transformers": transformers.__version__, "cases": []}
    for name, flags, model_config in CASES:
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            src = DIRS.get(name, FAMILIES / name)
            shutil.copy(src / "tokenizer.json", d / "tokenizer.json")
            if flags is not None:
                cfg = json.loads((src / "tokenizer_config.json").read_text())
                for k, v in flags.items():
                    if v is None:
                        cfg.pop(k, None)
                    else:
                        cfg[k] = v
                (d / "tokenizer_config.json").write_text(json.dumps(cfg))
            if model_config is not None:
                (d / "config.json").write_text(json.dumps(model_config))
            tok = AutoTokenizer.from_pretrained(str(d))
            out["cases"].append({
                "tokenizer": name,
                "changes": flags,
                "model_config": model_config,
                "class": type(tok).__name__,
                "bos_token": tok.bos_token,
                "eos_token": tok.eos_token,
                "pad_token": tok.pad_token,
                "unk_token": tok.unk_token,
                "texts": [{"text": t,
                           "special": tok(t).input_ids,
                           "plain": tok(t, add_special_tokens=False).input_ids} for t in TEXTS],
            })
    dest = ROOT / "tests" / "data" / "tokenizer" / "config_flags.golden.json"
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {dest}", file=sys.stderr)


if __name__ == "__main__":
    main()

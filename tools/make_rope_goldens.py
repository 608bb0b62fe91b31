#!/usr/bin/env python3
"""RoPE inverse frequencies and cos/sin scaling that transformers 4.57.1 (the users' version) builds
for rope types whose rules differ from transformers 5 or that zerotune added later (yarn), read by
tests/io/test_model_config.cpp (ModelConfig.RopeOfTransformers457).

Each case: a config.json object (model_type + the keys that matter), and what
`transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")` returns for the
config class 4.57.1 builds from it: inv_freq as fp32 bit patterns (uint32) and attention_factor.

Run: /work/attack33/venv/bin/python tools/make_rope_goldens.py   (torch CPU, transformers 4.57.1)
"""
import json
import pathlib
import struct

import torch
import transformers
from transformers import AutoConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "io" / "rope_457.golden.json"

BASE = {"vocab_size": 300, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512}

CASES = {
    "yarn_qwen3_orig": {"model_type": "qwen3", "head_dim": 16, "rope_theta": 1000000.0,
                        "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                         "original_max_position_embeddings": 128}},
    "yarn_qwen2_old_type_key": {"model_type": "qwen2", "rope_scaling": {"type": "yarn", "factor": 3.5}},
    "yarn_llama_mscale_no_truncate": {
        "model_type": "llama", "head_dim": 32,
        "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64,
                         "beta_fast": 16.0, "beta_slow": 2.0, "mscale": 0.8, "mscale_all_dim": 1.2,
                         "truncate": False}},
    "yarn_llama_attention_factor": {
        "model_type": "llama", "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.3,
                         "original_max_position_embeddings": 100}},
    # Python `or`: zeros take the defaults (beta 32 / 1, original = max_position_embeddings).
    "yarn_mistral_zero_defaults": {
        "model_type": "mistral", "head_dim": 16,
        "rope_scaling": {"rope_type": "yarn", "factor": 16.0, "beta_fast": 0, "beta_slow": 0,
                         "original_max_position_embeddings": 0}},
    # `rope_scaling.get("truncate", True)`: an explicit null does not round the ramp's ends.
    "yarn_qwen2_truncate_null": {"model_type": "qwen2",
                                 "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                  "original_max_position_embeddings": 64,
                                                  "truncate": None}},
    # The ramp's ends equal (low == high after clipping): high += 0.001.
    "yarn_qwen2_flat_ramp": {"model_type": "qwen2", "max_position_embeddings": 4,
                             "rope_scaling": {"rope_type": "yarn", "factor": 2.0}},
    # dynamic NTK at init (seq_len = max_position_embeddings): the default frequencies of
    # base * (factor * L / L - (factor - 1)) ** (d / (d - 2)).
    "dynamic_llama": {"model_type": "llama", "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "dynamic_qwen2_odd_factor": {"model_type": "qwen2", "max_position_embeddings": 777,
                                 "rope_scaling": {"type": "dynamic", "factor": 3.3}},
    # Both keys agree: nothing to choose.
    "linear_both_keys_agree": {"model_type": "llama",
                               "rope_scaling": {"type": "linear", "rope_type": "linear", "factor": 4.0}},
}


def bits(t):
    return [struct.unpack("<I", struct.pack("<f", float(x)))[0] for x in t.tolist()]


def main():
    cases = []
    for name, cfg in CASES.items():
        kw = dict(BASE)
        kw.update({k: v for k, v in cfg.items() if k != "model_type"})
        config = AutoConfig.for_model(cfg["model_type"], **kw)
        rope_type = config.rope_scaling.get("rope_type", config.rope_scaling.get("type"))
        inv, af = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu")
        assert inv.dtype == torch.float32
        cases.append({"name": name, "config": dict(cfg, **{k: v for k, v in BASE.items() if k not in cfg}),
                      "rope_type": rope_type, "inv_freq_bits": bits(inv), "attention_factor": float(af)})
    OUT.write_text(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                               "cases": cases}, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()

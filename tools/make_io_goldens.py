#!/usr/bin/env python3
"""Golden files for zerotune's core/io tests (tests/data/io/), made with the references:
safetensors (Python), torch (dtype conversions), transformers (save_pretrained, RoPE init).

Run with the golden env:  /work/goldenv/bin/python tools/make_io_goldens.py
Outputs (all small):
  mixed.safetensors, mixed.json      tensors of every dtype written by safetensors.torch.save_file;
                                     the json lists each tensor's dtype, shape and raw element bits
  tiny_qwen2_f32/, tiny_qwen2_bf16/  a tiny Qwen2 model saved by transformers save_pretrained with a
                                     small max_shard_size (sharded), in fp32 and in bf16
  tiny_qwen2.json                    state_dict order, shard size, and per-tensor fp32 bits
  convert_edges.json                 fp32 bit patterns and torch's bf16 / f16 conversions of them
  rope.json                          inv_freq (fp32 bits) from transformers for several configs
  llama3_v4_config.json              a Llama 3.1-style config in the 4.x layout (rope_scaling)
  llama3_v5_config.json              the same saved by transformers 5 (rope_parameters, dtype)
"""
import json
import math
import os
import shutil
import struct
import sys

import numpy as np
import torch
from safetensors.torch import save_file
import transformers
from transformers import LlamaConfig, Qwen2Config, Qwen2ForCausalLM
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "io")


def bits(t: torch.Tensor):
    """Raw element bits of a tensor as a flat list of ints (unsigned)."""
    t = t.contiguous().reshape(-1)
    view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
            torch.int32: torch.int32, torch.int64: torch.int64, torch.uint8: torch.uint8}[t.dtype]
    raw = t.view(view).tolist()
    width = {torch.int32: 32, torch.int16: 16, torch.int64: 64, torch.uint8: 8}[view]
    return [v & ((1 << width) - 1) for v in raw]


ST_NAME = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "I32",
           torch.int64: "I64", torch.uint8: "U8"}


def f32_from_bits(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def make_mixed():
    g = torch.Generator().manual_seed(1234)
    special = torch.tensor([0.0, -0.0, 1.0, -2.5, 3.1415927, 1e-30, -65504.0, 7e-8,
                            float("inf"), float("-inf")], dtype=torch.float32)
    tensors = {
        "model.w_f32": torch.randn(3, 5, generator=g),
        "model.special_f32": special,
        "model.w_bf16": torch.randn(4, 2, 3, generator=g).to(torch.bfloat16),
        "model.w_f16": (torch.randn(2, 3, generator=g) * 100).to(torch.float16),
        "a.bias": torch.randn(7, generator=g).to(torch.bfloat16),
        "ids_i32": torch.tensor([1, -2, 2147483647, -2147483648], dtype=torch.int32),
        "ids_i64": torch.tensor([[5, -6], [1 << 40, -(1 << 50)]], dtype=torch.int64),
        "bytes_u8": torch.tensor([0, 1, 255], dtype=torch.uint8),
        "scalar": torch.tensor(0.5, dtype=torch.float32),
        "empty": torch.zeros(0, 4, dtype=torch.float32),
    }
    save_file(tensors, os.path.join(OUT, "mixed.safetensors"), metadata={"format": "pt"})
    desc = {name: {"dtype": ST_NAME[t.dtype], "shape": list(t.shape), "bits": bits(t)}
            for name, t in tensors.items()}
    with open(os.path.join(OUT, "mixed.json"), "w") as f:
        json.dump({"metadata": {"format": "pt"}, "tensors": desc}, f, indent=1)


TINY = dict(vocab_size=64, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
            rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
            bos_token_id=1, eos_token_id=2)
SHARD = 6000  # bytes: several shards for the fp32 model, fewer for bf16


def make_tiny_qwen2():
    torch.manual_seed(0)
    cfg = Qwen2Config(**TINY)
    model = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():  # non-trivial values everywhere, biases and norms included
        for p in model.parameters():
            p.copy_(torch.randn(p.shape) * 0.5)
    sd = model.state_dict()
    order = [k for k in sd.keys() if k != "lm_head.weight"]  # tied: save_pretrained drops it
    for sub, dtype in (("tiny_qwen2_f32", torch.float32), ("tiny_qwen2_bf16", torch.bfloat16)):
        d = os.path.join(OUT, sub)
        shutil.rmtree(d, ignore_errors=True)
        model.to(dtype).save_pretrained(d, max_shard_size=SHARD)
        model.to(torch.float32)
    values = {k: {"shape": list(sd[k].shape), "bits": bits(sd[k].float())} for k in order}
    with open(os.path.join(OUT, "tiny_qwen2.json"), "w") as f:
        json.dump({"max_shard_size": SHARD, "num_parameters": model.num_parameters(),
                   "state_dict_order": order, "tensors": values}, f, indent=1)


def make_convert_edges():
    pats = [
        0x00000000, 0x80000000, 0x3F800000, 0xBF800000,  # ±0, ±1
        0x3F808000, 0x3F818000, 0x3F808001, 0x3F817FFF,  # bf16 ties to even (down, up), near ties
        0x3F80FFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000,  # rounding carry, fp32 max (-> inf in bf16)
        0x7F7F7FFF, 0x7F800000, 0xFF800000,              # just below overflow, ±inf
        0x00000001, 0x807FFFFF, 0x00800000, 0x00008000,  # fp32 subnormals, min normal
        0x477FE000, 0x477FEFFF, 0x477FF000, 0x47800000,  # f16 max, below/at overflow tie, 65536
        0x38800000, 0x38000000, 0x33800000, 0x33000000,  # f16 min normal, subnormal, min sub, tie->0
        0x33000001, 0x33C00000, 0x387FC000, 0x3E2AAAAB,  # just above tie, 1.5*min sub, sub tie, 1/6
        0x40490FDB, 0xC2F6E979, 0x3A83126F,
    ]
    rng = np.random.default_rng(7)
    pats += [int(x) for x in rng.integers(0, 2**32, size=200, dtype=np.uint64)]
    pats = [p for p in pats if (p & 0x7FFFFFFF) <= 0x7F800000]  # NaNs handled separately below
    x = torch.tensor(np.array(pats, dtype=np.uint32).view(np.int32)).view(torch.float32)
    out = {"f32_bits": pats, "bf16_bits": bits(x.to(torch.bfloat16)),
           "f16_bits": bits(x.to(torch.float16)),
           "nan_f32_bits": [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF]}
    with open(os.path.join(OUT, "convert_edges.json"), "w") as f:
        json.dump(out, f)


LLAMA31 = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
               rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
               bos_token_id=128000, eos_token_id=[128001, 128008, 128009],
               rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"})


def make_rope_and_configs():
    cases = {}
    v4 = dict(LLAMA31, model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="silu",
              attention_bias=False, mlp_bias=False, torch_dtype="bfloat16",
              initializer_range=0.02, transformers_version="4.43.0")
    with open(os.path.join(OUT, "llama3_v4_config.json"), "w") as f:
        json.dump(v4, f, indent=2, sort_keys=True)
    cfg = LlamaConfig(**LLAMA31)
    tmp = os.path.join(OUT, "_llama_tmp")
    cfg.save_pretrained(tmp)
    shutil.move(os.path.join(tmp, "config.json"), os.path.join(OUT, "llama3_v5_config.json"))
    shutil.rmtree(tmp)
    inv, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
    cases["llama31_8b"] = bits(inv)
    # Llama 3.2 1B: factor 32, head_dim 64
    c32 = LlamaConfig(**dict(LLAMA31, hidden_size=2048, num_attention_heads=32,
                             rope_scaling=dict(LLAMA31["rope_scaling"], factor=32.0)))
    inv, _ = ROPE_INIT_FUNCTIONS["llama3"](c32, "cpu")
    cases["llama32_1b"] = bits(inv)
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding
    for name, hs, heads, theta in (("qwen25_15b", 1536, 12, 1e6), ("qwen25_05b", 896, 14, 1e6),
                                   ("theta_1e4_d128", 4096, 32, 10000.0)):
        q = Qwen2Config(hidden_size=hs, num_attention_heads=heads, rope_theta=theta)
        inv, _ = Qwen2RotaryEmbedding.compute_default_rope_parameters(q)
        cases[name] = bits(inv)
    with open(os.path.join(OUT, "rope.json"), "w") as f:
        json.dump(cases, f, indent=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    make_mixed()
    make_tiny_qwen2()
    make_convert_edges()
    make_rope_and_configs()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; wrote {OUT}")


if __name__ == "__main__":
    sys.exit(main())

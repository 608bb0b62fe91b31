#!/usr/bin/env python3
"""Real-size config.json files of the model families zerotune trains, and what transformers builds
from each (tests/io/test_family_configs.cpp, tests/model/test_family_layout.cpp read them).

Source of the hyperparameters: the published config.json of each model on the Hugging Face hub
(microsoft/Phi-3-mini-4k-instruct, microsoft/Phi-4-mini-instruct, google/gemma-3-1b-it,
google/gemma-3-4b-it, Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B, mistralai/Mistral-7B-v0.3,
allenai/OLMo-2-0425-1B, HuggingFaceTB/SmolLM3-3B; Llama-3.2-1B from
/work/shared/data/models/llama-3.2-1b), transcribed into the transformers config classes below.
Files:
  <name>.json         transformers 5.17 `PreTrainedConfig.to_json_string()` of the config class
                      built from those hyperparameters (the 5.x layout: rope_parameters, dtype), or,
                      for the names ending in _hub, the hub file's 4.x layout as published
                      (rope_theta / rope_scaling, torch_dtype; json.dumps indent 2, sorted keys).
  <name>.expect.json  what transformers builds from <name>.json: the model instantiated on the meta
                      device (`AutoModelForCausalLM.from_config`; for gemma3 multimodal the
                      Gemma3ForCausalLM of its text_config), num_parameters = sum(p.numel()) over
                      model.parameters() (tied weights once), every parameter's name and shape, each
                      layer's sliding window (None -> 0) and RoPE use (0 rope, 1 Gemma local rope,
                      -1 none), the softmax scaling, the embedding scale, and the rotary embedding's
                      inv_freq built on the CPU as fp32 bit patterns (uint32), with its attention
                      scaling; for longrope also the long-factor inv_freq (seq_len =
                      original_max_position_embeddings + 1).

Run: /work/goldenv/bin/python tools/make_family_configs.py  (torch 2.11, transformers 5.17, CPU)
"""
import json
import pathlib
import struct

import torch
import transformers
from transformers import (AutoModelForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig,
                          MistralConfig, Olmo2Config, Phi3Config, Qwen3Config, SmolLM3Config)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "families" / "configs"
LLAMA_DIR = pathlib.Path("/work/shared/data/models/llama-3.2-1b")

PHI4_LONG = [1, 1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897, 1.956131817,
             2.187582649, 2.446418898, 2.735880826, 3.059592084, 3.421605075, 3.826451687,
             4.279200023, 4.785517845, 5.351743533, 5.984965424, 6.693110555, 7.485043894,
             8.370679318, 9.36110372, 10.4687158, 11.70738129, 13.09260651, 14.64173252,
             16.37415215, 18.31155283, 20.47818807, 22.90118105, 25.61086418, 28.64115884, 32.03,
             32.1, 32.13, 32.23, 32.6, 32.61, 32.64, 32.66, 32.7, 32.71, 32.93, 32.97, 33.28,
             33.49, 33.5, 44.16, 47.77]


def qwen3(hidden, inter):
    return Qwen3Config(vocab_size=151936, hidden_size=hidden, intermediate_size=inter,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, max_position_embeddings=40960, rope_theta=1000000.0,
                       rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
                       use_sliding_window=False, sliding_window=None, max_window_layers=28,
                       bos_token_id=151643, eos_token_id=151645, dtype="bfloat16",
                       architectures=["Qwen3ForCausalLM"])


# 5.x layout: to_json_string() of the config class.
CLASS_CONFIGS = {
    "qwen3-0.6b": lambda: qwen3(1024, 3072),
    "qwen3-1.7b": lambda: qwen3(2048, 6144),
    "mistral-7b-v0.3": lambda: MistralConfig(
        vocab_size=32768, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=32768,
        rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=None, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, dtype="bfloat16", architectures=["MistralForCausalLM"]),
    "gemma-3-1b": lambda: Gemma3TextConfig(
        vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
        num_attention_heads=4, num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256,
        sliding_window=512, sliding_window_pattern=6, rope_theta=1000000.0,
        rope_local_base_freq=10000.0, max_position_embeddings=32768, rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
        attn_logit_softcapping=None, bos_token_id=2, eos_token_id=[1, 106], pad_token_id=0,
        dtype="bfloat16", architectures=["Gemma3ForCausalLM"]),
    "olmo-2-1b": lambda: Olmo2Config(
        vocab_size=100352, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=4096,
        rms_norm_eps=1e-6, rope_theta=500000, attention_bias=False, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=100257, pad_token_id=100277, dtype="float32",
        architectures=["Olmo2ForCausalLM"]),
    "smollm3-3b": lambda: SmolLM3Config(
        vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
        num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=65536,
        rope_theta=5000000.0, rms_norm_eps=1e-6, no_rope_layer_interval=4,
        use_sliding_window=False, sliding_window=None, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=128012, pad_token_id=128004, dtype="bfloat16",
        architectures=["SmolLM3ForCausalLM"]),
    "phi-4-mini": lambda: Phi3Config(
        vocab_size=200064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
        num_attention_heads=24, num_key_value_heads=8, max_position_embeddings=131072,
        original_max_position_embeddings=4096, partial_rotary_factor=0.75, rope_theta=10000.0,
        rope_scaling={"type": "longrope", "long_factor": PHI4_LONG, "short_factor": [1.0] * 48},
        rms_norm_eps=1e-5, sliding_window=262144, tie_word_embeddings=True, bos_token_id=199999,
        eos_token_id=199999, pad_token_id=199999, dtype="bfloat16",
        architectures=["Phi3ForCausalLM"]),
}

# 4.x layout, as published on the hub (the keys a user's download has).
HUB_CONFIGS = {
    "phi-3-mini-4k_hub": {
        "_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"],
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0,
        "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
        "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096,
        "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
        "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": True,
        "vocab_size": 32064},
    "phi-4-mini_hub": {
        "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 199999, "embd_pdrop": 0.0, "eos_token_id": 199999, "full_attn_mod": 1,
        "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
        "intermediate_size": 8192, "interpolate_factor": 1, "lm_head_bias": False,
        "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "phi3",
        "num_attention_heads": 24, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "original_max_position_embeddings": 4096, "pad_token_id": 199999,
        "partial_rotary_factor": 0.75, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
        "rope_scaling": {"long_factor": PHI4_LONG, "short_factor": [1.0] * 48,
                         "type": "longrope"},
        "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.45.0", "use_cache": True,
        "vocab_size": 200064},
    "gemma-3-4b-it_hub": {
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
        "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
        "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
        "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                        "model_type": "gemma3_text", "num_hidden_layers": 34,
                        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                        "sliding_window": 1024},
        "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
        "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                          "model_type": "siglip_vision_model", "num_attention_heads": 16,
                          "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False}},
}


def f32_bits(t):
    return [struct.unpack("<I", struct.pack("<f", float(v)))[0] for v in t.float().tolist()]


def expectations(config):
    text = config.get_text_config() if config.model_type == "gemma3" else config
    with torch.device("meta"):
        model = (Gemma3ForCausalLM(text) if config.model_type == "gemma3"
                 else AutoModelForCausalLM.from_config(config))
    e = {"transformers_version": transformers.__version__,
         "num_parameters": sum(p.numel() for p in model.parameters()),
         "params": [[n, list(p.shape)] for n, p in model.named_parameters()]}
    windows, ropes, scales = [], [], []
    for layer in model.model.layers:
        a = layer.self_attn
        if hasattr(a, "sliding_window"):
            w = a.sliding_window
        elif text.model_type in ("mistral", "phi3"):
            w = getattr(text, "sliding_window", None)
        else:
            w = None
        windows.append(w or 0)
        if hasattr(a, "use_rope"):
            ropes.append(0 if a.use_rope else -1)
        elif getattr(a, "is_sliding", False):
            ropes.append(1)
        else:
            ropes.append(0)
        scales.append(a.scaling)
    e["layer_window"], e["layer_rope"], e["attention_scale"] = windows, ropes, scales
    emb = model.model.embed_tokens
    e["embed_scale"] = float(getattr(emb, "scalar_embed_scale", 1.0))
    rot = type(model.model.rotary_emb)(config=text, device="cpu")
    if text.model_type == "gemma3_text":
        e["inv_freq"] = f32_bits(rot.full_attention_inv_freq)
        e["attention_factor"] = rot.full_attention_attention_scaling
        e["inv_freq_local"] = f32_bits(rot.sliding_attention_inv_freq)
    else:
        e["inv_freq"] = f32_bits(rot.inv_freq)
        e["attention_factor"] = rot.attention_scaling
        rp = text.rope_parameters
        if rp.get("rope_type") == "longrope":
            inv, _ = ROPE_INIT_FUNCTIONS["longrope"](
                text, "cpu", seq_len=rp["original_max_position_embeddings"] + 1)
            e["inv_freq_long"] = f32_bits(inv)
    e["rotary_dim"] = 2 * len(e["inv_freq"])
    return e


def write(path, obj):
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, make in CLASS_CONFIGS.items():
        cfg = make()
        (OUT / f"{name}.json").write_text(cfg.to_json_string())
        write(OUT / f"{name}.expect.json", expectations(cfg))
    for name, d in HUB_CONFIGS.items():
        write(OUT / f"{name}.json", d)
    llama = json.loads((LLAMA_DIR / "config.json").read_text())
    write(OUT / "llama-3.2-1b_hub.json", llama)
    for name in list(HUB_CONFIGS) + ["llama-3.2-1b_hub"]:
        cfg = transformers.AutoConfig.from_pretrained(OUT / f"{name}.json")
        write(OUT / f"{name}.expect.json", expectations(cfg))
    print("wrote", sorted(p.name for p in OUT.iterdir()))


if __name__ == "__main__":
    main()

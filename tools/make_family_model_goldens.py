#!/usr/bin/env python3
"""Golden files for the model-family tests (tests/model/test_family_golden.cpp): tiny random
Qwen3, Llama 3.x, Mistral, Gemma 3 (text), OLMo 2, SmolLM3 and Phi-3 / Phi-4-mini models run by
transformers in fp32 on the CPU with attn_implementation="eager".

For each case <name> in CASES this writes tests/data/model/<name>/ in the layout of
tools/make_model_goldens.py (whose write_case / make_examples / randomize it calls):
  config.json        the HF config as transformers' save_pretrained writes it (dtype "bfloat16")
  model.safetensors  the weights as BF16 (every value bf16-exact, so fp32 loading is exact)
  golden.safetensors "grad.<hf name>" = d(mean loss)/d(param), fp32, every parameter;
                     "logits.<i>" = fp32 logits of example i at the rows listed in golden.json
  golden.json        the examples, per-example loss_sum / targets / correct / logit_rows, totals,
                     and in addition:
                       "state_dict_keys"  sorted tensor names of the model.safetensors that
                                          transformers' save_pretrained writes (a tied lm_head
                                          absent): what an export must contain, exactly;
                       "exercises"        what the case is for (one line);
                       "layer_window", "layer_rope", "rotary_dim", "attention_scale": the
                                          layer choices in ModelConfig's terms (see
                                          layer_choices()), for the config parse's test;
                       per-family facts the C++ side must reproduce ("embed_scale",
                       "rope_long_factors", "rope_attention_factor", "layer_types", ...).

Every case uses the examples of make_model_goldens.EXAMPLES (lengths 48, 1, 75, 30, 130, 9, 2:
rows shorter and longer than the sliding windows 6 / 7), except phi4mini_longrope_long, which
uses LONGROPE_LONG_EXAMPLES (every example longer than original_max_position_embeddings = 8, see
below). Case k (in CASES order) draws its weights from seed 3 + k (make_model_goldens uses 0-2)
and its texts from C4 rows 10 t + i, t the k-th (cyclically) of the text seeds >= 3 whose rows
are long enough (text_seeds()).

What the C++ side must honour:
  * Sliding window W (transformers masking_utils.sliding_window_overlay): query i sees keys j
    with i - W < j <= i, i.e. W keys including itself, within its own example.
  * Gemma 3: norms are x * (1 + w) (weights here are N(0, 0.1) around 0); the embedding is scaled
    by sqrt(hidden_size) rounded to the compute dtype (golden.json "embed_scale" is the fp32 value
    transformers used); softmax scale query_pre_attn_scalar^-0.5; sliding layers use the rope of
    rope_parameters["sliding_attention"], full layers that of ["full_attention"].
  * Phi-3 longrope: transformers picks long_factor when max(position_ids) + 1 >
    original_max_position_embeddings, per forward. Each example here runs alone, so a packed
    micro-batch (positions restart per example; its max position is its longest example's)
    agrees with them only when all examples are on one side: phi3_longrope_short has every
    example <= 256 = original_max (short factors), phi4mini_longrope_long every example > 8 =
    original_max (long factors). The C++ side decides per micro-batch from its longest example.
    The cos/sin multiplier is attention_factor = sqrt(1 + ln(factor) / ln(original_max)) with
    factor = max_position_embeddings / original_max (absent "factor"); golden.json
    "rope_attention_factor" is the value used. Phi3Config's top-level
    original_max_position_embeddings overrides the one in rope_parameters (both are equal here).
  * pad_token_id never occurs among the inputs (the tool asserts it) except in the *_pad cases,
    which make it the most frequent input id; elsewhere nn.Embedding's
    padding_idx (whose row gets no gradient from the lookup) does not matter for these goldens.

Usage: /work/goldenv/bin/python tools/make_family_model_goldens.py [case ...]
  (transformers 5.17, torch 2.11 CPU; needs tokenizers, safetensors; ZT_SHARED_DATA overrides
  ../shared/data). CI never runs this; the outputs are committed.
"""
import math
import os
import sys
import tempfile

import torch
from safetensors import safe_open
from transformers import (Gemma3TextConfig, LlamaConfig, MistralConfig, Olmo2Config, Phi3Config,
                          Qwen3Config, SmolLM3Config)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_model_goldens as mg  # noqa: E402  (the shared helpers)

OUT = mg.OUT
VOCAB = 300
SMALL = dict(vocab_size=VOCAB, hidden_size=48, intermediate_size=96, num_attention_heads=4,
             max_position_embeddings=512)

# Every example longer than 8 tokens (the long-rope case's original_max_position_embeddings):
# make_model_goldens.EXAMPLES with its 1- and 2-token rows replaced by 12 and 10 tokens.
LONGROPE_LONG_EXAMPLES = [(48, ("prefix", 10)), (12, "all"), (75, "all"), (30, ("every", 3)),
                          (130, ("prefix", 7)), (9, "none"), (10, "all")]

# Phi-3 longrope factors (rotary_dim / 2 values each), shapes like the released ones: short
# factors near 1, long factors growing with the wavelength.
SHORT_6 = [1.0, 1.01, 1.03, 1.07, 1.15, 1.3]
LONG_6 = [1.0, 1.25, 2.0, 3.5, 7.0, 12.5]
SHORT_6B = [1.0, 1.02, 1.05, 1.1, 1.2, 1.4]
LONG_6B = [1.0, 1.6, 2.7, 5.0, 10.0, 20.0]


# name -> (config class, config kwargs, options). Options: "spec" (examples), "exercises" (one line).
CASES = {
    "qwen3_tied_gqa": (Qwen3Config, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=2, head_dim=16, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, rms_norm_eps=1e-6),
        dict(exercises="Qwen3: per-head q/k RMSNorm, GQA 2:1, head_dim 16 != hidden/heads 12 "
                       "(q_proj 64x48, o_proj 48x64), tied head")),
    "qwen3_untied": (Qwen3Config, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=4, head_dim=12, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, rms_norm_eps=1e-6),
        dict(exercises="Qwen3: q/k norm, no GQA, head_dim = hidden/heads, untied head")),
    "qwen3_sliding": (Qwen3Config, dict(
        SMALL, intermediate_size=64, num_hidden_layers=3, num_key_value_heads=2, head_dim=16,
        tie_word_embeddings=False, use_sliding_window=True, sliding_window=7, max_window_layers=1,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, rms_norm_eps=1e-6),
        dict(exercises="Qwen3 use_sliding_window: layer_types [full, sliding, sliding] "
                       "(max_window_layers 1), window 7")),
    "llama32_tied": (LlamaConfig, dict(
        SMALL, hidden_size=64, num_hidden_layers=2, num_key_value_heads=2,
        tie_word_embeddings=True, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 256}),
        dict(exercises="Llama 3.2-style: tied head, llama3 rope (factor 32, theta 5e5; head_dim "
                       "16 has high-, medium- and low-frequency pairs), GQA 2:1")),
    "llama_bias": (LlamaConfig, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=2, tie_word_embeddings=False,
        attention_bias=True, mlp_bias=True, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        dict(exercises="Llama: mlp_bias (gate/up/down biases) + attention_bias (q/k/v/o biases), "
                       "untied, GQA 2:1")),
    "llama_linear": (LlamaConfig, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=4, tie_word_embeddings=False,
        rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}),
        dict(exercises="Llama: rope linear scaling (factor 4), no GQA, untied")),
    "mistral_swa": (MistralConfig, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=2, head_dim=16, sliding_window=7,
        tie_word_embeddings=False, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        dict(exercises="Mistral: sliding_window 7 on every layer, explicit head_dim 16 != 12, "
                       "GQA 2:1")),
    "gemma3_swa": (Gemma3TextConfig, dict(
        SMALL, intermediate_size=64, num_hidden_layers=4, num_key_value_heads=2, head_dim=16,
        query_pre_attn_scalar=24, sliding_window=6,
        layer_types=["sliding_attention", "sliding_attention", "full_attention",
                     "sliding_attention"],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, tie_word_embeddings=True),
        dict(norm_center=0.0,
             exercises="Gemma 3 text: (1 + w) norms pre+post attention and MLP, q/k norm, "
                       "embedding * sqrt(48), gelu_tanh GLU, layer_types [s, s, f, s] with "
                       "window 6, query_pre_attn_scalar 24 != head_dim 16, rope theta 1e6 "
                       "global / 1e4 local, tied")),
    "gemma3_linear": (Gemma3TextConfig, dict(
        SMALL, num_hidden_layers=3, num_key_value_heads=1, head_dim=12,
        query_pre_attn_scalar=16, sliding_window=6,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                            "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, tie_word_embeddings=True),
        dict(norm_center=0.0,
             exercises="Gemma 3 text: linear rope scaling (factor 8) on the global rope only, "
                       "layer_types [s, f, s], MQA (1 KV head), query_pre_attn_scalar 16 != 12")),
    "olmo2_gqa": (Olmo2Config, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=2, tie_word_embeddings=False,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
        dict(exercises="OLMo 2: post-norms (norm of attention/MLP output before the residual "
                       "add), q/k RMSNorm over the whole projection, GQA 2:1, untied")),
    "smollm3_nope": (SmolLM3Config, dict(
        SMALL, num_hidden_layers=3, num_key_value_heads=2, no_rope_layers=[1, 0, 1],
        tie_word_embeddings=True, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 2000000.0}),
        dict(exercises="SmolLM3: no_rope_layers [1, 0, 1] (layer 1 has no RoPE), GQA 2:1, "
                       "tied")),
    "phi3_partial_swa": (Phi3Config, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=2, sliding_window=7,
        tie_word_embeddings=False, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.5}),
        dict(exercises="Phi-3: fused qkv_proj and gate_up_proj, partial_rotary_factor 0.5 "
                       "(6 of 12 head dims rotated), sliding_window 7, GQA 2:1, untied")),
    "phi3_longrope_short": (Phi3Config, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=4, tie_word_embeddings=False,
        rms_norm_eps=1e-5, max_position_embeddings=1024, original_max_position_embeddings=256,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                         "partial_rotary_factor": 1.0, "short_factor": SHORT_6,
                         "long_factor": LONG_6, "original_max_position_embeddings": 256}),
        dict(long_factors=False,
             exercises="Phi-3 longrope, every example <= original_max 256: short factors, "
                       "attention_factor sqrt(1 + ln 4 / ln 256); no GQA, untied")),
    "phi4mini_longrope_long": (Phi3Config, dict(
        SMALL, hidden_size=64, num_hidden_layers=2, num_key_value_heads=2,
        tie_word_embeddings=True, rms_norm_eps=1e-5, max_position_embeddings=512,
        original_max_position_embeddings=8,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.75, "short_factor": SHORT_6B,
                         "long_factor": LONG_6B, "original_max_position_embeddings": 8}),
        dict(long_factors=True, spec=LONGROPE_LONG_EXAMPLES,
             exercises="Phi-4-mini-style: longrope with every example > original_max 8 (long "
                       "factors), attention_factor sqrt(1 + ln 64 / ln 8), "
                       "partial_rotary_factor 0.75 (12 of 16 dims), GQA 2:1, tied")),
    # nn.Embedding(padding_idx = pad_token_id) with the pad id among the inputs: the lookup adds
    # nothing to that row's gradient (tied: the LM head's share stays).
    "gemma3_pad": (Gemma3TextConfig, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=1, head_dim=12, sliding_window=6,
        layer_types=["sliding_attention", "full_attention"],
        hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, tie_word_embeddings=True),
        dict(norm_center=0.0, pad_in_inputs=True,
             exercises="Gemma 3 text, tied: pad_token_id is the most frequent input id (HF "
                       "padding_idx: no lookup gradient into its row, the head's stays)")),
    "olmo2_pad": (Olmo2Config, dict(
        SMALL, num_hidden_layers=2, num_key_value_heads=2, tie_word_embeddings=False,
        rms_norm_eps=1e-6),
        dict(pad_in_inputs=True,
             exercises="OLMo 2, untied: pad_token_id is the most frequent input id (its "
                       "embedding row gets no gradient)")),
}


def special_ids(kwargs, cls, inputs, pad_in_inputs=False):
    """bos/eos/pad ids for a case: the family's defaults when inside the tiny vocabulary, else
    ids near its end; pad_token_id (when the family has one) an id none of the inputs uses, so
    nn.Embedding's padding_idx never affects a gradient here."""
    defaults = cls()
    out = {}
    for key, fallback in (("bos_token_id", VOCAB - 3), ("eos_token_id", VOCAB - 2)):
        v = getattr(defaults, key)
        out[key] = v if v is None or (isinstance(v, int) and v < VOCAB) else fallback
    pad = defaults.pad_token_id
    if pad_in_inputs:  # the most frequent input id (ties: the smallest)
        out["pad_token_id"] = max(sorted(inputs), key=inputs.count)
        return out
    if pad is not None and (pad >= VOCAB or pad in inputs):
        pad = max(i for i in range(VOCAB) if i not in inputs)
    out["pad_token_id"] = pad
    return out


def longrope_inv_freq(cfg, long_factors):
    """The inverse frequencies transformers' _compute_longrope_parameters gives (fp32)."""
    rp = cfg.rope_parameters
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    dim = int(head_dim * rp.get("partial_rotary_factor", 1.0))
    ext = torch.tensor(rp["long_factor" if long_factors else "short_factor"], dtype=torch.float32)
    shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (ext * rp["rope_theta"] ** shape)


def layer_choices(model):
    """What each layer does, as transformers' modules do it, in ModelConfig's terms:
    layer_window (sliding window W, 0 = full attention), layer_rope (0: the rope, 1: Gemma 3's
    local rope, -1: no RoPE), rotary_dim (rotated elements of a head) and attention_scale (the
    softmax scale, a Python float)."""
    c = model.config
    types = getattr(c, "layer_types", None)
    win, rope = [], []
    for i, layer in enumerate(model.model.layers):
        w = getattr(c, "sliding_window", None) or 0
        if types is not None and types[i] != "sliding_attention":
            w = 0  # Qwen3 / Gemma 3 / SmolLM3: only sliding layers slide
        win.append(w)
        if getattr(c, "no_rope_layers", None) is not None and not c.no_rope_layers[i]:
            rope.append(-1)
        elif c.model_type == "gemma3_text" and types[i] == "sliding_attention":
            rope.append(1)
        else:
            rope.append(0)
    rot = model.model.rotary_emb
    inv_freq = rot.full_attention_inv_freq if hasattr(rot, "full_attention_inv_freq") \
        else rot.inv_freq
    scales = {float(layer.self_attn.scaling) for layer in model.model.layers}
    assert len(scales) == 1
    return {"layer_window": win, "layer_rope": rope, "rotary_dim": 2 * inv_freq.numel(),
            "attention_scale": scales.pop()}


def saved_keys(model):
    """Sorted tensor names of the model.safetensors transformers' save_pretrained writes."""
    with tempfile.TemporaryDirectory() as t:
        model.save_pretrained(t, safe_serialization=True)
        with safe_open(os.path.join(t, "model.safetensors"), "pt") as f:
            return sorted(f.keys())


def text_seeds():
    """Seeds t >= 3 whose C4 rows 10 t + i are long enough for both example lists."""
    out = []
    for t in range(3, 30):
        try:
            for spec in (mg.EXAMPLES, LONGROPE_LONG_EXAMPLES):
                mg.make_examples(VOCAB, t, spec)
            out.append(t)
        except AssertionError:
            pass
    return out


def make_case(index, name, tseeds):
    cls, kwargs, opt = CASES[name]
    seed = 3 + index  # RNG streams not used by make_model_goldens (seeds 0-2)
    text_seed = tseeds[index % len(tseeds)]
    spec = opt.get("spec", mg.EXAMPLES)
    all_ids = [x for ex in mg.make_examples(VOCAB, text_seed, spec) for x in ex["input_ids"]]
    inputs = set(all_ids)
    pad_in = opt.get("pad_in_inputs", False)
    cfg = cls(**kwargs, **special_ids(kwargs, cls, all_ids if pad_in else inputs, pad_in))
    d = os.path.join(OUT, name)
    long_factors = opt.get("long_factors")

    def check_example(model, i, ex):
        if not pad_in:
            assert cfg.pad_token_id is None or cfg.pad_token_id not in ex["input_ids"]
        if long_factors is not None:  # every example on the case's side of original_max
            rp = model.config.rope_parameters
            assert (len(ex["input_ids"]) > rp["original_max_position_embeddings"]) == long_factors
            want = longrope_inv_freq(model.config, long_factors)
            assert torch.equal(model.model.rotary_emb.inv_freq, want), (name, i)

    def extra(model, examples):
        info = {"exercises": opt["exercises"], "state_dict_keys": saved_keys(model)}
        c = model.config
        if getattr(c, "layer_types", None) is not None:
            info["layer_types"] = list(c.layer_types)
        if getattr(c, "sliding_window", None) is not None:
            info["sliding_window"] = c.sliding_window
        info.update(layer_choices(model))
        emb = model.model.embed_tokens
        if hasattr(emb, "embed_scale"):
            info["embed_scale"] = float(emb.embed_scale)  # fp32 sqrt(hidden_size)
        if long_factors is not None:
            info["rope_long_factors"] = long_factors
            info["rope_attention_factor"] = float(model.model.rotary_emb.attention_scaling)
            rp = c.rope_parameters
            f = c.max_position_embeddings / rp["original_max_position_embeddings"]
            assert math.isclose(info["rope_attention_factor"], math.sqrt(
                1 + math.log(f) / math.log(rp["original_max_position_embeddings"])))
        return info

    summary = mg.write_case(d, name, cfg, seed, norm_center=opt.get("norm_center", 1.0),
                            spec=spec, text_seed=text_seed, check_example=check_example, extra=extra)
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
        assert sorted(f.keys()) == summary["state_dict_keys"], name
    return summary


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    names = sys.argv[1:] or list(CASES)
    for n in names:
        if n not in CASES:
            sys.exit(f"unknown case {n!r}; cases: {', '.join(CASES)}")
    os.makedirs(OUT, exist_ok=True)
    tseeds = text_seeds()
    for n in names:
        make_case(list(CASES).index(n), n, tseeds)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden files for the model tests (tests/model/): tiny random Qwen2 / Llama models run by
transformers in fp32 with attn_implementation="eager".

For each model <name> in MODELS this writes tests/data/model/<name>/:
  config.json        the HF config (transformers' own to_json_string)
  model.safetensors  the weights, stored as BF16 (every value is bf16-representable, so loading
                     them as fp32 is exact on both sides)
  golden.safetensors "grad.<hf name>" = d(mean loss)/d(param) in fp32, for every parameter;
                     "logits.<i>" = fp32 logits of example i at the rows listed in golden.json
  golden.json        the examples (input_ids, labels in HF's unshifted convention), per example
                     loss_sum / targets / correct (argmax hits), logits rows, and the totals.

The examples are real text: rows of the shared C4 demo tokenised with the Qwen2.5 tokenizer,
ids taken modulo the tiny vocabulary. Each example runs alone (batch 1, no padding); the loss of
the whole set is sum_i CE_sum_i / N with N the number of targets of all examples (HF's
num_items_in_batch), and gradients are accumulated over the examples — which is what one
padding-free micro-batch of all examples must reproduce.

Usage: /work/goldenv/bin/python tools/make_model_goldens.py   (needs torch, transformers,
tokenizers, safetensors). CI never runs this; the outputs are committed. write_case(),
make_examples() and randomize() are shared with tools/make_family_model_goldens.py.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.environ.get("ZT_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))
OUT = os.path.join(ROOT, "tests", "data", "model")

COMMON = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=512)
MODELS = {
    # Qwen2.5-style: tied head, GQA 2:1, rope_theta 1e6.
    "qwen2_tied": Qwen2Config(vocab_size=300, intermediate_size=88, num_key_value_heads=2,
                              tie_word_embeddings=True, rope_theta=1000000.0, rms_norm_eps=1e-6,
                              **COMMON),
    # Untied head, no GQA.
    "qwen2_untied": Qwen2Config(vocab_size=300, intermediate_size=88, num_key_value_heads=4,
                                tie_word_embeddings=False, rope_theta=10000.0, rms_norm_eps=1e-6,
                                **COMMON),
    # Llama 3.1-style rope scaling (all three frequency regimes present for head_dim 12),
    # attention_bias (q/k/v/o biases), GQA 4:1, untied.
    "llama3": LlamaConfig(vocab_size=320, intermediate_size=80, num_key_value_heads=1,
                          tie_word_embeddings=False, attention_bias=True, rms_norm_eps=1e-5,
                          rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0,
                                           "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 256},
                          **COMMON),
}

# (length, label mask): "all" trains every token, ("prefix", k) masks the first k, "none" masks
# all, ("every", k) masks every k-th position. 130 > 128 exercises several attention blocks.
EXAMPLES = [(48, ("prefix", 10)), (1, "all"), (75, "all"), (30, ("every", 3)), (130, ("prefix", 7)),
            (9, "none"), (2, "all")]
LOGIT_ROWS = 3  # first rows of each example whose logits are stored, plus the last row


def bf16_exact(t):
    return t.to(torch.bfloat16).to(torch.float32)


def randomize(model, gen, norm_center=1.0):
    """Weights ~ N(0, 1/fan_in) (embeddings N(0, 1/hidden)), norms norm_center + N(0, 0.1) (1 for
    the x·w norms, 0 for Gemma's x·(1 + w)), biases N(0, 0.1), all rounded to bf16 so the bf16
    file is exact. Larger than HF's 0.02 init on purpose: the logits must be far from uniform for
    the gradients to test anything."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                v = norm_center + 0.1 * torch.randn(p.shape, generator=gen)
            elif name.endswith(".bias"):
                v = 0.1 * torch.randn(p.shape, generator=gen)
            elif "embed_tokens" in name:
                v = torch.randn(p.shape, generator=gen) / (p.shape[1] ** 0.5)
            else:
                v = torch.randn(p.shape, generator=gen) / (p.shape[1] ** 0.5)
            p.copy_(bf16_exact(v))


def make_examples(vocab, seed, spec=EXAMPLES):
    """Examples of `spec` ((length, mask) pairs, as EXAMPLES): C4 row seed * 10 + i for example i,
    tokenised, cut to the length, ids modulo `vocab`; labels = ids with the mask's -100s."""
    tok = Tokenizer.from_file(os.path.join(SHARED, "tokenizers", "qwen2.5-instruct", "tokenizer.json"))
    with open(os.path.join(SHARED, "datasets", "text", "c4_demo.jsonl")) as f:
        texts = [json.loads(line)["text"] for line in f]
    out = []
    for i, (length, mask) in enumerate(spec):
        ids = tok.encode(texts[seed * 10 + i]).ids
        assert len(ids) >= length, (len(ids), length)
        ids = [x % vocab for x in ids[:length]]
        labels = list(ids)
        if mask == "none":
            labels = [-100] * length
        elif isinstance(mask, tuple) and mask[0] == "prefix":
            labels = [-100] * mask[1] + labels[mask[1]:]
        elif isinstance(mask, tuple) and mask[0] == "every":
            labels = [-100 if j % mask[1] == 0 else x for j, x in enumerate(labels)]
        out.append({"input_ids": ids, "labels": labels})
    return out


def write_case(d, name, cfg, seed, norm_center=1.0, spec=EXAMPLES, text_seed=None,
               check_example=None, extra=None):
    """Writes the golden directory `d` of model `name` (config `cfg`, weights from `seed`, texts
    from `text_seed`, default `seed`): see the module docstring. `norm_center` goes to
    randomize(), `spec` to make_examples(); check_example(model, i, example) runs after example
    i's forward (an assertion on the model's state); `extra` (a dict, or a function of the reloaded model and the examples
    returning one) adds fields to golden.json. Returns the golden.json summary."""
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(1234 + seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                             dtype=torch.float32)
    model.train()  # dropout is 0 in these configs
    randomize(model, torch.Generator().manual_seed(99 + seed), norm_center)
    model.save_pretrained(d, safe_serialization=True)
    # Store the (bf16-exact) weights as BF16, the way released checkpoints are.
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()
          if not (cfg.tie_word_embeddings and k == "lm_head.weight")}
    save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json")) as f:
        cfg_json = json.load(f)
    cfg_json["dtype"] = "bfloat16"
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2, sort_keys=True)
        f.write("\n")
    if os.path.exists(os.path.join(d, "generation_config.json")):
        os.remove(os.path.join(d, "generation_config.json"))

    # Reload from disk exactly as a user would, fp32, eager attention.
    model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager",
                                                 dtype=torch.float32)
    model.train()
    examples = make_examples(cfg.vocab_size, seed if text_seed is None else text_seed, spec)
    n_total = sum(sum(1 for y in ex["labels"][1:] if y != -100) for ex in examples)
    model.zero_grad()
    golden = {}
    records = []
    loss_total = 0.0
    for i, ex in enumerate(examples):
        ids = torch.tensor([ex["input_ids"]])
        labels = torch.tensor([ex["labels"]])
        out = model(input_ids=ids, labels=labels, num_items_in_batch=n_total)
        if check_example is not None:
            check_example(model, i, ex)
        logits = out.logits[0].float()
        tgt = labels[0, 1:]
        valid = tgt != -100
        ce_sum = F.cross_entropy(logits[:-1], tgt, ignore_index=-100, reduction="sum")
        correct = int(((logits[:-1].argmax(-1) == tgt) & valid).sum())
        # HF's loss (ForCausalLMLoss, sum / num_items_in_batch) must agree with ours.
        assert torch.allclose(out.loss * n_total, ce_sum, rtol=1e-6, atol=1e-6)
        out.loss.backward()
        loss_total += float(ce_sum.detach())
        L = len(ex["input_ids"])
        rows = sorted(set(list(range(min(LOGIT_ROWS, L))) + [L - 1]))
        golden[f"logits.{i}"] = logits[rows].detach().contiguous()
        records.append({"input_ids": ex["input_ids"], "labels": ex["labels"],
                        "loss_sum": float(ce_sum.detach()), "targets": int(valid.sum()),
                        "correct": correct, "logit_rows": rows})
    norms = {}
    total_sq = 0.0
    for pname, p in model.named_parameters():
        golden[f"grad.{pname}"] = p.grad.detach().float().contiguous()
        g = p.grad.detach().double()
        norms[pname] = float(g.norm())
        total_sq += float((g * g).sum())
    save_file(golden, os.path.join(d, "golden.safetensors"))
    summary = {"model": name, "transformers": __import__("transformers").__version__,
               "torch": torch.__version__,
               "num_parameters": sum(p.numel() for p in model.parameters()), "examples": records, "targets": n_total,
               "loss_sum": loss_total, "mean_loss": loss_total / n_total,
               "grad_norms": norms, "total_grad_norm": total_sq ** 0.5}
    if extra is not None:
        summary.update(extra(model, examples) if callable(extra) else extra)
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    for fn in os.listdir(d):
        os.chmod(os.path.join(d, fn), 0o644)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"{sum(len(e['input_ids']) for e in examples)} tokens, N={n_total}, "
          f"mean loss {loss_total / n_total:.6f}", file=sys.stderr)
    return summary


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    os.makedirs(OUT, exist_ok=True)
    for seed, (name, cfg) in enumerate(MODELS.items()):
        write_case(os.path.join(OUT, name), name, cfg, seed)

if __name__ == "__main__":
    main()

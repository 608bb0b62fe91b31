#!/usr/bin/env python3
"""Writes the optimizer golden files of tests/data/optim/ with torch and transformers.

Run with the golden environment (torch + transformers installed):
    /work/goldenv/bin/python tools/make_optim_goldens.py

Files written:
  adamw.json + adamw.bin  torch.optim.AdamW (default single-tensor CPU path) over several steps, two
                          param groups (decay / no decay), gradients clipped by
                          torch.nn.utils.clip_grad_norm_, lr from transformers.get_scheduler.
                          adamw.bin holds little-endian float32 arrays; adamw.json gives each
                          array's offset and length (in elements) in that file.
  schedules.json          transformers.get_scheduler learning rates per step, and
                          TrainingArguments.get_warmup_steps for float/int warmup_steps.
  clip.json               torch clip_grad_norm_: total norm (fp32) and the clip coefficient applied.
  decay_names.json        Trainer.get_decay_parameter_names on tiny Qwen2/Llama models and on a
                          synthetic module tree of awkward names.

One deliberate change to stock torch: Tensor.sqrt is made correctly rounded (IEEE) during the AdamW
runs. Stock torch on the CPU computes fp32 sqrt through a vectorised approximation that is off by
one ulp for ~15 % of inputs (CPU-dependent), which no other implementation can reproduce; torch on
CUDA and zerotune on every device use the correctly rounded sqrt. Everything else (lerp with FMA,
addcmul with FMA, the fp64 Python scalars, division by the fp32-rounded scalar) is stock torch. The
script prints how far stock torch lands from the goldens (a few ulp at most).
"""
import json
import math
import os
import sys

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "optim")


class ExactSqrt(TorchFunctionMode):
    """Routes Tensor.sqrt / torch.sqrt of fp32 tensors through fp64 (exact: 53 >= 2*24+2)."""

    calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.sqrt, torch.sqrt) and args[0].dtype == torch.float32:
            ExactSqrt.calls += 1
            return args[0].double().sqrt().float()
        return func(*args, **kwargs)


class Blob:
    """Accumulates float32 / uint16 arrays into one binary file; returns [offset, count] refs."""

    def __init__(self):
        self.parts = []
        self.size = 0  # bytes

    def add(self, arr):
        arr = np.ascontiguousarray(arr)
        assert arr.dtype in (np.float32, np.uint16)
        ref = {"offset_bytes": self.size, "count": int(arr.size), "dtype": str(arr.dtype)}
        data = arr.tobytes()
        pad = (-len(data)) % 4
        self.parts.append(data + b"\0" * pad)
        self.size += len(data) + pad
        return ref


def bf16_bits(t):
    return t.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def make_lr_lambda_scheduler(kind, base_lr, warmup, total):
    from transformers import get_scheduler

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr)
    return opt, get_scheduler(kind, opt, num_warmup_steps=warmup, num_training_steps=total)


def adamw_case(blob, name, seed, sizes, decay_flags, hyper, sched, steps, start_step, max_grad_norm,
               grad_scales, stock_report):
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(n, generator=g) * 0.5) for n in sizes]
    p0 = [p.detach().clone() for p in params]
    groups = [
        {"params": [p for p, d in zip(params, decay_flags) if d], "weight_decay": hyper["weight_decay"]},
        {"params": [p for p, d in zip(params, decay_flags) if not d], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=hyper["lr"], betas=(hyper["beta1"], hyper["beta2"]),
                            eps=hyper["eps"])
    from transformers import get_scheduler

    scheduler = get_scheduler(sched["kind"], opt, num_warmup_steps=sched["warmup"],
                              num_training_steps=sched["total"])
    stock = [p.detach().clone() for p in params]  # the same run with stock sqrt, for the report
    stock_params = [torch.nn.Parameter(s) for s in stock]
    stock_groups = [
        {"params": [p for p, d in zip(stock_params, decay_flags) if d], "weight_decay": hyper["weight_decay"]},
        {"params": [p for p, d in zip(stock_params, decay_flags) if not d], "weight_decay": 0.0},
    ]
    stock_opt = torch.optim.AdamW(stock_groups, lr=hyper["lr"], betas=(hyper["beta1"], hyper["beta2"]),
                                  eps=hyper["eps"])
    stock_sched = get_scheduler(sched["kind"], stock_opt, num_warmup_steps=sched["warmup"],
                                num_training_steps=sched["total"])
    case = {"name": name, "sizes": sizes, "decay": decay_flags, **hyper,
            "max_grad_norm": max_grad_norm, "schedule": sched, "start_step": start_step,
            "p0": [blob.add(t.numpy()) for t in p0], "steps": []}
    for k in range(steps):
        grads = []
        for i, n in enumerate(sizes):
            gr = torch.randn(n, generator=g) * grad_scales[k]
            if name == "edge" and i == 0:
                gr[::3] = 0.0  # exact zeros
                gr[1::7] *= 1e-20  # squares underflow to subnormal / zero in fp32
            grads.append(gr)
        for p, sp, gr in zip(params, stock_params, grads):
            p.grad = gr.clone()
            sp.grad = gr.clone()
        if k == 0 and start_step > 0:
            # Pretend `start_step` steps already happened (state with zero moments): only the
            # bias corrections see it. torch creates the state lazily, so create it here.
            for o, ps in ((opt, params), (stock_opt, stock_params)):
                for p in ps:
                    o.state[p]["step"] = torch.tensor(float(start_step))
                    o.state[p]["exp_avg"] = torch.zeros_like(p)
                    o.state[p]["exp_avg_sq"] = torch.zeros_like(p)
        lr = opt.param_groups[0]["lr"]
        if max_grad_norm > 0:
            total = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            torch.nn.utils.clip_grad_norm_(stock_params, max_grad_norm)
            # The documented coefficient, checked to reproduce every clipped gradient bit for bit.
            c = torch.clamp(max_grad_norm / (total + 1e-6), max=1.0)
            for p, gr in zip(params, grads):
                assert torch.equal(gr * c, p.grad), "clip coefficient does not reproduce torch"
            coef = float(c)
            total_f = float(total)
        else:
            total_f = float(torch.linalg.vector_norm(torch.cat(grads)))
            coef = 1.0
        with ExactSqrt():
            opt.step()
        stock_opt.step()
        scheduler.step()
        stock_sched.step()
        case["steps"].append({
            "lr": lr,
            "total_norm_f32": total_f,
            "clip_coef_f32": coef,
            "grads": [blob.add(gr.numpy()) for gr in grads],
            "p": [blob.add(p.detach().numpy()) for p in params],
            "m": [blob.add(opt.state[p]["exp_avg"].numpy()) for p in params],
            "v": [blob.add(opt.state[p]["exp_avg_sq"].numpy()) for p in params],
        })
    case["p_bf16_final"] = [blob.add(bf16_bits(p.detach())) for p in params]
    worst = 0
    for p, sp in zip(params, stock_params):
        d = np.abs(p.detach().numpy().view(np.int32).astype(np.int64) - sp.detach().numpy().view(np.int32))
        worst = max(worst, int(d.max()))
    stock_report.append(f"{name}: stock torch (MKL/SIMD sqrt) differs from the goldens by <= {worst} ulp")
    return case


def make_adamw():
    blob = Blob()
    sizes = [1, 7, 16, 33, 64, 129, 1000]
    report = []
    cases = [
        adamw_case(blob, "clip_linear_warmup", 1, sizes, [True, False, True, False, True, True, True],
                   dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1),
                   dict(kind="linear", warmup=2, total=6), 6, 0, 1.0,
                   [0.01, 0.2, 0.05, 0.3, 0.02, 0.1], report),
        adamw_case(blob, "big_beta_late_step", 2, sizes, [True, True, False, True, False, True, True],
                   dict(lr=2e-5, beta1=0.4, beta2=0.95, eps=1e-6, weight_decay=0.01),
                   dict(kind="constant", warmup=0, total=4), 4, 1000, 0.0, [1.0, 0.5, 2.0, 0.1],
                   report),
        adamw_case(blob, "edge", 3, sizes, [False] * len(sizes),
                   dict(lr=5e-4, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0),
                   dict(kind="cosine", warmup=1, total=5), 5, 0, 0.5, [1e3, 1e-3, 1.0, 30.0, 1e-6],
                   report),
    ]
    assert ExactSqrt.calls > 0, "the sqrt override never ran"
    with open(os.path.join(OUT, "adamw.bin"), "wb") as f:
        for part in blob.parts:
            f.write(part)
    with open(os.path.join(OUT, "adamw.json"), "w") as f:
        json.dump({"generator": "tools/make_optim_goldens.py", "torch": torch.__version__,
                   "cases": cases}, f, indent=1)
    print("\n".join(report))


def make_schedules():
    from transformers import TrainingArguments

    out = {"schedules": [], "warmup_steps": []}
    combos = [(10, 0), (10, 3), (7, 1), (1, 0), (5, 5), (25, 4), (200, 30)]
    for kind in ["linear", "cosine", "constant", "constant_with_warmup"]:
        for total, warmup in combos:
            for base_lr in [2e-5, 3e-4]:
                _, sched = make_lr_lambda_scheduler(kind, base_lr, warmup, total)
                lrs = []
                for _ in range(total):
                    lrs.append(sched.get_last_lr()[0])
                    sched.optimizer.step()
                    sched.step()
                out["schedules"].append({"kind": kind, "base_lr": base_lr, "warmup": warmup,
                                         "total": total, "lr": lrs})
    for total, ws in [(100, 0), (100, 0.1), (7, 0.1), (1000, 0.03), (10, 0.99), (50, 3), (50, 3.7),
                      (3, 0.5), (1, 0.5)]:
        args = TrainingArguments(output_dir="/tmp/zt_optim_goldens", warmup_steps=ws, report_to=[])
        out["warmup_steps"].append({"total": total, "warmup_steps": ws,
                                    "result": args.get_warmup_steps(total)})
    with open(os.path.join(OUT, "schedules.json"), "w") as f:
        json.dump(out, f, indent=1)


def make_clip():
    g = torch.Generator().manual_seed(7)
    rows = []
    for scale in [1e-8, 1e-4, 0.1, 0.5, 0.999, 1.0, 1.0000001, 3.0, 77.0, 1e6, 1e18]:
        for max_norm in [1.0, 0.3, 5.0]:
            a = torch.randn(50, generator=g) * scale / 7.0
            sentinel = torch.ones(1) * scale / 7.0  # its clipped/unclipped ratio is the coefficient
            pa, ps = torch.nn.Parameter(a.clone()), torch.nn.Parameter(sentinel.clone())
            pa.grad, ps.grad = a.clone(), sentinel.clone()
            total = torch.nn.utils.clip_grad_norm_([pa, ps], max_norm)
            # clip_grad_norm_ multiplies by an fp32 coefficient c: grad' = fp32(grad * c). Recover c
            # exactly by re-deriving it from the documented expression and checking it reproduces
            # the clipped sentinel bit for bit.
            c = torch.clamp(max_norm / (total + 1e-6), max=1.0)
            assert torch.equal(sentinel * c, ps.grad), "coefficient does not reproduce the clipped grad"
            assert torch.equal(a * c, pa.grad)
            rows.append({"total_norm_f32": float(total), "max_norm": max_norm, "coef_f32": float(c)})
    with open(os.path.join(OUT, "clip.json"), "w") as f:
        json.dump({"cases": rows}, f, indent=1)


def make_decay_names():
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Trainer

    out = {"models": []}
    tiny = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2)
    models = {
        "qwen2_tied": Qwen2ForCausalLM(Qwen2Config(**tiny, tie_word_embeddings=True)),
        "qwen2_untied": Qwen2ForCausalLM(Qwen2Config(**tiny, tie_word_embeddings=False)),
        "llama": LlamaForCausalLM(LlamaConfig(**tiny)),
    }

    class Tree(torch.nn.Module):
        """Synthetic module tree with awkward parameter names; leaves are plain Parameters."""

        def __init__(self, paths):
            super().__init__()
            for path in paths:
                mod = self
                parts = path.split(".")
                for part in parts[:-1]:
                    if not hasattr(mod, part):
                        mod.add_module(part, torch.nn.Module())
                    mod = getattr(mod, part)
                mod.register_parameter(parts[-1], torch.nn.Parameter(torch.zeros(2)))

    models["synthetic"] = Tree([
        "model.norm.weight", "model.normalizer.weight", "model.enorm.weight", "model.q_norm.weight",
        "model.norm_x.weight", "model.x_norm.scale", "model.layers.0.rmsnorm_gate.weight",
        "model.Final_LayerNorm.weight", "model.layers.0.BiasAdd.w", "model.debias.weight",
        "model.layers.0.mlp.up_proj.weight", "model.layers.0.attn.out_bias", "norm.weight",
        "model.layers.1.norms.weight", "model.layers.1.attn_norm", "model.layers.1.pre_norm_x",
        "model.ln_f.weight", "model.layers.0.input_layernorm.weight",
    ])
    for name, model in models.items():
        decay = set(Trainer.get_decay_parameter_names(None, model))
        params = [{"name": n, "shape": list(p.shape), "decay": n in decay}
                  for n, p in model.named_parameters()]
        out["models"].append({"model": name, "params": params})
    with open(os.path.join(OUT, "decay_names.json"), "w") as f:
        json.dump(out, f, indent=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    make_adamw()
    make_schedules()
    make_clip()
    make_decay_names()
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()

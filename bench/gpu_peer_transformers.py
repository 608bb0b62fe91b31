#!/usr/bin/env python3
"""The single-GPU peer of bench_train_gpu (issue 8): transformers' Qwen2ForCausalLM trained on the same
token stream, plain and with the Liger kernels, gradient checkpointing on and off.

Same inputs as zerotune's bench_train_gpu: the Qwen2.5-1.5B config from the JSON given, random init
(seed 0), pure bf16 weights (model.to(bfloat16), no autocast — the usual "bf16: true" single-GPU
setup of a TRL user), torch.optim.AdamW(fused=True), micro-batches of `--seqs` sequences of `--seq`
tokens read from the int32 token file (every token a target: labels = input_ids). The token file is
written here when it does not exist (numpy default_rng(0)), so both systems read the same ids.
Throughput: tokens / s over the timed steps (events + synchronize), MFU = tok_s * (6 * params +
12 * L * H * seq / 2) / 790e12 (causal attention counted at half), peak memory =
torch.cuda.max_memory_allocated after reset at the first timed step.
Writes one JSON object per variant to --out (jsonl). Liger's class-level patch cannot be undone in
a process, so the plain variants run first.
"""
import argparse, json, os, time

import numpy as np
import torch
import transformers
from transformers import Qwen2Config, Qwen2ForCausalLM

p = argparse.ArgumentParser()
p.add_argument("--config", required=True)
p.add_argument("--tokens", required=True, help="int32 token file [steps, seqs, seq]")
p.add_argument("--seqs", type=int, default=4)
p.add_argument("--seq", type=int, default=2048)
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--steps", type=int, default=8)
p.add_argument("--variants", default="plain:1,plain:0,liger:1,liger:0")
p.add_argument("--out", required=True)
a = p.parse_args()

cfg_json = json.load(open(a.config))
cfg = Qwen2Config(**{k: v for k, v in cfg_json.items() if k not in ("architectures", "transformers_version")})
cfg._attn_implementation = "sdpa"
V = cfg.vocab_size
n_steps = a.warmup + a.steps
if not os.path.exists(a.tokens):
    ids = np.random.default_rng(0).integers(0, V, size=(n_steps, a.seqs, a.seq), dtype=np.int32)
    ids.tofile(a.tokens)
ids_all = np.fromfile(a.tokens, dtype=np.int32).reshape(-1, a.seqs, a.seq)
assert ids_all.shape[0] >= n_steps, "token file too short"


def run(kind, gc):
    torch.manual_seed(0)
    with torch.device("cuda"):
        m = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    if gc:
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    m.train()
    n_params = sum(t.numel() for t in m.parameters())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True)
    batches = [torch.from_numpy(ids_all[i].astype(np.int64)).cuda() for i in range(n_steps)]
    losses = []

    def step(i):
        out = m(input_ids=batches[i], labels=batches[i])
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss.detach()

    for i in range(a.warmup):
        losses.append(step(i).item())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    timed = [step(a.warmup + i) for i in range(a.steps)]
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / a.steps
    losses += [x.item() for x in timed]
    tok_s = a.seqs * a.seq / dt
    L, H = cfg.num_hidden_layers, cfg.hidden_size
    mfu = tok_s * (6 * n_params + 12 * L * H * a.seq / 2) / 790e12
    names = [type(x).__name__ for x in m.modules()]
    rec = dict(system="transformers" + ("+liger" if kind == "liger" else ""), gc=bool(gc),
               tokens_per_s=tok_s, step_s=dt, mfu=mfu, peak_gib=torch.cuda.max_memory_allocated() / 2**30,
               params=n_params, losses=losses, liger_modules=names.count("LigerRMSNorm") + names.count("LigerSwiGLUMLP"),
               torch=torch.__version__, transformers=transformers.__version__)
    print(json.dumps({k: v for k, v in rec.items() if k != "losses"}), flush=True)
    with open(a.out, "a") as f:
        f.write(json.dumps(rec) + "\n")
    del m, opt, batches
    torch.cuda.empty_cache()


patched = False
for v in a.variants.split(","):
    kind, gc = v.split(":")
    if kind == "liger" and not patched:
        try:
            from liger_kernel.transformers import apply_liger_kernel_to_qwen2
        except ImportError as e:
            print(json.dumps({"system": "transformers+liger", "error": str(e)}), flush=True)
            break
        apply_liger_kernel_to_qwen2()  # class-level patch, before the liger models are built
        patched = True
    run(kind, int(gc))

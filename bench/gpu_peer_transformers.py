#!/usr/bin/env python3
"""The single-GPU peer of bench_train_gpu (issues 8 and 18): a transformers causal LM trained on the
same token stream as zerotune, one optimizer step per micro-batch, in one of these variants:

  plain    system "transformers": the model in pure bf16 (built in fp32, then model.to(bfloat16); no
           autocast), torch.optim.AdamW(fused=True) over the bf16 parameters (bf16 Adam state) — the
           single-GPU setup of a transformers 5 user whose checkpoint loads in bf16.
  liger    system "transformers+liger": plain + the Liger kernels (liger-kernel's class-level patch
           for the config's model_type: RoPE, RMSNorm, SwiGLU MLP, fused linear cross-entropy).
  plain32  system "transformers fp32-master": the model kept in fp32, each forward under
           torch.autocast("cuda", bfloat16), AdamW(fused=True) over the fp32 parameters — what TRL 0.25
           + transformers 4.57 do on one GPU with `bf16: true` (the model loads in fp32; fp32 master
           weights and Adam state, as zerotune keeps them).
  liger32  system "transformers+liger fp32-master": plain32 + the Liger kernels (the users'
           `use_liger_kernel: true` on that stack).

Every variant runs with gradient checkpointing on (GC 1: non-reentrant torch.utils.checkpoint per
decoder layer) or off (GC 0). Inputs as bench_train_gpu's: any config.json whose model_type
transformers knows (AutoConfig / AutoModelForCausalLM.from_config, attn_implementation="sdpa";
Qwen2.5-1.5B and Llama-3.2-1B at least), random init (torch seed 0), micro-batches of SEQS sequences
of SEQ tokens read from an int32 token file [n_steps, SEQS, SEQ] (every token a target: labels =
input_ids). The token file is written here when it does not exist (numpy default_rng(0), ids in
[0, vocab_size)); a file holding an id >= vocab_size is refused.
Throughput: tokens / s over the timed steps (device synchronised at both ends), MFU = tok_s *
(6 * params + 12 * L * H * seq / 2) / 790e12 (causal attention counted at half), peak memory =
torch.cuda.max_memory_allocated after a reset at the first timed step.

One process can run several configs, shapes and variants (import, Liger patch and Triton
compilation are paid once): --config NAME=PATH (repeatable), --shapes 4x2048,1x8192, --variants
KIND:GC[@SHAPE+SHAPE…] (a variant without @ runs at every --shapes shape), --tokens PATH or a template
with {config}, {seqs}, {seq}. Runs go variant by variant, then config, then shape. Liger's class
patch cannot be undone in a process, so every plain/plain32 variant must come before the first
liger/liger32 one (refused otherwise).

Output: one JSON line per run on stdout and appended to --out (the file's lines also hold the
losses): system, variant, config, model_type, gc, seqs, seq, tokens_per_s, step_s, mfu, peak_gib,
params, liger_modules, versions. A run that runs out of device memory gives a line with
"error": "oom" and the sweep goes on; any other exception gives "error": "exception" (message in
"message", traceback on stderr), the sweep goes on and the process exits 1 at the end.

--device cpu is a debugging aid (argument parsing, token files, the loop, the records) for tiny
configs on a machine without a GPU: no memory statistics (peak_gib null), no Liger.
"""
import argparse
import gc as pygc
import importlib.metadata
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

from sweep_spec import SYSTEMS, parse_shapes, parse_variants  # beside this file


def load_config(spec):
    """'NAME=PATH' or 'PATH' -> (name, transformers config with sdpa attention). The name defaults to
    the directory of a config.json, else the file's stem."""
    name, sep, path = spec.partition("=")
    if not sep:
        path = spec
        stem = os.path.splitext(os.path.basename(path))[0]
        name = os.path.basename(os.path.dirname(os.path.abspath(path))) if stem == "config" else stem
    d = json.load(open(path))
    d.pop("transformers_version", None)
    if "model_type" not in d:
        raise ValueError(f"{path}: no model_type")
    cfg = AutoConfig.for_model(**d)
    cfg._attn_implementation = "sdpa"
    return name, cfg


def token_batches(template, name, vocab, seqs, seq, n_steps):
    """int32 ids [n_steps, seqs, seq] from the file the template names (written when missing)."""
    path = template.format(config=name, seqs=seqs, seq=seq)
    if not os.path.exists(path):
        rng = np.random.default_rng(0)
        rng.integers(0, vocab, size=(n_steps, seqs, seq), dtype=np.int32).tofile(path)
    ids = np.fromfile(path, dtype=np.int32)
    need = n_steps * seqs * seq
    if ids.size < need:
        raise ValueError(f"{path}: {ids.size} tokens, need {need} ({n_steps} steps x {seqs} x {seq})")
    ids = ids[:need].reshape(n_steps, seqs, seq)
    if ids.min() < 0 or ids.max() >= vocab:
        raise ValueError(f"{path}: token ids in [{ids.min()}, {ids.max()}], vocab_size is {vocab}")
    return ids


def is_oom(e):
    """True for the device's out-of-memory errors (torch's own, or one a library raised as text)."""
    if isinstance(e, torch.OutOfMemoryError):
        return True
    msg = str(e)
    return isinstance(e, RuntimeError) and ("out of memory" in msg or "CUBLAS_STATUS_ALLOC_FAILED" in msg)


def version(pkg):
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def guarded(rec, fn, cuda):
    """rec.update(fn()); an out-of-memory error sets rec's "error" to "oom", any other exception to
    "exception" (message in "message", traceback on stderr). The run's memory is freed either way.
    Returns False for an error other than OOM."""
    ok = True
    try:
        rec.update(fn())
    except Exception as e:  # noqa: BLE001 — recorded, the sweep goes on
        if is_oom(e):
            rec.update(error="oom", message=str(e).splitlines()[0][:300])
        else:
            ok = False
            rec.update(error="exception", message=f"{type(e).__name__}: {e}"[:500])
            traceback.print_exc()
    # The failed run's tensors went with its frames when the exception was dropped; free the cache.
    pygc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return ok


def emit(rec, out):
    """One JSON line on stdout (without the losses) and appended to `out` (with them)."""
    print(json.dumps({k: v for k, v in rec.items() if k != "losses"}), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")


class Runner:
    """Runs one (variant, config, shape) after another on one device; the device is chosen once."""

    def __init__(self, a):
        self.a = a
        self.dev = torch.device(a.device)
        self.cuda = self.dev.type == "cuda"
        self.sync = torch.cuda.synchronize if self.cuda else (lambda: None)
        self.patched = set()  # model_types Liger has patched in this process

    def patch_liger(self, model_type):
        if model_type in self.patched:
            return
        if not self.cuda:
            raise RuntimeError("Liger needs a CUDA device (Triton kernels)")
        from liger_kernel.transformers import _apply_liger_kernel
        _apply_liger_kernel(model_type)  # class-level patch, before the Liger models are built
        self.patched.add(model_type)

    def build(self, kind, gc, cfg):
        """The model of `cfg` for variant `kind` (random init, torch seed 0), GC on or off, and its
        AdamW -> (model, optimizer, params, liger_modules). Raises when Liger patched nothing."""
        if kind.startswith("liger"):
            self.patch_liger(cfg.model_type)
        torch.manual_seed(0)
        with self.dev:
            m = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", dtype=torch.float32)
        if not kind.endswith("32"):
            m = m.to(torch.bfloat16)
        if gc:
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        m.train()
        names = [type(x).__name__ for x in m.modules()]
        liger_modules = names.count("LigerRMSNorm") + names.count("LigerSwiGLUMLP")
        if kind.startswith("liger") and liger_modules == 0:
            raise RuntimeError(f"Liger did not patch model_type {cfg.model_type!r}")
        opt = torch.optim.AdamW(m.parameters(), lr=1e-5, fused=True)
        return m, opt, sum(t.numel() for t in m.parameters()), liger_modules

    def run(self, kind, gc, name, cfg, seqs, seq):
        """One variant at one shape -> its record; exceptions propagate to the caller."""
        a, fp32 = self.a, kind.endswith("32")
        n_steps = a.warmup + a.steps
        ids = token_batches(a.tokens, name, cfg.vocab_size, seqs, seq, n_steps)
        m, opt, n_params, liger_modules = self.build(kind, gc, cfg)
        batches = [torch.from_numpy(ids[i].astype(np.int64)).to(self.dev) for i in range(n_steps)]

        def step(i):
            with torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=fp32):
                out = m(input_ids=batches[i], labels=batches[i])
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return out.loss.detach()

        losses = [step(i).item() for i in range(a.warmup)]
        self.sync()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        timed = [step(a.warmup + i) for i in range(a.steps)]
        self.sync()
        dt = (time.perf_counter() - t0) / a.steps
        losses += [x.item() for x in timed]
        tok_s = seqs * seq / dt
        L, H = cfg.num_hidden_layers, cfg.hidden_size
        return dict(tokens_per_s=tok_s, step_s=dt, mfu=tok_s * (6 * n_params + 12 * L * H * seq / 2) / 790e12,
                    peak_gib=torch.cuda.max_memory_allocated() / 2**30 if self.cuda else None,
                    params=n_params, liger_modules=liger_modules, losses=losses)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", action="append", required=True, help="[NAME=]config.json (repeatable)")
    p.add_argument("--tokens", required=True,
                   help="int32 token file [steps, seqs, seq], or a template with {config} {seqs} {seq}")
    p.add_argument("--seqs", type=int, default=4, help="sequences per micro-batch (without --shapes)")
    p.add_argument("--seq", type=int, default=2048, help="tokens per sequence (without --shapes)")
    p.add_argument("--shapes", help="SEQSxSEQ list, e.g. 4x2048,1x32768 (default: --seqs x --seq)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--variants", default="plain:1,plain:0,liger:1,liger:0",
                   help="KIND:GC[@SHAPE+SHAPE…] list, KIND in " + ", ".join(SYSTEMS))
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: debugging only")
    p.add_argument("--out", required=True, help="jsonl file the records are appended to")
    a = p.parse_args()
    try:
        shapes = parse_shapes(a.shapes) if a.shapes else [(a.seqs, a.seq)]
        variants = parse_variants(a.variants, shapes)
        configs = [load_config(c) for c in a.config]
    except (ValueError, OSError) as e:
        p.error(str(e))
    if a.steps <= 0 or a.warmup < 0:
        p.error("--steps must be positive and --warmup not negative")
    runner = Runner(a)
    common = dict(torch=torch.__version__, transformers=transformers.__version__,
                  liger_kernel=version("liger-kernel"), device=a.device, warmup=a.warmup, steps=a.steps)
    failed = 0
    for kind, gc, kind_shapes in variants:
        for name, cfg in configs:
            for seqs, seq in kind_shapes:
                rec = dict(system=SYSTEMS[kind], variant=kind, config=name, model_type=cfg.model_type,
                           gc=bool(gc), seqs=seqs, seq=seq)
                failed += not guarded(rec, lambda: runner.run(kind, gc, name, cfg, seqs, seq), runner.cuda)
                emit(dict(rec, **common), a.out)
    if failed:
        print(f"gpu_peer_transformers.py: {failed} run(s) failed with an error other than OOM", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

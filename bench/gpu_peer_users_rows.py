#!/usr/bin/env python3
"""The peer of the users' job on their own rows (issue 18 §3; scripts/gpu_check.sh usersrows):
transformers + Liger fed the rows that zerotune trains on, as TRL's SFTTrainer feeds them.

The rows: zerotune's token cache of the users' train split (`zerotune prepare --config sft.yaml
--json` names the .ztc file; layout in src/data/token_cache.h): each example's token ids and its
target flags (1 where HF's label is the token, 0 where it is -100), so both systems see the same
ids and the same completion mask. They are fed as TRL feeds an unpacked dataset: examples in a
seeded random order (numpy default_rng(--seed) permutation; TRL's sampler order differs, which does
not change the cost per token), micro-batches of --micro-batch examples padded to the longest of
the micro-batch (attention_mask 0 and label -100 on padding), gradient checkpointing on, one
AdamW(fused=True) step every --accumulation micro-batches. Variants (gpu_peer_transformers.py's
docstring defines them): liger (pure bf16, transformers 5) and liger32 (fp32 model under bf16
autocast, AdamW over fp32 parameters: TRL 0.25 + transformers 4.57 with bf16: true — the users'
stack with their use_liger_kernel: true); plain and plain32 as well. The model: the config.json given,
random init.

Timing: --warmup-micro micro-batches and one optimizer step untimed, then --steps optimizer steps of
--accumulation micro-batches each, the device synchronised at both ends. Tokens/s count the
non-padding tokens (what zerotune's train_tokens_per_second counts: it packs, no padding);
padded_tokens_per_s counts the positions processed. Peak memory: torch.cuda.max_memory_allocated
after a reset at the first timed micro-batch. One JSON line per variant (stdout and --out); an OOM
is recorded as "error": "oom", any other error makes the process exit 1 at the end.
"""
import argparse
import struct
import sys
import time

import numpy as np
import torch
import transformers

from gpu_peer_transformers import Runner, emit, guarded, load_config, version  # beside this file
from sweep_spec import SYSTEMS, parse_variants  # beside this file


def read_token_cache(path):
    """zerotune's token cache -> (ids int32 [num_tokens], targets uint8 [num_tokens],
    example_offsets int64 [num_examples + 1]). Checks the magic and the version (1); the checksums
    are zerotune's business (it wrote the file)."""
    b = open(path, "rb").read()
    magic, ver, _header_bytes = struct.unpack_from("<8sII", b, 0)
    if magic != b"ZTTOKCAC" or ver != 1:
        raise ValueError(f"{path}: not a version-1 zerotune token cache (magic {magic!r}, version {ver})")
    (_klo, _khi, n_tok, n_ex, _n_samples, ids_o, tgt_o, exo_o, *_rest) = struct.unpack_from("<13Q", b, 16)
    ids = np.frombuffer(b, np.int32, n_tok, ids_o)
    targets = np.frombuffer(b, np.uint8, n_tok, tgt_o)
    offsets = np.frombuffer(b, np.int64, n_ex + 1, exo_o)
    if offsets[0] != 0 or offsets[-1] != n_tok:
        raise ValueError(f"{path}: example offsets do not span the {n_tok} tokens")
    return ids, targets, offsets


def micro_batches(ids, targets, offsets, mb, seed, device):
    """Endless padded micro-batches: (input_ids, attention_mask, labels) [mb, longest] int64 on
    device, and the non-padding token count. Examples in a seeded order, one epoch after another."""
    n = len(offsets) - 1
    order, pos = np.random.default_rng(seed).permutation(n), 0
    while True:
        picks = [order[(pos + j) % n] for j in range(mb)]
        pos += mb
        spans = [(offsets[k], offsets[k + 1]) for k in picks]
        longest = max(e - s for s, e in spans)
        x = np.zeros((mb, longest), np.int64)
        att = np.zeros((mb, longest), np.int64)
        lab = np.full((mb, longest), -100, np.int64)
        for j, (s, e) in enumerate(spans):
            x[j, :e - s] = ids[s:e]
            att[j, :e - s] = 1
            lab[j, :e - s] = np.where(targets[s:e] == 1, ids[s:e], -100)
        yield (torch.from_numpy(x).to(device), torch.from_numpy(att).to(device),
               torch.from_numpy(lab).to(device), sum(e - s for s, e in spans))


def run(runner, kind, cfg, data, a):
    m, opt, n_params, liger_modules = runner.build(kind, True, cfg)
    fp32 = kind.endswith("32")
    it = micro_batches(*data, a.micro_batch, a.seed, runner.dev)

    def micro():
        x, att, lab, real = next(it)
        with torch.autocast(runner.dev.type, dtype=torch.bfloat16, enabled=fp32):
            out = m(input_ids=x, attention_mask=att, labels=lab)
        (out.loss / a.accumulation).backward()
        return real, x.numel()

    for _ in range(a.warmup_micro):
        micro()
    opt.step()
    opt.zero_grad(set_to_none=True)
    runner.sync()
    if runner.cuda:
        torch.cuda.reset_peak_memory_stats()
    real = padded = 0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        for _ in range(a.accumulation):
            r, p = micro()
            real, padded = real + r, padded + p
        opt.step()
        opt.zero_grad(set_to_none=True)
    runner.sync()
    dt = time.perf_counter() - t0
    return dict(tokens_per_s=real / dt, padded_tokens_per_s=padded / dt, padding_fraction=1 - real / padded,
                step_s=dt / a.steps, peak_gib=torch.cuda.max_memory_allocated() / 2**30 if runner.cuda else None,
                params=n_params, liger_modules=liger_modules)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="the model's config.json (random init)")
    p.add_argument("--cache", required=True, help="zerotune's token cache (.ztc) of the train split")
    p.add_argument("--micro-batch", type=int, default=4)
    p.add_argument("--accumulation", type=int, default=64)
    p.add_argument("--steps", type=int, default=1, help="timed optimizer steps")
    p.add_argument("--warmup-micro", type=int, default=8, help="untimed micro-batches (and one step)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--variants", default="liger,liger32", help="comma list of " + ", ".join(SYSTEMS))
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: debugging only")
    p.add_argument("--out", required=True, help="jsonl file the records are appended to")
    a = p.parse_args()
    kinds = a.variants.split(",")
    try:
        parse_variants(",".join(k + ":1" for k in kinds), [])  # known kinds, plain ones first
        name, cfg = load_config(a.config)
        data = read_token_cache(a.cache)
    except (ValueError, OSError) as e:
        p.error(str(e))
    if data[0].size and data[0].max() >= cfg.vocab_size:
        p.error(f"{a.cache}: token id {data[0].max()} >= the config's vocab_size {cfg.vocab_size}")
    runner = Runner(a)
    failed = 0
    for kind in kinds:
        rec = dict(system=SYSTEMS[kind], variant=kind, config=name, gc=True, micro_batch=a.micro_batch,
                   accumulation=a.accumulation, steps=a.steps, examples=len(data[2]) - 1)
        failed += not guarded(rec, lambda: run(runner, kind, cfg, data, a), runner.cuda)
        emit(dict(rec, torch=torch.__version__, transformers=transformers.__version__,
                  liger_kernel=version("liger-kernel"), device=a.device), a.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

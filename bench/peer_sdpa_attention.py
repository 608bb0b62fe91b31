#!/usr/bin/env python3
"""The attention peer for bench_cuda_attention: torch's scaled_dot_product_attention with its cuDNN
and flash backends on the same shapes (equal-length sequences, causal, GQA, bf16), timed the same
way (CUDA events, 3 warm-up calls, the mean of 20) and counted the same way (forward
4·n·S²/2·Hq·D FLOPs, backward 2.5× that).

zerotune packs n sequences of S tokens into one varlen row; SDPA takes them as a batch of n — the
same arithmetic. GQA runs with `enable_gqa=True` where the backend accepts it; otherwise K/V are
expanded to Hq heads first (outside the timed region) and the line says "kv expanded".

usage: peer_sdpa_attention.py S n Hq Hkv D   → one JSON line per backend on stdout (a backend
that refuses the shape gets a line with "error"); exit 1 when no backend ran
"""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def time_ms(f, iters=20):
    for _ in range(3):
        f()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(iters):
        f()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / iters


def run(S, n, Hq, Hkv, D, name):
    dev = torch.device("cuda")
    q = torch.randn(n, Hq, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(n, Hkv, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(n, Hkv, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    expanded = False
    with sdpa_kernel([BACKENDS[name]]):
        try:
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            kk, vv, gqa = k, v, True
        except RuntimeError:
            kk = k.detach().repeat_interleave(Hq // Hkv, dim=1).requires_grad_()
            vv = v.detach().repeat_interleave(Hq // Hkv, dim=1).requires_grad_()
            gqa, expanded = False, True
        fwd = lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True, enable_gqa=gqa)
        o = fwd()
        g = torch.randn_like(o)
        tf = time_ms(lambda: fwd())
        t_fb = time_ms(lambda: torch.autograd.grad(fwd(), (q, kk, vv), g))
    flops = 4.0 * n * S * S / 2 * Hq * D
    tb = max(t_fb - tf, 1e-9)
    return {"system": f"torch-sdpa-{name}", "S": S, "n": n, "Hq": Hq, "Hkv": Hkv, "D": D,
            "fwd_ms": tf, "bwd_ms": tb, "fwd_tflops": flops / tf / 1e9,
            "bwd_tflops": 2.5 * flops / tb / 1e9, "kv_expanded": expanded}


def main():
    S, n, Hq, Hkv, D = (int(a) for a in sys.argv[1:6])
    ran = 0
    for name in BACKENDS:
        try:
            print(json.dumps(run(S, n, Hq, Hkv, D, name)), flush=True)
            ran += 1
        except RuntimeError as e:  # a backend that refuses the shape is reported, not hidden
            print(json.dumps({"system": f"torch-sdpa-{name}", "S": S, "n": n, "D": D,
                              "error": str(e).splitlines()[0][:200]}), flush=True)
    sys.exit(0 if ran else 1)  # no peer at all for a shape is a failure of the benchmark


if __name__ == "__main__":
    main()

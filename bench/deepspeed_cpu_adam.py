#!/usr/bin/env python3
"""The peer of bench_host_adamw: parameters per second of DeepSpeed's CPU Adam (the optimizer of
ZeRO offload_optimizer: deepspeed.ops.adam.DeepSpeedCPUAdam, AdamW mode) over 100 M fp32 parameters
on the CPU, split in tensors of Qwen2-1.5B's MLP size (1536 x 8960) plus one remainder tensor. It
runs with the threads torch uses (torch.get_num_threads(); DeepSpeed's op is OpenMP, so
OMP_NUM_THREADS limits it). Rows: step() alone, and step() followed by the fp32 -> bf16 copy of the
parameters (what bench_host_adamw's numbers include; DeepSpeed does that copy outside step()).
Prints a small table and one JSON line with bench_host_adamw's keys. The first step() builds the
CPU Adam op (a compile of a minute or more, not timed).

Usage: python bench/deepspeed_cpu_adam.py [params] [reps]
"""
import json
import os
import sys
import time


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000_000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    try:
        import torch
        from deepspeed.ops.adam import DeepSpeedCPUAdam
    except ImportError as e:
        sys.exit(f"deepspeed_cpu_adam.py: needs torch and deepspeed ({e}); pip install deepspeed")

    rows, cols = 1536, 8960
    sizes = [rows * cols] * (n // (rows * cols))
    if n % (rows * cols):
        sizes.append(n % (rows * cols))
    params = []
    for k in sizes:
        p = torch.nn.Parameter(torch.full((k,), 0.5, dtype=torch.float32))
        p.grad = (torch.arange(k, dtype=torch.float32) % 1000) * 1e-5 - 5e-3
        params.append(p)
    bf16 = [torch.empty(k, dtype=torch.bfloat16) for k in sizes]
    t_build = time.perf_counter()
    try:  # the constructor builds (JIT) or loads the op: needs a C++ compiler and ninja
        opt = DeepSpeedCPUAdam(params, lr=2e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        opt.step()  # allocates m and v
    except Exception as e:  # noqa: BLE001 - any build failure is reported the same way
        sys.exit(f"deepspeed_cpu_adam.py: DeepSpeed's CPU Adam op failed to build or run: {e}")
    t_build = time.perf_counter() - t_build

    def step():
        opt.step()

    def step_and_copy():
        opt.step()
        for p, b in zip(params, bf16):
            b.copy_(p.detach())

    threads = torch.get_num_threads()
    results = []
    for name, f in (("DeepSpeedCPUAdam step", step),
                    ("DeepSpeedCPUAdam step + bf16 copy", step_and_copy)):
        f()  # warm-up
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        sec = (time.perf_counter() - t0) / reps
        results.append({"impl": name, "threads": threads, "chunk": sizes[0], "params_per_s": n / sec})

    print(f"params {n}  tensors {len(sizes)} of up to {sizes[0]}  torch threads {threads}  "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}  first step {t_build:.1f} s")
    for r in results:
        print(f"{r['impl']:<36} {r['threads']:>7} {r['chunk']:>10} {r['params_per_s'] / 1e6:>12.1f} Mparams/s")
    print(json.dumps({"bench": "cpu_adamw", "params": n, "hardware_threads": os.cpu_count(),
                      "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

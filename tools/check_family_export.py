#!/usr/bin/env python3
"""Loads zerotune's exports of the family goldens in transformers and checks them (issue: model
families, property 4): no missing or unexpected keys, and the same fp32 logits as the golden
(tools/make_family_model_goldens.py) on every example, within 1e-5 relative.

The exports come from the C++ test FamilyGolden.ExportHasExactlyTransformersStateDictKeys
(export_hf_model: config.json written by model_config_to_json, model.safetensors), kept by
setting ZT_KEEP_FAMILY_EXPORTS:

  ZT_KEEP_FAMILY_EXPORTS=/tmp/exports build/tests/zt_test_model --gtest_filter='*Export*'
  /work/goldenv/bin/python tools/check_family_export.py /tmp/exports

Prints one line per case and exits 1 when any case fails (or none was found).
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDENS = os.path.join(ROOT, "tests", "data", "model")
REL_TOL = 1e-5


def check(case_dir, name):
    model, info = AutoModelForCausalLM.from_pretrained(
        case_dir, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    problems = [f"{k}: {v}" for k, v in info.items() if v and k in
                ("missing_keys", "unexpected_keys", "mismatched_keys")]
    gdir = os.path.join(GOLDENS, name)
    golden = json.load(open(os.path.join(gdir, "golden.json")))
    tensors = load_file(os.path.join(gdir, "golden.safetensors"))
    worst = 0.0
    with torch.no_grad():
        for i, ex in enumerate(golden["examples"]):
            logits = model(input_ids=torch.tensor([ex["input_ids"]])).logits[0].float()
            got = logits[ex["logit_rows"]]
            want = tensors[f"logits.{i}"]
            err = float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))
            worst = max(worst, err)
    if worst > REL_TOL:
        problems.append(f"logits differ: max rel {worst:.3g} > {REL_TOL}")
    arch = type(model).__name__
    print(f"{name}: {arch}, logits max rel err {worst:.3g}" +
          ("" if not problems else "  FAIL: " + "; ".join(problems)))
    return not problems


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    cases = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    if not cases:
        print(f"no exports in {root}")
        sys.exit(1)
    ok = all([check(os.path.join(root, c), c) for c in cases])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden files for zerotune's Hydra config-group composition (src/io/hydra_compose.cpp): for each
case directory under tests/data/io/hydra_compose/ (a primary config, its config-group directories
and an overrides.json naming the runs), Hydra's compose API composes each run and the result is
written to golden.json beside it.

Run with a venv holding Hydra 1.3.2:
  python3 -m venv /work/hydra-venv && /work/hydra-venv/bin/pip install hydra-core==1.3.2
  /work/hydra-venv/bin/python tools/make_hydra_goldens.py

overrides.json: {"runs": [{"name": N, "config": NAME (default "config"), "overrides": [...],
"error": "zerotune's error text"}]} ("error" is read by the C++ test only: the message zerotune
gives, where Hydra fails too, or "refused": a form zerotune refuses although Hydra composes it).
golden.json: {N: {"config": <OmegaConf.to_container(resolve=True)>} or {"error": "<Hydra's
exception type>: <message>"}} (the case directory written {dir}), with the same runs in the same
order.

The composition is Hydra's with version_base="1.3" and return_hydra_config=False, as
`@hydra.main(version_base="1.3")` gives the task function its config.
"""
import json
import os
import sys
import warnings

import hydra
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = os.path.join(ROOT, "tests", "data", "io", "hydra_compose")


def compose_run(case_dir, config_name, overrides):
    with initialize_config_dir(config_dir=case_dir, version_base="1.3"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the missing-_self_ warning
            cfg = compose(config_name=config_name, overrides=overrides,
                          return_hydra_config=False)
        return OmegaConf.to_container(cfg, resolve=True)


def main():
    if hydra.__version__ != "1.3.2":
        sys.exit(f"hydra-core 1.3.2 is needed, found {hydra.__version__}")
    for name in sorted(os.listdir(CASES)):
        case_dir = os.path.join(CASES, name)
        spec_path = os.path.join(case_dir, "overrides.json")
        if not os.path.isfile(spec_path):
            continue
        with open(spec_path) as f:
            spec = json.load(f)
        golden = {}
        for run in spec["runs"]:
            try:
                cfg = compose_run(case_dir, run.get("config", "config"), run["overrides"])
                golden[run["name"]] = {"config": cfg}
                outcome = "composed"
            except Exception as e:  # Hydra's errors are of several types; all are recorded
                cause = e.__cause__ if e.__cause__ is not None and not str(e) else e
                message = f"{type(cause).__name__}: {cause}".replace(case_dir, "{dir}")
                golden[run["name"]] = {"error": message}
                outcome = "error"
            print(f"{name}/{run['name']}: {outcome}")
        with open(os.path.join(case_dir, "golden.json"), "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Field lists of TRL's SFTConfig (with transformers' TrainingArguments under it) and of accelerate's
config file, for the schema test (tests/cli/test_config_schema.cpp).

No torch, nothing imported from the packages: the wheels are downloaded (`pip download --no-deps`)
into a temporary directory and the dataclass bodies are read with Python's `ast`:
  trl/trainer/sft_config.py        class SFTConfig(TrainingArguments | _BaseConfig)
  trl/trainer/base_config.py       class _BaseConfig(TrainingArguments)         (TRL >= 1.0)
  transformers/training_args.py    class TrainingArguments
  accelerate/commands/config/config_args.py   BaseConfig / ClusterConfig (top-level yaml keys)
  accelerate/commands/config/cluster.py       deepspeed_config["..."] keys the questionnaire writes

Writes tests/data/cli/trainer_fields.json:
  {"stacks": {"<label>": {"trl": v, "transformers": v}}, "fields": [{"field", "defined_in",
   "defaults": {"<label>": <default or null when absent>}}]}
and tests/data/cli/accelerate_fields.json: {"versions": [...], "top": [...], "deepspeed_config": [...]}.
A default is the Python literal when it is one, else the source text of the expression
(e.g. "<factory> lambda: ['tensorboard']").

Usage: tools/make_config_field_goldens.py [--wheels DIR] [--out tests/data/cli]
"""
import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import zipfile

# (label, trl version, transformers version): the users' pair and the current one.
STACKS = [
    ("users", "0.25.1", "4.57.1"),
    ("current", "1.16.0", "5.24.0"),
]
ACCELERATE = ["1.11.0", "1.15.0"]


def fetch(wheels, name, version):
    """Path of the wheel `name==version` in `wheels`, downloading it when absent."""
    prefix = f"{name}-{version}-"
    for f in os.listdir(wheels):
        if f.startswith(prefix) and f.endswith(".whl"):
            return os.path.join(wheels, f)
    subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", wheels,
                           f"{name}=={version}"])
    return fetch(wheels, name, version)


def read_member(wheel, member):
    with zipfile.ZipFile(wheel) as z:
        try:
            return z.read(member).decode()
        except KeyError:
            return None


def literal(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return ast.unparse(node)


def class_fields(source, cls):
    """{field: default} of dataclass `cls` in `source`, in declaration order, and its base names."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            out = {}
            for st in node.body:
                if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                    continue
                name = st.target.id
                if name.startswith("_"):
                    continue
                ann = ast.unparse(st.annotation)
                if ann.startswith("ClassVar"):
                    continue
                default = None
                v = st.value
                if isinstance(v, ast.Call) and ast.unparse(v.func) in ("field", "dataclasses.field"):
                    for kw in v.keywords:
                        if kw.arg == "default":
                            default = literal(kw.value)
                        elif kw.arg == "default_factory":
                            default = "<factory> " + ast.unparse(kw.value)
                elif v is not None:
                    default = literal(v)
                out[name] = default
            return out, [ast.unparse(b) for b in node.bases]
    raise SystemExit(f"class {cls} not found")


def sft_fields(trl_whl, tf_whl):
    """[(field, defined_in, default)] of SFTConfig: the subclass's own fields override its bases'."""
    ta, _ = class_fields(read_member(tf_whl, "transformers/training_args.py"), "TrainingArguments")
    merged = {k: ("TrainingArguments", v) for k, v in ta.items()}
    sft_src = read_member(trl_whl, "trl/trainer/sft_config.py")
    sft, bases = class_fields(sft_src, "SFTConfig")
    if "_BaseConfig" in bases:
        base, _ = class_fields(read_member(trl_whl, "trl/trainer/base_config.py"), "_BaseConfig")
        for k, v in base.items():
            merged[k] = ("TrainingArguments" if k in ta else "SFTConfig", v)
    for k, v in sft.items():
        merged[k] = ("TrainingArguments" if k in ta else "SFTConfig", v)
    return merged


def accelerate_fields(whl):
    src = read_member(whl, "accelerate/commands/config/config_args.py")
    top = []
    for cls in ("BaseConfig", "ClusterConfig"):
        f, _ = class_fields(src, cls)
        top += [k for k in f if k not in top]
    ds = set()
    cluster = read_member(whl, "accelerate/commands/config/cluster.py")
    for node in ast.walk(ast.parse(cluster)):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id == "deepspeed_config" and isinstance(node.slice, ast.Constant)):
            ds.add(node.slice.value)
    return top, sorted(ds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheels", help="directory of (or for) the downloaded wheels")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "cli"))
    args = ap.parse_args()
    wheels = args.wheels or tempfile.mkdtemp(prefix="zt_wheels_")
    os.makedirs(wheels, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)

    per_stack = {}
    order = []
    for label, trl_v, tf_v in STACKS:
        f = sft_fields(fetch(wheels, "trl", trl_v), fetch(wheels, "transformers", tf_v))
        per_stack[label] = f
        order += [k for k in f if k not in order]
    fields = []
    for k in order:
        defined = next(per_stack[s][k][0] for s, _, _ in STACKS if k in per_stack[s])
        fields.append({"field": k, "defined_in": defined,
                       "defaults": {s: (per_stack[s][k][1] if k in per_stack[s] else None) for s, _, _ in STACKS},
                       "in": [s for s, _, _ in STACKS if k in per_stack[s]]})
    doc = {"stacks": {s: {"trl": t, "transformers": tf} for s, t, tf in STACKS}, "fields": fields}
    with open(os.path.join(args.out, "trainer_fields.json"), "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
        fh.write("\n")

    top, ds = [], []
    for v in ACCELERATE:
        t, d = accelerate_fields(fetch(wheels, "accelerate", v))
        top += [k for k in t if k not in top]
        ds += [k for k in d if k not in ds]
    with open(os.path.join(args.out, "accelerate_fields.json"), "w") as fh:
        json.dump({"versions": ACCELERATE, "top": top, "deepspeed_config": sorted(ds)}, fh, indent=1)
        fh.write("\n")
    print(f"{len(fields)} SFTConfig fields, {len(top)} accelerate keys, {len(ds)} deepspeed_config keys")


if __name__ == "__main__":
    main()

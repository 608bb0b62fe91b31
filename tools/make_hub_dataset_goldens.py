#!/usr/bin/env python3
"""Golden file for zerotune's hub-dataset resolution (tests/io/test_dataset_card.cpp): which files
HF `datasets` reads for each split of a dataset snapshot directory, with and without a dataset
card's `configs`, as `datasets.load_dataset(<snapshot dir>, split=SPLIT)` does.

Run with the reference env:  /work/venv-trl/bin/python tools/make_hub_dataset_goldens.py
Output: tests/data/io/hub_dataset_layouts.json — a list of cases, each
  {"name", "files": [{"path", "rows"}], "readme" (README.md text or null),
   "huggingface_yaml" (.huggingface.yaml text or null),
   "splits": {SPLIT: {"files": [relative paths datasets reads, in order], "rows": N}
                     or {"error": "ExceptionType", "message": first line of its message}}}
Data files are JSON Lines (or parquet for .parquet names) of ROWS rows {"text": "<path> <i>"}:
a different row count per file, so "rows" shows which file was read.
"""
import json
import os
import sys
import tempfile

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "io",
                   "hub_dataset_layouts.json")

SPLITS = ["train", "validation", "test"]


def card(yaml_text):
    return "---\n" + yaml_text + "---\n# A dataset\n\nSome text.\n"


# (name, {path: rows}, README text or None, .huggingface.yaml text or None, extra splits to ask)
CASES = [
    # The tester's repro: configs' data_files names another file than the sharded name would.
    ("configs_list_of_split_path",
     {"data/train-00000-of-00001.parquet": 7, "mydata/sft.parquet": 5},
     card("configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: mydata/sft.parquet\n"),
     None, []),
    # Two subsets, one marked default: only its files.
    ("two_subsets_default_true",
     {"en/train-00000-of-00001.jsonl": 3, "en/test-00000-of-00001.jsonl": 2,
      "fr/train-00000-of-00001.jsonl": 4, "fr/test-00000-of-00001.jsonl": 6},
     card("configs:\n- config_name: fr\n  data_files:\n  - split: train\n    path: fr/train-*\n"
          "  - split: test\n    path: fr/test-*\n"
          "- config_name: en\n  default: true\n  data_files:\n  - split: train\n    path: en/train-*\n"
          "  - split: test\n    path: en/test-*\n"),
     None, []),
    # Two subsets, none default: an error (config name missing).
    ("two_subsets_no_default",
     {"en/train.jsonl": 3, "fr/train.jsonl": 4},
     card("configs:\n- config_name: en\n  data_files: en/train.jsonl\n"
          "- config_name: fr\n  data_files: fr/train.jsonl\n"),
     None, []),
    # A config named "default" among others is the default.
    ("config_named_default",
     {"a/x.jsonl": 3, "b/y.jsonl": 4},
     card("configs:\n- config_name: other\n  data_files: a/x.jsonl\n"
          "- config_name: default\n  data_files: b/y.jsonl\n"),
     None, []),
    # Two defaults: an error.
    ("two_defaults",
     {"a/x.jsonl": 3, "b/y.jsonl": 4},
     card("configs:\n- config_name: default\n  data_files: a/x.jsonl\n"
          "- config_name: b\n  default: true\n  data_files: b/y.jsonl\n"),
     None, []),
    # data_files a string: split "train" only.
    ("data_files_string",
     {"stuff/all.jsonl": 9, "train.jsonl": 2},
     card("configs:\n- config_name: default\n  data_files: stuff/all.jsonl\n"), None, []),
    # data_files a list of strings: all "train".
    ("data_files_list_of_strings",
     {"part0/a.jsonl": 3, "part1/b.jsonl": 4, "test.jsonl": 2},
     card("configs:\n- config_name: default\n  data_files:\n  - part0/*.jsonl\n  - part1/*.jsonl\n"), None, []),
    # path a list; a glob with a class and '**'.
    ("path_list_and_globs",
     {"d/train/p1/x.jsonl": 3, "d/train/p2/deep/y.jsonl": 4, "d/test/z.jsonl": 5, "d/val1.jsonl": 6,
      "d/val2.jsonl": 8},
     card("configs:\n- config_name: default\n  data_files:\n  - split: train\n    path:\n    - d/train/p1/*.jsonl\n"
          "  - split: test\n    path: d/**/z.jsonl\n  - split: validation\n    path: d/val[1].jsonl\n"),
     None, []),
    # data_dir with data_files: patterns are relative to data_dir.
    ("data_dir_with_data_files",
     {"sub/train.jsonl": 3, "train.jsonl": 4, "sub/extra/train.jsonl": 6},
     card("configs:\n- config_name: default\n  data_dir: sub\n  data_files:\n  - split: train\n    path: train.jsonl\n"),
     None, []),
    # data_dir without data_files: the file-name rules inside data_dir.
    ("data_dir_only",
     {"v2/data/train-00000-of-00001.jsonl": 3, "v2/data/test-00000-of-00001.jsonl": 2,
      "data/train-00000-of-00001.jsonl": 5},
     card("configs:\n- config_name: default\n  data_dir: v2\n"), None, []),
    # No configs: sharded names; a custom split name.
    ("no_configs_sharded_custom_split",
     {"data/train-00000-of-00001.jsonl": 3, "data/sft_extra-00000-of-00001.jsonl": 4, "test.jsonl": 5},
     card("license: mit\n"), None, ["sft_extra"]),
    # No configs: directory names before file names.
    ("no_configs_dir_names",
     {"x/train/a.jsonl": 3, "x/test/b.jsonl": 4, "validation.jsonl": 6},
     None, None, []),
    # No configs: keywords in file names.
    ("no_configs_file_keywords",
     {"sft_training.jsonl": 3, "my-dev.jsonl": 4, "evaluation_set.jsonl": 5},
     None, None, []),
    # No configs, one file without a split name: "train".
    ("no_configs_one_file",
     {"all.jsonl": 3}, "No front matter here.\n", None, []),
    # Hidden files and README.md are not data.
    ("hidden_and_ignored",
     {".hidden/train.jsonl": 3, "data.jsonl": 4, "__pycache__/train.jsonl": 5},
     None, None, []),
    # A plain path that does not exist: an error (a glob matching nothing is skipped).
    ("missing_plain_path",
     {"train.jsonl": 3},
     card("configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: nope/train.jsonl\n"),
     None, []),
    # .huggingface.yaml overrides README's configs.
    ("huggingface_yaml_overrides",
     {"a.jsonl": 3, "b.jsonl": 4},
     card("configs:\n- config_name: default\n  data_files: a.jsonl\n"),
     "configs:\n- config_name: default\n  data_files: b.jsonl\n", []),
    # The only config of dataset_info is the default when configs names none.
    ("dataset_info_names_default",
     {"a.jsonl": 3, "b.jsonl": 4},
     card("configs:\n- config_name: alpha\n  data_files: a.jsonl\n- config_name: beta\n  data_files: b.jsonl\n"
          "dataset_info:\n  config_name: beta\n  splits:\n  - name: train\n    num_examples: 4\n"),
     None, []),
    # default: a truthy non-bool.
    ("default_yes",
     {"a.jsonl": 3, "b.jsonl": 4},
     card("configs:\n- config_name: alpha\n  data_files: a.jsonl\n- config_name: beta\n  default: yes\n"
          "  data_files: b.jsonl\n"),
     None, []),
    # Malformed: data_files a mapping.
    ("data_files_mapping",
     {"a.jsonl": 3},
     card("configs:\n- config_name: default\n  data_files:\n    train: a.jsonl\n"), None, []),
    # Malformed: a config without config_name.
    ("config_without_name",
     {"a.jsonl": 3},
     card("configs:\n- data_files: a.jsonl\n"), None, []),
    # Malformed: a split name with '-'.
    ("split_name_with_dash",
     {"a.jsonl": 3},
     card("configs:\n- config_name: default\n  data_files:\n  - split: my-train\n    path: a.jsonl\n"), None,
     ["my-train"]),
    # '**' inside a component: fsspec refuses the pattern.
    ("double_star_in_component",
     {"a/b.jsonl": 3},
     card("configs:\n- config_name: default\n  data_files: '**.jsonl'\n"), None, []),
    # A hidden directory named by the pattern is read; '?' and a negated class.
    ("hidden_requested_and_classes",
     {".hidden/train.jsonl": 3, "c1.jsonl": 4, "cx.jsonl": 5},
     card("configs:\n- config_name: default\n  data_files:\n  - split: train\n    path: .hidden/*\n"
          "  - split: test\n    path: c?.jsonl\n  - split: validation\n    path: c[!0-9].jsonl\n"), None, []),
    # Front matter after leading blank lines, CRLF line ends.
    ("leading_blank_lines_crlf",
     {"a.jsonl": 3, "train.jsonl": 4},
     "\r\n\r\n---\r\nconfigs:\r\n- config_name: default\r\n  data_files: a.jsonl\r\n---\r\ntext\r\n", None, []),
]


def write(path, rows, name):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    texts = [f"{name} {i}" for i in range(rows)]
    if path.endswith(".parquet"):
        pq.write_table(pa.table({"text": texts}), path)
    else:
        with open(path, "w") as f:
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")


def run_case(root, name, files, readme, hf_yaml, extra_splits):
    snap = os.path.join(root, name)
    os.makedirs(snap)
    for rel, rows in files.items():
        write(os.path.join(snap, rel), rows, rel)
    if readme is not None:
        with open(os.path.join(snap, "README.md"), "w", newline="") as f:
            f.write(readme)
    if hf_yaml is not None:
        with open(os.path.join(snap, ".huggingface.yaml"), "w") as f:
            f.write(hf_yaml)
    results = {}
    cache = os.path.join(root, "_cache_" + name)
    for split in SPLITS + extra_splits:
        try:
            builder = datasets.load_dataset_builder(snap, cache_dir=cache)
            ds = datasets.load_dataset(snap, split=split, cache_dir=cache)
            read = [os.path.relpath(p, snap) for p in builder.config.data_files[split]]
            results[split] = {"files": read, "rows": len(ds)}
        except Exception as e:  # the golden records which error `datasets` raises
            msg = str(e).strip().splitlines()
            results[split] = {"error": type(e).__name__,
                              "message": (msg[0] if msg else "").replace(snap, "<snapshot>")}
    return {"name": name, "files": [{"path": p, "rows": r} for p, r in files.items()], "readme": readme,
            "huggingface_yaml": hf_yaml, "splits": results}


def main():
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    out = []
    with tempfile.TemporaryDirectory() as root:
        for case in CASES:
            out.append(run_case(root, *case))
    with open(OUT, "w") as f:
        json.dump({"datasets_version": datasets.__version__, "cases": out}, f, indent=1)
        f.write("\n")
    for c in out:
        print(c["name"], json.dumps(c["splits"])[:300], file=sys.stderr)


if __name__ == "__main__":
    main()

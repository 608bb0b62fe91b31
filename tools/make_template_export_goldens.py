#!/usr/bin/env python3
"""Makes tests/data/chat_template/export_layouts.golden.json: what transformers' tokenizer
`save_pretrained` (which TRL's `SFTTrainer.save_model` calls) writes for each layout of chat
templates in a tokenizer directory, and which template `get_chat_template` picks after loading it.

Run with transformers 4.57.1 (the users' version; torch not needed):
    /work/venv-trl/bin/python tools/make_template_export_goldens.py

Each layout is the Qwen2.5-Instruct tokenizer of configs/tokenizers/qwen2.5-instruct with its
tokenizer_config.json's "chat_template" replaced (or removed) and template files written beside it:
  - one template in tokenizer_config.json,
  - chat_template.jinja,
  - a list of named templates in tokenizer_config.json ({"name", "template"}),
  - chat_template.jinja + additional_chat_templates/tool_use.jinja (transformers >= 4.54's format),
  - and their mixtures and no-default variants.
Each is loaded with AutoTokenizer and saved with save_pretrained into an empty directory. Recorded
per layout: the input ("config_chat_template": the tokenizer_config.json value, absent = removed;
"files": template files by relative path), the saved file set (every path, sorted), the saved
tokenizer_config.json's "chat_template" (absent when it has none), the contents of the saved
chat_template.jinja and additional_chat_templates/*.jinja, and what get_chat_template() returns
without and with tools (or the ValueError's text).
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

import transformers
from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / "configs" / "tokenizers" / "qwen2.5-instruct"
OUT = ROOT / "tests" / "data" / "chat_template" / "export_layouts.golden.json"

DEFAULT = "D{% for m in messages %}{{ m.content }}{% endfor %}"
TOOL = "T{{ messages[0].content }}{{ tools | length }}"
OTHER = "O{{ messages | length }}\n"
NAMED = [{"name": "default", "template": "ND{{ messages[0].content }}"},
         {"name": "tool_use", "template": "NT{{ tools | length }}"}]
NAMED_NO_DEFAULT = [{"name": "rag", "template": "NR{{ messages[0].content }}"},
                    {"name": "tool_use", "template": "NT{{ tools | length }}"}]
ABSENT = "<absent>"

LAYOUTS = [
    # (name, tokenizer_config.json's chat_template (ABSENT: removed), template files)
    ("config_string", DEFAULT, {}),
    ("jinja", ABSENT, {"chat_template.jinja": DEFAULT}),
    ("config_named", NAMED, {}),
    ("jinja_additional", ABSENT,
     {"chat_template.jinja": DEFAULT, "additional_chat_templates/tool_use.jinja": TOOL}),
    ("jinja_two_additional", ABSENT,
     {"chat_template.jinja": DEFAULT, "additional_chat_templates/tool_use.jinja": TOOL,
      "additional_chat_templates/other.jinja": OTHER}),
    ("additional_only", ABSENT, {"additional_chat_templates/tool_use.jinja": TOOL}),
    ("config_named_no_default", NAMED_NO_DEFAULT, {}),
    ("config_string_and_jinja", OTHER, {"chat_template.jinja": DEFAULT}),
    ("config_named_and_jinja", NAMED, {"chat_template.jinja": DEFAULT}),
    ("config_named_and_additional", NAMED, {"additional_chat_templates/tool_use.jinja": TOOL}),
    ("none", ABSENT, {}),
]


def picked(tok, tools):
    try:
        return {"template": tok.get_chat_template(tools=tools)}
    except ValueError as e:
        return {"error": str(e)}


def main():
    base = json.loads((TOKENIZER / "tokenizer_config.json").read_text())
    out = {"transformers": transformers.__version__, "layouts": []}
    for name, config_template, files in LAYOUTS:
        with tempfile.TemporaryDirectory() as src, tempfile.TemporaryDirectory() as dst:
            src, dst = Path(src), Path(dst)
            shutil.copy(TOKENIZER / "tokenizer.json", src / "tokenizer.json")
            cfg = dict(base)
            cfg.pop("chat_template", None)
            if config_template != ABSENT:
                cfg["chat_template"] = config_template
            (src / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
            for rel, text in files.items():
                (src / rel).parent.mkdir(parents=True, exist_ok=True)
                (src / rel).write_text(text)
            tok = AutoTokenizer.from_pretrained(str(src))
            tok.save_pretrained(str(dst))
            saved = sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file())
            saved_cfg = json.loads((dst / "tokenizer_config.json").read_text())
            templates = {rel: (dst / rel).read_text() for rel in saved
                         if rel == "chat_template.jinja" or rel.startswith("additional_chat_templates/")}
            entry = {"name": name, "files": files, "saved_files": saved, "saved_templates": templates,
                     "picked": picked(tok, None), "picked_with_tools": picked(tok, [{"type": "function"}])}
            if config_template != ABSENT:
                entry["config_chat_template"] = config_template
            if "chat_template" in saved_cfg:
                entry["saved_config_chat_template"] = saved_cfg["chat_template"]
            out["layouts"].append(entry)
    OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()

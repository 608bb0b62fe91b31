#!/usr/bin/env python3
"""TRL 1.16's SFT preprocessing of every model family's chat template and tokenizer
(tests/data/sft/fam_<family>_<case>.golden.json), after tools/make_family_tokenizers.py:

    /work/goldenv/bin/python tools/make_family_sft_goldens.py [--shared ../shared/data]

Each family's tokenizer directory is its tokenizer.json (tests/data/families/<tokenizer>/, or the
shared Qwen3 one) with tests/data/families/chat/<family>/tokenizer_config.json and
chat_template.jinja (tools/family_chat_cases.py says which tokenizer stands in for which family and
where each template comes from). Cases, on the first 8 rows of each shared dataset:
  messages                no_robots messages (conversational language modelling)
  conv_pc                 no_robots as prompt = messages[:-1], completion = messages[-1:]
  plain_pc                ultrafeedback sft.parquet, plain prompt/completion (BOS + EOS handling)
  messages_assistant_only assistant_only_loss with the family's {% generation %} template
The golden format is tools/make_sft_goldens.py's (golden_case). strftime_now is pinned to
26 Jul 2024 (zerotune's test sets SOURCE_DATE_EPOCH=1721952000).
"""
import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import family_chat_cases as fcc  # noqa: E402
import make_sft_goldens as msg  # noqa: E402

FAMILY_TOKENIZERS = os.path.join(HERE, "..", "tests", "data", "families")


def tokenizer_dir(family, spec, shared):
    if spec["tokenizer"] == "qwen3":
        return os.path.join(shared, "tokenizers", "qwen3")
    d = tempfile.mkdtemp()
    shutil.copy(os.path.join(FAMILY_TOKENIZERS, spec["tokenizer"], "tokenizer.json"), d)
    chat = fcc.chat_dir(family)
    for f in ("tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(chat, f), d)
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--only", default=None, help="comma-separated family names")
    a = ap.parse_args()
    assert not msg.POSITIONAL, "run with TRL >= 1.10 (the common-prefix completion mask)"
    fcc.pin_strftime_now()
    only = set(a.only.split(",")) if a.only else None
    for family, spec in fcc.families().items():
        if only and family not in only:
            continue
        tok = tokenizer_dir(family, spec, a.shared)
        for case in spec["cases"]:
            rows = fcc.rows(case, a.shared)
            name = f"fam_{family}_{case}"
            desc = (f"{family}: {case} on the first {fcc.ROWS} rows, tokenizer {spec['tokenizer']}")
            if case == "messages_assistant_only":
                training = os.path.join(fcc.chat_dir(family), "training.jinja")
                cfg = {"assistant_only_loss": True}
                opts = {"assistant_only_loss": True}
                if os.path.exists(training):
                    cfg["chat_template_path"] = training
                    opts["chat_template"] = "training.jinja"
                msg.golden_case(name, desc, tok, rows, opts, **cfg)
            else:
                msg.golden_case(name, desc, tok, rows, {})


if __name__ == "__main__":
    main()

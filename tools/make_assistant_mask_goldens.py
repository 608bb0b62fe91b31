#!/usr/bin/env python3
"""Makes the assistant-mask goldens (tests/data/sft/assistant_mask.<rule>.golden.json).

transformers' `tokenizer.apply_chat_template(messages, return_dict=True,
return_assistant_tokens_mask=True)` — what TRL's SFTTrainer calls for `assistant_only_loss` — finds
the tokens of each `{% generation %}` span by one of two rules, and the golden records the ids and
`assistant_masks` it returns for a few conversations:

    /work/venv-trl/bin/python tools/make_assistant_mask_goldens.py   # transformers 4.57.1 (TRL
        # 0.25.1, the users'): assistant_mask.char_to_token.golden.json — per span,
        # char_to_token(first char) .. char_to_token(last char), each the first token holding it
    PY5/bin/python tools/make_assistant_mask_goldens.py   # transformers >= 5.24 (TRL 1.16's):
        # assistant_mask.overlap.golden.json — every token overlapping a span
        # (PY5: a venv with `pip install "transformers>=5.24" jinja2`, no torch needed)
[--shared ../shared/data]

The cases: a reply whose last character is split into several byte tokens ("ok 𝜉", "ok🪩"; the
tester's template ends the span on the content), a span ending on a special token, two spans in
one conversation, a span whose last token is token 0 (4.57.1 marks to the end), a first span
rendered before anything else (4.57.1's tracker does not record it), generation blocks inside a
macro (recorded at the top-level output's end, in characters, with multi-byte text), and, with the
Qwen2.5 tokenizer's ByteLevel post-processor set to trim_offsets: true (tokenizer "qwen2.5_trim"),
spans whose last or first character is a space the trimming cuts from its token (4.57.1:
char_to_token None — to the end, or no span marked from there on).
"""
import argparse
import json
import os
import tempfile

import transformers
from packaging.version import Version
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "sft")
RULE = "overlap" if Version(transformers.__version__) >= Version("5.24") else "char_to_token"

# The tester's template (attackB repro): the span is the message content alone.
END_CONTENT = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}{% generation %}{{ message.content }}{% endgeneration %}"
    "{{ '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}"
)
# The span ends on the special token <|im_end|>.
END_SPECIAL = END_CONTENT.replace(
    "{% generation %}{{ message.content }}{% endgeneration %}{{ '<|im_end|>\\n' }}",
    "{% generation %}{{ message.content + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}")
# The assistant speaks first: its span is token 0. `{{ bos_token }}` (empty for Qwen2.5) renders
# a block before it, so transformers' tracker records the span.
FIRST = "{{ bos_token }}" + END_CONTENT.replace("{{- '<|im_start|>assistant\\n' }}", "")
# FIRST without `{{ bos_token }}`: nothing is rendered before the first span, which transformers
# 4.57's tracker then does not record (5.24's does).
FIRST_BARE = FIRST.replace("{{ bos_token }}", "")
# A macro renders the whole conversation: every span is recorded while the macro's output is
# buffered, before the template outputs anything, so transformers 4.57 records none of them.
MACRO_ALL = ("{%- macro render(ms) %}" + END_CONTENT + "{%- endmacro %}{{- render(messages) }}")
# A macro renders each turn: a generation block inside it is recorded at the top-level output's
# end in characters, covering the block's character count from there (the macro's own output
# before the block is not yet top-level), so multi-byte text before or in the block moves the span
# by characters, not bytes.
MACRO_TURN = ("{%- macro turn(m) %}{{- '<|im_start|>' + m.role + '\\n' }}"
              "{%- if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}"
              "{%- else %}{{- m.content }}{%- endif %}{{- '<|im_end|>\\n' }}{%- endmacro %}"
              "{%- for m in messages %}{{- turn(m) }}{%- endfor %}")
# Spans ending or starting on a space, which trim_offsets cuts from its token's offsets (a lone " "
# token is left empty; "Ġok" keeps "ok"), so no token holds it.
END_SPACE = END_CONTENT.replace("{{ message.content }}", "{{ message.content + ' ' }}")
START_SPACE = END_CONTENT.replace("{{ message.content }}", "{{ ' ' + message.content }}")


def conv(*turns):
    return [{"role": role, "content": content} for role, content in turns]


CASES = [
    ("split_last_char", "qwen2.5", END_CONTENT, conv(("user", "hi"), ("assistant", "ok 𝜉"))),
    ("split_last_emoji", "qwen2.5", END_CONTENT, conv(("user", "hi"), ("assistant", "ok\U0001faa9"))),
    ("whole_last_char", "qwen2.5", END_CONTENT, conv(("user", "hi"), ("assistant", "ok"))),
    ("ends_on_special_token", "qwen2.5", END_SPECIAL, conv(("user", "hi"), ("assistant", "ok 𝜉"))),
    ("two_spans", "qwen2.5", END_CONTENT,
     conv(("user", "hi"), ("assistant", "ok 𝜉"), ("user", "more"), ("assistant", "fine\U0001faa9"))),
    ("two_spans_special", "qwen2.5", END_SPECIAL,
     conv(("user", "hi"), ("assistant", "ok 𝜉"), ("user", "more"), ("assistant", "fine"))),
    ("span_is_token_0", "qwen2.5", FIRST, conv(("assistant", "A"), ("user", "hi"))),
    ("first_block_before_output", "qwen2.5", FIRST_BARE,
     conv(("assistant", "Hello there"), ("user", "hi"), ("assistant", "ok"))),
    ("macro_renders_all", "qwen2.5", MACRO_ALL,
     conv(("user", "hi"), ("assistant", "ok"), ("user", "more"), ("assistant", "fine"))),
    ("ends_on_trimmed_space", "qwen2.5_trim", END_SPACE,
     conv(("user", "hi"), ("assistant", "ok"), ("user", "more"), ("assistant", "fine"))),
    ("starts_on_trimmed_space", "qwen2.5_trim", START_SPACE,
     conv(("user", "hi"), ("assistant", "ok"), ("user", "more"), ("assistant", "fine"))),
    ("split_last_char_trim", "qwen2.5_trim", END_CONTENT,
     conv(("user", "hi"), ("assistant", "ok 𝜉"), ("user", "more"), ("assistant", "fine"))),
    ("macro_per_turn_multibyte", "qwen2.5", MACRO_TURN,
     conv(("user", "héllo wörld 你好"), ("assistant", "好的, ok 𝜉"), ("user", "more ü"),
          ("assistant", "fine 🪩 done"))),
]


def tokenizers(shared, tmp):
    """The Qwen2.5 tokenizer, and the same with trim_offsets: true in its ByteLevel post-processor
    (tests/data_layer/test_assistant_mask.cpp builds the same files)."""
    src = os.path.join(shared, "tokenizers", "qwen2.5-instruct")
    trim = os.path.join(tmp, "qwen2.5_trim")
    os.makedirs(trim)
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    assert tj["post_processor"]["type"] == "ByteLevel"
    tj["post_processor"]["trim_offsets"] = True
    with open(os.path.join(trim, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    with open(os.path.join(trim, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False)
    return {"qwen2.5": AutoTokenizer.from_pretrained(src), "qwen2.5_trim": AutoTokenizer.from_pretrained(trim)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        toks = tokenizers(args.shared, tmp)
        cases = []
        for name, tok_name, template, messages in CASES:
            tok = toks[tok_name]
            out = tok.apply_chat_template(messages, chat_template=template, tokenize=True,
                                          return_dict=True, return_assistant_tokens_mask=True)
            text = tok.apply_chat_template(messages, chat_template=template, tokenize=False)
            cases.append({
                "name": name, "tokenizer": tok_name, "template": template, "messages": messages,
                "text": text, "ids": list(out["input_ids"]),
                "assistant_masks": [int(m) for m in out["assistant_masks"]],
                "offsets": [list(o) for o in out.encodings[0].offsets],  # characters
            })
            print(name, cases[-1]["assistant_masks"])
    golden = {"transformers": transformers.__version__, "rule": RULE, "cases": cases}
    path = os.path.join(OUT, f"assistant_mask.{RULE}.golden.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Goldens of message shapes TRL 0.25.1 passes to the chat template as they are
(tests/data/sft/shapes/<case>.jsonl and <case>.golden.json), and of `zerotune render` on rows with
nulls nested in tools / tool-call arguments (tests/data/chat_template/render_nulls_*.jsonl).

Run with TRL 0.25.1 (transformers 4.57, datasets 4.x, CPU torch), after
tools/make_family_tokenizers.py:
    python tools/make_message_shape_goldens.py [--shared ../shared/data]

TRL's `SFTTrainer._prepare_dataset` checks nothing of a message but what `is_conversational` reads
(the first message's "role" and "content" keys): every message goes to the chat template as it is.
So a `content` that is a list of parts ([{"type": "text", "text": …}]) is rendered as the template
renders it (Gemma 3 joins the text parts; Llama 3.2's `| trim` prints the Python repr of the list;
Qwen2.5 concatenates it to a string and raises TypeError), any role is passed (Llama 3.2 prints it,
Qwen2.5 skips it), and a later message without content is rendered without one. A row whose first
message has no content (absent or null: `remove_none_values` drops a null) is not read as a
conversation and TRL fails on it (KeyError 'text').

Each case is a JSONL file loaded by `datasets.load_dataset("json")` (as the users' script loads
it) and the real `trl.SFTTrainer` over it (a tiny random Qwen2 model on the CPU). The golden holds
per example the source row, the ids and the target flags (1 where TRL's label is the token:
completion mask and assistant mask, as its collator builds labels), or TRL's error
("trl_error": "ExceptionType: message") when TRL fails on the file. Tokenizers: the family
tokenizers of tools/make_family_sft_goldens.py (Gemma 3, Llama 3.2) and the shared Qwen2.5-Instruct
one; strftime_now is pinned to 26 Jul 2024 (SOURCE_DATE_EPOCH=1721952000 in zerotune's test).
"""
import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import datasets  # noqa: E402
import family_chat_cases as fcc  # noqa: E402
import make_family_sft_goldens as mfs  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402
from make_sft_goldens import tiny_model  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from trl import SFTConfig, SFTTrainer  # noqa: E402
from trl.trainer.utils import remove_none_values  # noqa: E402

datasets.disable_progress_bars()
datasets.logging.set_verbosity_error()

OUT = os.path.join(HERE, "..", "tests", "data", "sft", "shapes")
RENDER_OUT = os.path.join(HERE, "..", "tests", "data", "chat_template")


def parts(*texts):
    return [{"type": "text", "text": t} for t in texts]


def msg(role, content):
    return {"role": role, "content": content}


# case -> (tokenizer, description, rows, SFTConfig kwargs, zerotune options)
def cases():
    gemma_training = os.path.join(fcc.chat_dir("gemma3"), "training.jinja")
    parts_rows = [
        {"messages": [msg("user", parts("Hi")), msg("assistant", parts("Hello"))]},
        {"messages": [msg("system", parts("Be brief.")), msg("user", parts("What is ", "2+2?")),
                      msg("assistant", parts("4"))]},
        {"messages": [msg("user", parts("One")), msg("assistant", parts("Two", " three")),
                      msg("user", parts("Four")), msg("assistant", parts("Five"))]},
    ]
    return {
        "gemma3_parts_messages": (
            "gemma3", "messages whose content is a list of text parts (Gemma 3 joins them)",
            parts_rows, {}, {}),
        "gemma3_parts_assistant_only": (
            "gemma3", "the same rows with assistant_only_loss and Gemma 3's training template",
            parts_rows, {"assistant_only_loss": True, "chat_template_path": gemma_training},
            {"assistant_only_loss": True, "chat_template": "training.jinja"}),
        "gemma3_parts_conv_pc": (
            "gemma3", "conversational prompt/completion with content parts (completion-only loss)",
            [{"prompt": [msg("system", parts("Be brief.")), msg("user", parts("Hi"))],
              "completion": [msg("assistant", parts("Hello", " there"))]},
             {"prompt": [msg("user", parts("Q"))], "completion": [msg("assistant", parts("A"))]}],
            {}, {}),
        "gemma3_parts_sharegpt": (
            "gemma3", "ShareGPT conversations whose values are lists of text parts",
            [{"conversations": [{"from": "system", "value": parts("Be brief.")},
                                {"from": "user", "value": parts("Hi")},
                                {"from": "assistant", "value": parts("Hello")}]},
             {"conversations": [{"from": "user", "value": parts("Q", "?")},
                                {"from": "assistant", "value": parts("A")}]}],
            {}, {}),
        "llama3_2_roles": (
            "llama3_2", "any role is rendered (narrator, developer), a list content is printed as "
            "its Python repr by `| trim`, a later message without content renders empty",
            [{"messages": [msg("user", "Hi"), msg("narrator", "(aside)"), msg("assistant", "Hello")]},
             {"messages": [msg("developer", "Be terse."), msg("user", "Q"), msg("assistant", "A")]},
             {"messages": [msg("user", parts("Hi")), msg("assistant", parts("Hello"))]},
             {"messages": [msg("user", "Hi"), {"role": "assistant"}, msg("user", "x"),
                           msg("assistant", "y")]}],
            {}, {}),
        "llama3_2_sharegpt_roles": (
            "llama3_2", "ShareGPT conversations with a `from` value that is no known role",
            [{"conversations": [{"from": "user", "value": "Hi"}, {"from": "narrator", "value": "(aside)"},
                                {"from": "assistant", "value": "Hello"}]}],
            {}, {}),
        "qwen_parts_template_error": (
            "qwen2.5-instruct", "Qwen2.5's template concatenates content to a string: a list fails "
            "(row 1)",
            [{"messages": [msg("user", "Hi"), msg("assistant", "Hello")]},
             {"messages": [msg("user", parts("Hi")), msg("assistant", "Hello")]}],
            {}, {}),
        "qwen_missing_content_template_error": (
            "qwen2.5-instruct", "a later message without content: Qwen2.5's template reads it (row 1)",
            [{"messages": [msg("user", "Hi"), msg("assistant", "Hello")]},
             {"messages": [msg("user", "Hi"), {"role": "assistant"}, msg("user", "x"),
                           msg("assistant", "y")]}],
            {}, {}),
        "qwen_first_message_null_content": (
            "qwen2.5-instruct", "row 1's first message has a null content: TRL fails",
            [{"messages": [msg("user", "Hi"), msg("assistant", "Hello")]},
             {"messages": [msg("user", None), msg("assistant", "Hello")]}],
            {}, {}),
    }


def tokenizer_dir(name, shared):
    if name == "qwen2.5-instruct":
        return os.path.join(shared, "tokenizers", "qwen2.5-instruct")
    return mfs.tokenizer_dir(name, fcc.families()[name], shared)


def run_case(name, tok_name, desc, rows, cfg, zt_options, shared):
    path = os.path.join(OUT, f"{name}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    tok = AutoTokenizer.from_pretrained(tokenizer_dir(tok_name, shared))
    g = {"case": name, "description": desc, "trl": trl.__version__,
         "transformers": transformers.__version__, "datasets": datasets.__version__,
         "tokenizer": tok_name, "options": zt_options}
    ds = datasets.load_dataset("json", data_files=path, split="train", cache_dir=tempfile.mkdtemp())
    args = SFTConfig(output_dir=tempfile.mkdtemp(), report_to=[], bf16=False, use_cpu=True,
                     max_length=None, **cfg)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            out = SFTTrainer(model=tiny_model(), args=args, train_dataset=ds,
                             processing_class=tok).train_dataset
    except Exception as e:  # noqa: BLE001 — the golden records TRL's failure
        g["trl_error"] = f"{type(e).__name__}: {e}"
    else:
        g["examples"] = []
        completion_only = "prompt" in rows[0] if args.completion_only_loss is None else args.completion_only_loss
        for r, ex in enumerate(out):
            tg = [1] * len(ex["input_ids"])
            if completion_only and "completion_mask" in ex:
                tg = [a & b for a, b in zip(tg, ex["completion_mask"])]
            if "assistant_masks" in ex:
                tg = [a & b for a, b in zip(tg, ex["assistant_masks"])]
            g["examples"].append({"row": r, "ids": ex["input_ids"], "targets": tg})
    with open(os.path.join(OUT, f"{name}.golden.json"), "w", encoding="utf-8") as f:
        json.dump(g, f, ensure_ascii=False, separators=(",", ":"))
    print(f"{name}: " + (g["trl_error"] if "trl_error" in g else f"{len(g['examples'])} examples"))


def make_render_nulls(shared):
    """`zerotune render` rows with nulls nested in tools and tool-call arguments, and the text
    training renders: apply_chat_template of the row after TRL's remove_none_values."""
    rows = [
        {"messages": [msg("user", "q")],
         "tools": [{"type": "function", "function": {
             "name": "f", "parameters": {"enum": [{"a": None, "b": 1}], "d": {"a": None, "b": 1}}}}]},
        {"messages": [msg("user", "q"), {"role": "assistant", "content": "x", "tool_calls": [
            {"type": "function", "function": {
                "name": "f", "arguments": {"k": [{"a": None, "b": 1}, None], "m": {"a": None}}}}]}]},
        {"messages": [msg("user", "q"), {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "g", "arguments": {"z": None}}}]}],
         "add_generation_prompt": False},
    ]
    tok = AutoTokenizer.from_pretrained(os.path.join(shared, "tokenizers", "qwen2.5-instruct"))
    expected = []
    for row in rows:
        r = remove_none_values(row)
        expected.append(tok.apply_chat_template(r["messages"], tools=r.get("tools"), tokenize=False,
                                                add_generation_prompt=bool(r.get("add_generation_prompt"))))
    with open(os.path.join(RENDER_OUT, "render_nulls_input.jsonl"), "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    with open(os.path.join(RENDER_OUT, "render_nulls_expected.jsonl"), "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in expected))
    print(f"render_nulls: {len(rows)} rows")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--only", default=None, help="comma-separated case names")
    a = ap.parse_args()
    assert trl.__version__ == "0.25.1", "run with TRL 0.25.1 (the users' version)"
    fcc.pin_strftime_now()
    os.makedirs(OUT, exist_ok=True)
    only = set(a.only.split(",")) if a.only else None
    for name, (tok_name, desc, rows, cfg, zt_options) in cases().items():
        if only is None or name in only:
            run_case(name, tok_name, desc, rows, cfg, zt_options, a.shared)
    if only is None or "render_nulls" in only:
        make_render_nulls(a.shared)


if __name__ == "__main__":
    main()

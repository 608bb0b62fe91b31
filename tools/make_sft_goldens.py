#!/usr/bin/env python3
"""Makes the golden files of zerotune's data layer (tests/data/sft/).

Run it once with each TRL environment (CPU torch; see tools/make_trl_venvs.sh):
    /work/venv-trl/trl-1.16/bin/python tools/make_sft_goldens.py    # <case>.golden.json
    /work/venv-trl/trl-0.25.1/bin/python tools/make_sft_goldens.py  # <case>.positional.golden.json
[--shared ../shared/data] [--only case,case]

What it writes:
  - types.parquet / types.expected.jsonl: a parquet file exercising every column type the reader
    supports (ints, floats, bools, nulls, lists, large lists, fixed-size lists, structs, maps,
    dictionary-encoded strings, several row groups and chunks) and pyarrow's decoding of each row.
  - bad_utf8.parquet: a string column holding an invalid UTF-8 byte (row 3, byte offset 5).
  - <case>.golden.json: TRL's own preprocessing output. Each case instantiates `trl.SFTTrainer`
    (with a tiny random Qwen2 model built from a config, on the CPU) over a dataset and reads back
    `trainer.train_dataset`, i.e. TRL's `_prepare_dataset` itself runs. Per example: source row,
    length, XXH3-64 of the ids (int32 little-endian) and of the target flags (uint8, 1 where the
    label is not -100), and the number of targets at positions >= 1; the full ids/targets of a
    few rows.

The completion mask differs between TRL versions (SFT_SEMANTICS §2): TRL 1.16 starts the
completion where tok(prompt) and tok(prompt + completion) diverge (`common_prefix_length`;
zerotune `dataset.completion_mask: prefix`), TRL <= 1.9 at len(tok(prompt)) (`positional`). Under
TRL 1.16 every case is written as <case>.golden.json; under TRL < 1.10 (the users' 0.25.1) only the
prompt/completion cases, whose masks differ, as <case>.positional.golden.json. TRL 0.25 keeps
examples that truncation leaves without a target (zerotune drops them; their target count is 0)
and builds the labels in its collator, so its targets are read from the completion_mask column.
"prefix_mismatch_rows" lists the rows whose tok(prompt) is not a prefix of tok(prompt + completion).
"""
import argparse
import json
import os
import tempfile

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
import transformers
from packaging.version import Version
import trl
import xxhash
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM
from trl import SFTConfig, SFTTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "sft")
TEMPLATE = os.path.join(OUT, "qwen2.5_generation.jinja")
FULL_ROWS = 2  # examples stored in full per case
# TRL <= 1.9 builds a positional completion mask; later versions the common-prefix one.
POSITIONAL = Version(trl.__version__) < Version("1.10")
SUFFIX = ".positional" if POSITIONAL else ""


def h_ids(ids):
    return format(xxhash.xxh3_64_intdigest(np.asarray(ids, dtype="<i4").tobytes()), "016x")


def h_targets(targets):
    return format(xxhash.xxh3_64_intdigest(np.asarray(targets, dtype=np.uint8).tobytes()), "016x")


# ---------------------------------------------------------------- reader fixtures
def make_reader_fixtures():
    struct_t = pa.struct([("a", pa.int32()), ("b", pa.string())])
    msg_t = pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())]))
    schema = pa.schema([
        ("s", pa.string()), ("ls", pa.large_string()), ("i64", pa.int64()), ("i8", pa.int8()),
        ("u32", pa.uint32()), ("f32", pa.float32()), ("f64", pa.float64()), ("b", pa.bool_()),
        ("n", pa.null()), ("l", pa.list_(pa.int64())), ("ll", pa.large_list(pa.string())),
        ("fl", pa.list_(pa.float64(), 2)), ("st", struct_t), ("messages", msg_t),
        ("cat", pa.dictionary(pa.int32(), pa.string())), ("m", pa.map_(pa.string(), pa.int64())),
    ])
    rows = []
    for k in range(10):
        rows.append({
            "s": None if k == 4 else f"row {k} \u00e9\u4e2d\U0001F600",
            "ls": "x" * k,
            "i64": None if k == 2 else (-1) ** k * (2**40 + k),
            "i8": -128 + k,
            "u32": 4_000_000_000 + k,
            "f32": None if k == 7 else 0.1 * k,
            "f64": 3.141592653589793 * k - 2.25,
            "b": None if k == 1 else k % 3 == 0,
            "n": None,
            "l": None if k == 5 else list(range(k % 4)),
            "ll": ["a", None, "c"][: k % 4],
            "fl": [k * 0.5, -k * 0.25],
            "st": None if k == 6 else {"a": k, "b": None if k == 3 else f"b{k}"},
            "messages": [{"content": f"hi {k}", "role": "user"},
                         {"content": f"hello {k}", "role": "assistant"}][: 1 + k % 2],
            "cat": ["red", "green", "blue"][k % 3],
            "m": [("k1", k), ("k2", None)] if k % 2 else [],
        })
    # Two record batches → chunked columns; row_group_size 3 → four row groups.
    t1 = pa.Table.from_pylist(rows[:4], schema=schema)
    t2 = pa.Table.from_pylist(rows[4:], schema=schema)
    table = pa.concat_tables([t1, t2])
    pq.write_table(table, os.path.join(OUT, "types.parquet"), row_group_size=3)
    back = pq.read_table(os.path.join(OUT, "types.parquet"))
    assert back.num_rows == 10 and back.column("cat").type == schema.field("cat").type
    with open(os.path.join(OUT, "types.expected.jsonl"), "w", encoding="utf-8") as f:
        for r in back.to_pylist():
            f.write(json.dumps(r, ensure_ascii=False) + "\n")

    # Invalid UTF-8 inside a string column, built from raw buffers (pyarrow would reject it).
    values = [b"good", b"fine", b"okay", b"bad!\xc3\x28z", b"last"]
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int32)
    arr = pa.Array.from_buffers(pa.string(), len(values),
                                [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(values))])
    ids = pa.array(range(len(values)), pa.int64())
    pq.write_table(pa.table({"id": ids, "text": arr}), os.path.join(OUT, "bad_utf8.parquet"))


# ---------------------------------------------------------------- TRL goldens
def tiny_model():
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=151936, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    return Qwen2ForCausalLM(cfg)


def run_trl(tok_dir, rows, **cfg):
    tok = AutoTokenizer.from_pretrained(tok_dir)
    ds = datasets.Dataset.from_list(rows)
    if not cfg.get("packing"):
        ds = ds.add_column("row_idx", list(range(len(ds))))
    args = SFTConfig(output_dir=tempfile.mkdtemp(), report_to=[], bf16=False, use_cpu=True, **cfg)
    trainer = SFTTrainer(model=tiny_model(), args=args, train_dataset=ds, processing_class=tok)
    return trainer.train_dataset, tok, trainer


def target_flags(ex, completion_only_loss):
    """1 where TRL's label is the token: its labels column, or (TRL < 1.10, labels built by the
    collator) the completion mask and assistant mask."""
    if "labels" in ex:
        return [int(x != -100) for x in ex["labels"]]
    flags = [1] * len(ex["input_ids"])
    if completion_only_loss and "completion_mask" in ex:
        flags = [f & m for f, m in zip(flags, ex["completion_mask"])]
    if "assistant_masks" in ex:
        flags = [f & m for f, m in zip(flags, ex["assistant_masks"])]
    return flags


def prompt_and_full_ids(tok, row, template):
    """tok(prompt) and tok(prompt + completion) as TRL computes them, before truncation."""
    if isinstance(row["prompt"], str):
        completion = row["completion"]
        if not completion.endswith(tok.eos_token):
            completion += tok.eos_token
        return tok(text=row["prompt"])["input_ids"], tok(text=row["prompt"] + completion)["input_ids"]
    kw = {"chat_template": template} if template else {}
    kw.update(row.get("chat_template_kwargs") or {})
    p = tok.apply_chat_template(row["prompt"], tokenize=True, return_dict=True,
                                add_generation_prompt=True, **kw)["input_ids"]
    full = tok.apply_chat_template(row["prompt"] + row["completion"], tokenize=True,
                                   return_dict=True, **kw)["input_ids"]
    return p, full


def golden_case(name, desc, tok_dir, rows, zt_options, template=None, **cfg):
    out, tok, trainer = run_trl(tok_dir, rows, **cfg)
    options = dict(zt_options, completion_mask="positional" if POSITIONAL else "prefix")
    g = {"case": name, "description": desc, "trl": trl.__version__,
         "transformers": transformers.__version__, "options": options,
         "rows_read": len(rows), "examples": [], "full": [], "prefix_mismatch_rows": []}
    col = trainer.args.completion_only_loss
    col = ("prompt" in rows[0]) if col is None else col
    if cfg.get("packing"):
        g["samples"] = []
        for k, ex in enumerate(out):
            targets = target_flags(ex, col)
            g["samples"].append([ex["seq_lengths"], h_ids(ex["input_ids"]), h_targets(targets)])
            if k < FULL_ROWS:
                g["full"].append({"sample": k, "ids": ex["input_ids"], "targets": targets})
    else:
        for ex in out:
            r = ex["row_idx"]
            targets = target_flags(ex, col)
            g["examples"].append([r, len(ex["input_ids"]), h_ids(ex["input_ids"]), h_targets(targets),
                                  sum(targets[1:])])
            if len(g["full"]) < FULL_ROWS:
                g["full"].append({"row": r, "ids": ex["input_ids"], "targets": targets})
        # Rows whose prompt ids are not a prefix of the (untruncated) full ids.
        if "prompt" in rows[0]:
            for r, row in enumerate(rows):
                p, full = prompt_and_full_ids(tok, row, template)
                if full[: len(p)] != p:
                    g["prefix_mismatch_rows"].append(r)  # every row, kept or not
    path = os.path.join(OUT, f"{name}{SUFFIX}.golden.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(g, f, separators=(",", ":"))
    n = len(g.get("samples", g["examples"]))
    print(f"{name}{SUFFIX}: {n} {'samples' if cfg.get('packing') else 'examples'}, "
          f"{len(g['prefix_mismatch_rows'])} prefix mismatches, {os.path.getsize(path)} bytes")


# A Llama-3-style post-processor (BOS added by `tokenizer(text)`) on the Qwen2.5 tokenizer, with
# <|box_start|> (151648) as BOS: tests that plain text gets the BOS (add_special_tokens=True, as
# TRL calls the tokenizer) and chat-template output does not. The C++ test builds the same files.
BOS_POST_PROCESSOR = {
    "type": "Sequence",
    "processors": [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|box_start|>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|box_start|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|box_start|>", "type_id": 1}},
                  {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|box_start|>": {"id": "<|box_start|>", "ids": [151648],
                                              "tokens": ["<|box_start|>"]}}},
    ],
}


def make_bos_tokenizer(src, dst):
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tj["post_processor"] = BOS_POST_PROCESSOR
    with open(os.path.join(dst, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    tc["bos_token"] = "<|box_start|>"
    with open(os.path.join(dst, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False)
    tok = AutoTokenizer.from_pretrained(dst)
    assert tok("Hi there")["input_ids"] == [151648, 13048, 1052]
    return dst


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def make_clone_tokenizer(src, dst, template):
    """The Qwen2.5 tokenizer files with another chat template and `<|endoftext|>` as EOS: a
    `chat_template_path` tokenizer whose tokens the model's tokenizer has. The C++ test builds the
    same files."""
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tj = f.read()
    with open(os.path.join(dst, "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(tj)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    tc["eos_token"] = "<|endoftext|>"
    tc["chat_template"] = template
    with open(os.path.join(dst, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False)
    return dst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--only", default=None, help="comma-separated case names")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else None
    # Under TRL < 1.10 only the prompt/completion cases (the completion mask is what differs).
    pc_cases = {"plain_pc", "chat_pc", "conv_pc", "bos_plain_pc", "ctk_qwen3"}
    want = lambda n: (only is None or n in only) and (not POSITIONAL or n in pc_cases)  # noqa: E731
    qwen = os.path.join(a.shared, "tokenizers", "qwen2.5-instruct")
    qwen3 = os.path.join(a.shared, "tokenizers", "qwen3")
    sft = pq.read_table(os.path.join(a.shared, "datasets/ultrafeedback/seed_format/sft.parquet")).to_pylist()
    nr = read_jsonl(os.path.join(a.shared, "datasets/no_robots/test.expected_rows.jsonl"))
    messages = [{"messages": r["messages"]} for r in nr]
    conv_pc = [{"prompt": r["messages"][:-1], "completion": r["messages"][-1:]} for r in nr]
    template = open(TEMPLATE, encoding="utf-8").read()

    if want("types"):
        make_reader_fixtures()
    if want("plain_pc"):
        golden_case("plain_pc", "ultrafeedback sft.parquet as plain prompt/completion", qwen, sft, {})
    if want("chat_pc"):
        # The users' prompt_format: chat — one user turn rendered with add_generation_prompt=True,
        # EOS appended to the completion — then TRL on plain prompt/completion.
        tok = AutoTokenizer.from_pretrained(qwen)
        chat = [{"prompt": tok.apply_chat_template([{"role": "user", "content": r["prompt"]}],
                                                   tokenize=False, add_generation_prompt=True),
                 "completion": r["completion"] + tok.eos_token} for r in sft]
        golden_case("chat_pc", "ultrafeedback sft.parquet with prompt_format: chat", qwen, chat,
                    {"prompt_format": "chat"})
    if want("messages"):
        golden_case("messages", "no_robots messages (conversational language modelling)", qwen,
                    messages, {})
    if want("messages_assistant_only"):
        golden_case("messages_assistant_only", "no_robots messages, assistant_only_loss with "
                    "tests/data/sft/qwen2.5_generation.jinja", qwen, messages,
                    {"assistant_only_loss": True, "chat_template": "qwen2.5_generation.jinja"},
                    assistant_only_loss=True, chat_template_path=TEMPLATE)
    if want("messages_max256"):
        golden_case("messages_max256", "no_robots messages truncated to 256 tokens", qwen, messages,
                    {"max_length": 256}, max_length=256)
    if want("conv_pc"):
        golden_case("conv_pc", "no_robots as conversational prompt (messages[:-1]) / completion "
                    "(messages[-1:])", qwen, conv_pc, {})
    if want("conv_pc_keep_end"):
        golden_case("conv_pc_keep_end", "conv_pc truncated to its last 128 tokens", qwen, conv_pc,
                    {"max_length": 128, "truncation_mode": "keep_end"}, max_length=128,
                    truncation_mode="keep_end")
    if want("conv_pc_assistant_only"):
        golden_case("conv_pc_assistant_only", "conv_pc with assistant_only_loss and the generation "
                    "template", qwen, conv_pc,
                    {"assistant_only_loss": True, "chat_template": "qwen2.5_generation.jinja"},
                    template=template, assistant_only_loss=True, chat_template_path=TEMPLATE)
    if want("ctk_qwen3"):
        rows = read_jsonl(os.path.join(a.shared, "..", "cases", "chat-template-kwargs-ignored",
                                       "data.jsonl"))
        golden_case("ctk_qwen3", "../shared/cases/chat-template-kwargs-ignored rows (per-row "
                    "chat_template_kwargs enable_thinking=false), Qwen3 tokenizer", qwen3, rows,
                    {"tokenizer": "qwen3", "max_length": 64}, max_length=64)
    if want("text"):
        golden_case("text", "c4_demo.jsonl (plain language modelling)", qwen,
                    read_jsonl(os.path.join(a.shared, "datasets/text/c4_demo.jsonl")), {})
    if want("kto_messages"):
        kto = json.load(open(os.path.join(a.shared, "datasets/messages/kto_en_demo.json"), encoding="utf-8"))
        golden_case("kto_messages", "kto_en_demo.json (JSON array, messages + label)", qwen, kto, {})
    if want("plain_pc_clone"):
        clone = make_clone_tokenizer(qwen, tempfile.mkdtemp(), template)
        golden_case("plain_pc_clone", "the first 40 rows of sft.parquet with chat_template_path = a "
                    "tokenizer directory whose EOS is <|endoftext|> (TRL clone_chat_template)", qwen,
                    sft[:40], {"chat_template_path": "clone"}, chat_template_path=clone)
    bos = make_bos_tokenizer(qwen, tempfile.mkdtemp())
    if want("bos_plain_pc"):
        golden_case("bos_plain_pc", "sft.parquet, plain prompt/completion, tokenizer with a BOS "
                    "post-processor", bos, sft, {"tokenizer": "bos"})
    if want("bos_messages"):
        golden_case("bos_messages", "no_robots messages, tokenizer with a BOS post-processor", bos,
                    messages, {"tokenizer": "bos"})
    if want("bos_text"):
        golden_case("bos_text", "c4_demo.jsonl, tokenizer with a BOS post-processor", bos,
                    read_jsonl(os.path.join(a.shared, "datasets/text/c4_demo.jsonl")),
                    {"tokenizer": "bos"})
    if want("packed_messages"):
        golden_case("packed_messages", "no_robots messages packed (bfd) into 512-token bins", qwen,
                    messages, {"packing": True, "max_length": 512}, packing=True, max_length=512)


if __name__ == "__main__":
    main()

"""The model families' chat templates and SFT cases, shared by tools/make_family_tokenizers.py
(which needs the texts to prune the tokenizers) and tools/make_family_sft_goldens.py (TRL).

tests/data/families/chat/<family>/ holds each family's tokenizer_config.json (its special tokens)
and chat_template.jinja. Templates and where they come from:
  - gemma3, llama3_1, llama3_2, phi3: TRL 1.16's own copies of the original templates
    (trl/chat_templates/<name>.jinja, Apache-2.0); gemma3/training.jinja is TRL's
    gemma3_training.jinja ({% generation %} markers).
  - mistral: Mistral-7B-Instruct-v0.3's template (system message folded into the last user turn,
    tools, tool-call ids), as quoted in public write-ups of Mistral's templates.
  - olmo2: allenai/OLMo-2-1124-7B-SFT's tokenizer_config.json template (the Tülu template with
    bos_token), as quoted in public code citing that file.
  - phi4_mini: microsoft/Phi-4-mini-instruct's template, as quoted by several public copies.
  - smollm3: SmolLM3's template as in the SmolLM3 SFT checkpoints (with {% generation %} markers),
    quoted by the Berkeley function-calling leaderboard's SmolLM3 handler.
  - qwen3: the shared Qwen3 tokenizer's own template (../shared/data/tokenizers/qwen3).
strftime_now is pinned to 26 Jul 2024 (SOURCE_DATE_EPOCH=1721952000 for zerotune), so the Llama 3.x
and SmolLM3 "Today Date" lines are reproducible.
"""
import datetime as _dt
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CHAT = os.path.join(HERE, "..", "tests", "data", "families", "chat")
SOURCE_DATE_EPOCH = 1721952000  # 2024-07-26 00:00:00 UTC
ROWS = 8  # rows of each dataset per case

LLAMA_TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                "pad_token": "<|finetune_right_pad_id|>"}
# family -> tokenizer (a tests/data/families/<name> directory, or "qwen3" for the shared one), the
# special tokens of its tokenizer_config.json, the template's origin and the SFT cases.
FAMILIES = {
    "qwen3": {"tokenizer": "qwen3", "tokens": None, "template": None,
              "cases": ["messages", "conv_pc"]},
    "llama3_2": {"tokenizer": "llama3.2", "tokens": LLAMA_TOKENS, "template": "trl:llama3_2",
                 "cases": ["messages", "conv_pc", "plain_pc"]},
    "llama3_1": {"tokenizer": "llama3.2", "tokens": LLAMA_TOKENS, "template": "trl:llama3_1",
                 "cases": ["messages"]},
    "mistral": {"tokenizer": "mistral_v3", "tokens": {"bos_token": "<s>", "eos_token": "</s>",
                                                      "unk_token": "<unk>"},
                "template": "file", "cases": ["messages", "conv_pc", "plain_pc"]},
    "mistral_legacy": {"tokenizer": "mistral_v3_legacy", "chat": "mistral",
                       "tokens": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
                       "template": "file", "cases": ["messages", "plain_pc"]},
    "gemma3": {"tokenizer": "gemma_style", "tokens": {"bos_token": "<s>", "eos_token": "<end_of_turn>",
                                                      "unk_token": "<unk>"},
               "template": "trl:gemma3", "training": "trl:gemma3_training",
               "cases": ["messages", "conv_pc", "plain_pc", "messages_assistant_only"]},
    "olmo2": {"tokenizer": "llama3.2", "tokens": dict(LLAMA_TOKENS, eos_token="<|end_of_text|>"),
              "template": "file", "cases": ["messages", "conv_pc"]},
    "smollm3": {"tokenizer": "llama3.2", "tokens": dict(LLAMA_TOKENS, bos_token=None),
                "template": "file", "cases": ["messages", "messages_assistant_only"]},
    "phi3": {"tokenizer": "phi3_style", "tokens": {"bos_token": "<s>", "eos_token": "<|endoftext|>",
                                                   "unk_token": "<unk>", "pad_token": "<|endoftext|>"},
             "template": "trl:phi3", "cases": ["messages", "conv_pc", "plain_pc"]},
    "phi4_mini": {"tokenizer": "llama3.2", "tokens": dict(LLAMA_TOKENS, eos_token="<|end_of_text|>"),
                  "template": "file", "cases": ["messages", "conv_pc"]},
}


def families():
    return {k: dict(v) for k, v in FAMILIES.items()}


def pin_strftime_now():
    """transformers' strftime_now reads datetime.now(): pin it to SOURCE_DATE_EPOCH."""
    import transformers.utils.chat_template_utils as ctu

    class Fixed(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return _dt.datetime.fromtimestamp(SOURCE_DATE_EPOCH, _dt.timezone.utc).replace(tzinfo=None)

    ctu.datetime = Fixed


def chat_dir(family):
    return os.path.join(CHAT, FAMILIES[family].get("chat", family))


def template_of(family, spec, shared):
    """The family's template text (TRL's copies are read from the installed trl package)."""
    if spec["template"] is None:
        with open(os.path.join(shared, "tokenizers", "qwen3", "tokenizer_config.json"), encoding="utf-8") as f:
            return json.load(f)["chat_template"]
    if spec["template"].startswith("trl:"):
        import importlib.util  # the package's files only: importing trl would need torch
        trl_dir = importlib.util.find_spec("trl").submodule_search_locations[0]
        path = os.path.join(trl_dir, "chat_templates", spec["template"][4:] + ".jinja")
        with open(path, encoding="utf-8") as f:
            return f.read()
    with open(os.path.join(chat_dir(family), "chat_template.jinja"), encoding="utf-8") as f:
        return f.read()


def write_chat_dirs(shared):
    """tests/data/families/chat/<family>/: tokenizer_config.json (+ TRL's templates copied)."""
    for family, spec in FAMILIES.items():
        if spec["tokens"] is None or "chat" in spec:
            continue
        d = chat_dir(family)
        os.makedirs(d, exist_ok=True)
        if spec["template"].startswith("trl:"):
            with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8") as f:
                f.write(template_of(family, spec, shared))
        if "training" in spec:
            with open(os.path.join(d, "training.jinja"), "w", encoding="utf-8") as f:
                f.write(template_of(family, {"template": spec["training"]}, shared))
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 131072}
        cfg.update({k: v for k, v in spec["tokens"].items() if v is not None})
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=1)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def rows(case, shared):
    """The dataset rows of a case (the first ROWS of each shared dataset)."""
    if case.startswith("messages"):
        nr = read_jsonl(os.path.join(shared, "datasets/no_robots/test.expected_rows.jsonl"))[:ROWS]
        return [{"messages": r["messages"]} for r in nr]
    if case == "conv_pc":
        nr = read_jsonl(os.path.join(shared, "datasets/no_robots/test.expected_rows.jsonl"))[:ROWS]
        return [{"prompt": r["messages"][:-1], "completion": r["messages"][-1:]} for r in nr]
    if case == "plain_pc":
        import pyarrow.parquet as pq
        t = pq.read_table(os.path.join(shared, "datasets/ultrafeedback/seed_format/sft.parquet"))
        return t.slice(0, ROWS).to_pylist()
    raise ValueError(case)


def chat_texts(family, spec, shared):
    """Every text TRL tokenizes for the family's cases (rendered with transformers)."""
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer
    pin_strftime_now()
    template = template_of(family, spec, shared)
    tokens = spec["tokens"] or {"eos_token": "<|im_end|>"}
    dummy = Tokenizer.from_str(json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {}, "merges": []}}))
    tok = PreTrainedTokenizerFast(tokenizer_object=dummy, **{k: v for k, v in tokens.items() if v})
    out = []
    for case in spec["cases"]:
        for r in rows(case, shared):
            if "messages" in r:
                out.append(tok.apply_chat_template(r["messages"], tokenize=False, chat_template=template))
            elif isinstance(r["prompt"], list):
                out.append(tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True,
                                                   chat_template=template))
                out.append(tok.apply_chat_template(r["prompt"] + r["completion"], tokenize=False,
                                                   chat_template=template))
            else:
                eos = tokens["eos_token"]
                c = r["completion"] if r["completion"].endswith(eos) else r["completion"] + eos
                out += [r["prompt"], r["prompt"] + c]
    return out

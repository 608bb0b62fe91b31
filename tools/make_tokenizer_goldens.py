#!/usr/bin/env python3
"""Makes the tokenizer golden files under tests/data/tokenizer/ with HF `tokenizers`.

Run with the golden environment:  /work/goldenv/bin/python tools/make_tokenizer_goldens.py

Writes
  llama3_style/tokenizer.json  a small Llama-3-style byte-level BPE trained here on the C4 demo text:
                               Llama-3 split regex + ByteLevel(use_regex=false), ignore_merges, a
                               TemplateProcessing post-processor adding <|begin_of_text|>, and added
                               tokens with lstrip / rstrip / single_word / normalized variants.
  gpt2_style/tokenizer.json    the same vocabulary as a GPT-2-style tokenizer: Sequence[NFC]
                               normaliser, ByteLevel(add_prefix_space, use_regex) pre-tokenizer,
                               merges stored as "a b" strings, ByteLevel post-processor trimming
                               offsets.
  corpus.tsv                   for every text of the shared datasets (UltraFeedback prompt / chosen /
                               rejected, no_robots message contents, C4 text), in a fixed order:
                               the FNV-1a-64 hash of its UTF-8 bytes and, per tokenizer, the number of
                               ids and an FNV-1a-64 hash of the ids (see ids_hash).
  corpus_ids.jsonl             full ids of a subset of those texts (debugging help for the test).
  adversarial.json             hand-written hard strings: ids, byte offsets, ids with special tokens,
                               decode results, per tokenizer; plus decode cases of invalid UTF-8.
  src/text/unicode_tables.h    facts about the Unicode data inside HF `tokenizers`, probed here: the
                               letters / numbers its regexes (Oniguruma, Unicode 16) know beyond
                               PCRE2's Unicode 14, and the code points whose NFC data its
                               normaliser (Unicode 9) lacks while utf8proc has it.
  fuzz.jsonl                   800 random strings (seeded) mixing ASCII, Unicode spaces, many scripts,
                               combining marks, emoji, added-token text, contractions and random
                               code points, with per tokenizer the count and hashes of the ids and of
                               the byte offsets, with and without special tokens.
  variants.json                tiny tokenizers (inline tokenizer.json) exercising the other Split
                               behaviours, invert, String patterns, char-level BPE with unk_token /
                               fuse_unk / byte_fallback, no pre-tokenizer, no decoder; with ids,
                               offsets and decodes of a few strings each.
"""
import ctypes
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

ROOT = Path(__file__).resolve().parent.parent
SHARED = (ROOT / ".." / "shared" / "data").resolve()
OUT = ROOT / "tests" / "data" / "tokenizer"

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64-bit, over bytes (the C++ test computes the same)."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def ids_hash(ids) -> int:
    """FNV-1a-64 over the ids taken as whole 32-bit units: h = (h ^ id) * prime."""
    h = FNV_OFFSET
    for i in ids:
        h = ((h ^ i) * FNV_PRIME) & MASK
    return h


def corpus_texts():
    """(source, row, text) for every text of the shared datasets, in the order the test reads them."""
    out = []
    with open(SHARED / "datasets/ultrafeedback/train_prefs_1000.jsonl", encoding="utf-8") as f:
        for n, line in enumerate(f):
            row = json.loads(line)
            for key in ("prompt", "chosen", "rejected"):
                out.append((f"ultrafeedback.{key}", n, row[key]))
    with open(SHARED / "datasets/no_robots/test.expected_rows.jsonl", encoding="utf-8") as f:
        for n, line in enumerate(f):
            for m in json.loads(line)["messages"]:
                out.append(("no_robots.messages", n, m["content"]))
    with open(SHARED / "datasets/text/c4_demo.jsonl", encoding="utf-8") as f:
        for n, line in enumerate(f):
            out.append(("c4.text", n, json.loads(line)["text"]))
    return out


def make_fixtures(c4_texts):
    """Trains a 2,000-token byte-level BPE on the C4 demo text and writes the two fixtures."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(c4_texts, trainer)
    base = json.loads(tok.to_str())
    vocab = base["model"]["vocab"]
    # A vocabulary entry that no merge sequence produces: only ignore_merges finds it whole.
    vocab["Ġzerotune"] = len(vocab)

    # --- Llama-3 style -----------------------------------------------------------------------
    llama = json.loads(json.dumps(base))
    llama["model"]["ignore_merges"] = True
    t = Tokenizer.from_str(json.dumps(llama))
    t.decoder = decoders.ByteLevel()
    t.add_special_tokens([
        AddedToken("<|begin_of_text|>", special=True, normalized=False),
        AddedToken("<|end_of_text|>", special=True, normalized=False),
        AddedToken("<|start_header_id|>", special=True, normalized=False),
        AddedToken("<|end_header_id|>", special=True, normalized=False),
        AddedToken("<|eot_id|>", special=True, normalized=False),
        AddedToken("<mask>", special=True, lstrip=True, normalized=False),
        AddedToken("[RSTRIP]", special=True, rstrip=True, normalized=False),
    ])
    t.add_tokens([
        AddedToken("<both>", lstrip=True, rstrip=True, normalized=False),
        AddedToken("hello_world", single_word=True, normalized=True),
        AddedToken("<|x|>", normalized=False),
        AddedToken("<|x|>y", normalized=False),
        AddedToken("naïve", normalized=True),
    ])
    bos = t.token_to_id("<|begin_of_text|>")
    t.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    (OUT / "llama3_style").mkdir(parents=True, exist_ok=True)
    t.save(str(OUT / "llama3_style" / "tokenizer.json"))

    # --- GPT-2 style ---------------------------------------------------------------------------
    gpt2 = json.loads(json.dumps(base))
    gpt2["model"]["merges"] = [m if isinstance(m, str) else f"{m[0]} {m[1]}"
                               for m in gpt2["model"]["merges"]]
    gpt2["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
    gpt2["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                             "use_regex": True}
    gpt2["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                              "use_regex": True}
    gpt2["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True}
    t = Tokenizer.from_str(json.dumps(gpt2))
    t.add_special_tokens([AddedToken("<eos>", special=True, normalized=False),
                          AddedToken("<mask>", special=True, lstrip=True, rstrip=True,
                                     normalized=False)])
    t.add_tokens([AddedToken("café", normalized=True), AddedToken("Ωmega", normalized=False)])
    (OUT / "gpt2_style").mkdir(parents=True, exist_ok=True)
    # Keep the "a b" merge strings: save, then rewrite merges (tokenizers saves pairs).
    saved = json.loads(t.to_str())
    saved["model"]["merges"] = gpt2["model"]["merges"]
    (OUT / "gpt2_style" / "tokenizer.json").write_text(
        json.dumps(saved, ensure_ascii=False, indent=2), encoding="utf-8")


ADVERSARIAL = [
    # empty and whitespace
    "", " ", "  ", "\t", "\n", "\r\n", "a\r\nb", "line1\n\n\nline2", "   leading spaces",
    "trailing spaces   ", "tabs\t\tand\t spaces \t", "\n\n  \n", "x \n y", "mixed \r\n\r\n\t end",
    "a  b   c    d", " \n", "\r", "\r\r\n\n", "end\n", "x\t\n\ty", "\f\vform feeds",
    # digits
    "1234567890", "3.14159", "12,345,678", "year 2024!", "٣٤٥ arabic-indic", "①②③", "x²+y³",
    "ⅫⅣ", "00000000000000000001", "1st 2nd 3rd 4th", "-42.5e+10",
    # CJK and other scripts
    "你好，世界！", "日本語のテキストです。", "한국어 텍스트", "中文English混合123", "Ελληνικά",
    "Русский текст", "עברית", "العربية", "हिन्दी", "ไทย", "ქართული",
    # normalisation (NFC changes these) and NFC-stable accents
    "e\u0301", "cafe\u0301 au lait", "A\u030a", "\u212b", "\u1100\u1161\u11a8", "ae\u0301\u0323x",
    "\u0344", "q\u0307\u0323", "Amélie naïve", "\u0958", "\uf900", "\u0301abc",
    "e\u0301\u0301", "\u00c5\u0328", "Ä\u0308", "naı\u0308ve",
    # emoji
    "👍", "👨‍👩‍👧‍👦 family", "🏳️‍🌈", "👍🏽", "🇯🇵🇫🇷", "❤️", "😀😃😄😁",
    # added / special token text inside ordinary text
    "a<|im_end|>b", "<|im_start|>user\nHello<|im_end|>\n", "<|endoftext|><|endoftext|>",
    "<|im_start|", "<|im_end|>x<|im_start|>", "<think>\nhmm\n</think>\n\nok",
    "<|begin_of_text|>Hi", "x <mask> y", " <mask>", "x   <mask>", "[RSTRIP]   y", "a <both> b",
    "a  <both>  <both>  b", "hello_world hello_worlds xhello_world hello_world. (hello_world)",
    "<|x|>y <|x|>z <|x|>", "café cafe\u0301 CAFÉ", "naïve nai\u0308ve", "Ωmega Ω\u0301mega",
    "<eos>text<eos>", "<mask><mask>", "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi",
    "<|im_start|><|im_end|>", "< |im_end|>", "<|IM_END|>",
    # contractions
    "DON'T", "We'Ll", "I'M", "they'RE", "it's", "IT'S", "'s'", "O'Neil's", "'ſ", "''''",
    "don’t", "you'VE we'D", "'tis 's ' s",
    # unicode whitespace and format characters
    "a\u00a0b", "a\u3000b", "a\u2028b", "a\u0085b", "a\u180eb", "a \u180e b", "a\u200bb",
    "x\u2003\u2003y", "\u00a0\u00a0", " \u00a0x", "a\u200d\u200cb", "\u2029para",
    # valid but unusual UTF-8
    "\U0010ffff", "\ufffd", "\ufeffbom", "\u0000 nul", "\x7f", "\ue000", "ﷺ", "\U000e0001tag",
    "a" * 300, " " * 200, "ab" * 150, "\n" * 50, "😀" * 40, "中" * 100,
    # code and markup
    "def f(x):\n    return x**2  # comment\n", "if (a&&b) { c++; }\n\t\treturn;",
    "{\"k\": [1, 2, {\"z\": null}]}", "https://example.com/a?b=c&d=e#frag", "user@example.org",
    "<div class=\"x\">&amp;</div>", "$\\frac{a}{b}$ \\\\ \\n", "C:\\Windows\\path",
    "--- *** ___ ~~~ ```python", "a.b.c...d!!!?", "(((nested)))",
    " zerotune zerotune! Zerotune",
    # Unicode data versions: U+0D3C (Unicode 10) is unknown to HF's NFC; Unicode 15-16 letters
    # are letters for HF's regexes and \\w
    "a\u0d3c\u0336b", "\u0d3c\u0336 mal", "\U000323af'tis", "\u1c8a'S x", "\U0001359d[RSTRIP]",
    "\U000136aehello_world hello_world\U000136ae", "\U00011938\U00011935\U00011930",
]


def byte_offsets(text, offsets):
    """HF Python offsets are in characters; convert them to UTF-8 byte offsets."""
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return [[pos[a], pos[b]] for a, b in offsets]


def decode_cases(tok, name):
    """Id sequences whose bytes are not valid UTF-8, with HF's decoded string (U+FFFD rules)."""
    cases = []
    for text in ["你好", "😀!", "é", "👨‍👩‍👧", "a€b"]:
        ids = tok.encode(text, add_special_tokens=False).ids
        variants = [ids[:1], ids[1:], list(reversed(ids)), ids[:1] + ids[:1], ids + ids[:1]]
        for v in variants:
            cases.append({"ids": v, "decoded": tok.decode(v, skip_special_tokens=False)})
    # bytes of a 4-byte char cut after 2 and 3 bytes, and lone continuation bytes
    for raw in [b"\xf0\x9f", b"\xf0\x9f\x98", b"\x80\x80", b"a\xc3", b"\xe4\xbd\xe5\xa5\xbd",
                b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xff\xfe"]:
        tokens = []
        for b in raw:
            tokens.append(BYTE_CHARS[b])
        ids = [tok.token_to_id(t) for t in tokens]
        if None in ids:
            continue
        cases.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    return cases


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (a fact of the format)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHARS = bytes_to_unicode()


VARIANT_TEXTS = ["Hello, world! 123 abc", "  multiple   spaces\t\n end", "naïve café 東京 x²",
                 "ÿ€😀 unknownΩ chars", "", "a1b22c333,d...e!?", "THE the The"]


def make_variants(c4_texts):
    """Small tokenizers, each a JSON document, with HF's results on VARIANT_TEXTS."""
    corpus = c4_texts[:60]
    # byte-level base
    bl = Tokenizer(models.BPE())
    bl.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bl.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=400, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bl_doc = json.loads(bl.to_str())
    bl_doc["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                         "use_regex": False}

    def byte_level_with(splits, byte_level):
        d = json.loads(json.dumps(bl_doc))
        d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": splits + [byte_level]}
        return d

    def split(pattern, behavior, invert=False, literal=False):
        return {"type": "Split", "pattern": {"String" if literal else "Regex": pattern},
                "behavior": behavior, "invert": invert}

    blv = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    docs = {
        "removed": byte_level_with([split(r"\s+", "Removed")], blv),
        "merged_with_previous": byte_level_with([split(" ", "MergedWithPrevious", literal=True)], blv),
        "merged_with_next": byte_level_with([split(r"[,.!?]", "MergedWithNext")], blv),
        "contiguous": byte_level_with([split(r"\d", "Contiguous")], blv),
        "isolated_invert": byte_level_with(
            [split(r"\p{L}+", "Isolated", invert=True)],
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}),
        "removed_invert": byte_level_with([split(r"[aeiou]", "Removed", invert=True)], blv),
    }
    # char-level BPE (no ByteLevel): unknown characters
    ascii_corpus = ["".join(ch for ch in t if ord(ch) < 128) for t in corpus]
    cl = Tokenizer(models.BPE(unk_token="[UNK]"))
    cl.pre_tokenizer = pre_tokenizers.Split(Regex(r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+"), "isolated")
    cl.train_from_iterator(ascii_corpus, trainers.BpeTrainer(
        vocab_size=300, show_progress=False, special_tokens=["[UNK]"]))
    cl_doc = json.loads(cl.to_str())
    cl_doc["decoder"] = None
    docs["char_unk"] = cl_doc
    d = json.loads(json.dumps(cl_doc))
    d["model"]["fuse_unk"] = True
    docs["char_unk_fused"] = d
    d = json.loads(json.dumps(cl_doc))
    d["model"]["byte_fallback"] = True
    d["model"]["unk_token"] = None
    n = len(d["model"]["vocab"])
    for b in range(256):
        d["model"]["vocab"][f"<0x{b:02X}>"] = n + b
    docs["char_byte_fallback"] = d
    d = json.loads(json.dumps(cl_doc))
    d["model"]["unk_token"] = None
    d["pre_tokenizer"] = None
    docs["char_no_pretokenizer_drop_unknown"] = d
    out = []
    for name, doc in docs.items():
        t = Tokenizer.from_str(json.dumps(doc))
        cases = []
        for text in VARIANT_TEXTS:
            e = t.encode(text, add_special_tokens=False)
            cases.append({"text": text, "ids": e.ids, "offsets": byte_offsets(text, e.offsets),
                          "decoded": t.decode(e.ids, skip_special_tokens=False)})
        out.append({"name": name, "tokenizer": json.loads(t.to_str()), "cases": cases})
    with open(OUT / "variants.json", "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def _ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def _regex_class(pattern):
    """Code points >= U+0080 that HF's regex engine matches with `pattern` (a one-char class)."""
    split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    cps = [c for c in range(0x80, 0x110000) if not 0xD800 <= c <= 0xDFFF]
    kept = set()
    for piece, _ in split.pre_tokenize_str("".join(map(chr, cps))):
        kept.update(map(ord, piece))
    return set(cps) - kept


FUZZ_POOLS = [
    [chr(c) for c in range(32, 127)],
    list("\t\n\r\x0b\x0c \x85\xa0\u1680\u180e\u2000\u2001\u2005\u200a\u2028\u2029\u202f\u205f"
         "\u3000\u200b\ufeff"),
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    list("0123456789٠١٢٣۴۵०१२３４５²³¹½ⅫⅣ①"),
    [chr(c) for c in range(0x300, 0x370)] + ["\u093c", "\u094d", "\u0bbe", "\u1161", "\u11a8",
                                             "\u0f73", "\u0344", "\u0d3c", "\u1ac1"],
    list("😀👍🏽❤️👨‍👩‍👧🇯🇵🏳️‍🌈\u200d\ufe0f"),
    list("中文日本語한국어ひらがなカタカナ你好世界"),
    list("αβγΔΩабвгдЖЯאבגعربيةहिन्दीไทยქართ"),
    ["<|im_end|>", "<|endoftext|>", "<|im_start|>", "<think>", "</think>", "<|begin_of_text|>",
     "<mask>", "[RSTRIP]", "<both>", "hello_world", "<|x|>", "<|x|>y", "café", "naïve", "Ωmega",
     "<eos>"],
    ["'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D", "'ſ", "’s", "''"],
    list("\u1100\u1161\u11a8\uac00\u212b\u0958\uf900\u00c5\u0327e\u0301"),
]


def fuzz_texts(n, seed=20261130):
    """Random strings from FUZZ_POOLS plus random code points (a fixed, seeded sequence)."""
    import random
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 30)):
            if rng.random() < 0.08:
                c = rng.choice([rng.randint(0x80, 0xFFFF), rng.randint(0x10000, 0x10FFFF)])
                parts.append(chr(c) if not 0xD800 <= c <= 0xDFFF else "?")
            else:
                pool = rng.choice(FUZZ_POOLS)
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 4))))
        out.append("".join(parts))
    return out


def make_fuzz(toks):
    texts = fuzz_texts(800)
    with open(OUT / "fuzz.jsonl", "w", encoding="utf-8") as f:
        rows = [{"text": t} for t in texts]
        for name, tok in toks.items():
            for special in (False, True):
                key = name + ("+special" if special else "")
                for row, e in zip(rows, tok.encode_batch(texts, add_special_tokens=special)):
                    offs = [x for pair in byte_offsets(row["text"], e.offsets) for x in pair]
                    row[key] = [len(e.ids), f"{ids_hash(e.ids):016x}", f"{ids_hash(offs):016x}"]
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")


def make_unicode_tables():
    """Writes src/text/unicode_tables.h (see the module docstring)."""
    assert unicodedata.unidata_version == "14.0.0", "PCRE2 10.42 has Unicode 14.0: use Python 3.11"
    tables = {}
    for name, pattern, cat in (("kExtraLetters", r"\p{L}", "L"), ("kExtraNumbers", r"\p{N}", "N")):
        hf = _regex_class(pattern)
        ucd14 = {c for c in range(0x80, 0x110000)
                 if not 0xD800 <= c <= 0xDFFF and unicodedata.category(chr(c)).startswith(cat)}
        assert not ucd14 - hf, f"{pattern}: Unicode 14 members unknown to HF"
        tables[name] = _ranges(hf - ucd14)
    lib = ctypes.CDLL("libutf8proc.so.2")

    class Prop(ctypes.Structure):  # leading fields of utf8proc_property_t
        _fields_ = [("category", ctypes.c_int16), ("combining_class", ctypes.c_int16),
                    ("bidi_class", ctypes.c_int16), ("decomp_type", ctypes.c_int16),
                    ("decomp_seqindex", ctypes.c_uint16)]
    lib.utf8proc_get_property.restype = ctypes.POINTER(Prop)
    lib.utf8proc_unicode_version.restype = ctypes.c_char_p
    nfc, nfd = normalizers.NFC(), normalizers.NFD()
    unknown = set()
    for c in range(0x80, 0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        p = lib.utf8proc_get_property(c).contents
        ch = chr(c)
        if p.combining_class:
            # A known mark moves before a mark of a higher class: 'a' + c + U+0301 (230) or
            # 'a' + U+0334 (1) + c would not be in canonical order otherwise.
            probe = "a" + ch + "\u0334" if p.combining_class > 1 else "a" + "\u0301" + ch
            if nfc.normalize_str(probe) == probe:
                unknown.add(c)
        if p.decomp_seqindex != 0xFFFF and p.decomp_type == 0 and nfd.normalize_str(ch) == ch:
            unknown.add(c)
    tables["kNfcUnknown"] = _ranges(unknown)
    docs = {
        "kExtraLetters": "Letters (\\p{L}) for HF's regexes (Oniguruma, Unicode 16.0) that PCRE2 10.42\n"
                         "// (Unicode 14.0) does not know.",
        "kExtraNumbers": "Numbers (\\p{N}) likewise.",
        "kNfcUnknown": "Code points with a combining class or canonical decomposition in utf8proc's\n"
                       "// Unicode 15.0 that HF's NFC (unicode-normalization-alignments, Unicode 9.0 data)\n"
                       "// treats as plain starters without decomposition.",
    }
    lines = [
        "// Generated by tools/make_tokenizer_goldens.py from HF tokenizers "
        f"{tokenizers.__version__} and utf8proc {lib.utf8proc_unicode_version().decode()}: facts",
        "// about the Unicode data inside HF `tokenizers`, so that zerotune's tokenizer gives its ids.",
        "// Do not edit.",
        "#pragma once",
        "",
        "namespace zt::text::unicode_tables {",
        "",
        "struct Range {",
        "  char32_t first, last;  // inclusive",
        "};",
        "",
    ]
    for name, ranges in tables.items():
        lines.append(f"// {docs[name]}")
        lines.append(f"inline constexpr Range {name}[] = {{")
        row = "   "
        for a, b in ranges:
            item = f" {{0x{a:X}, 0x{b:X}}},"
            if len(row) + len(item) > 100:
                lines.append(row)
                row = "   "
            row += item
        lines.append(row)
        lines.append("};")
        lines.append("")
    lines.append("}  // namespace zt::text::unicode_tables")
    out = ROOT / "src/text/unicode_tables.h"
    out.write_text("\n".join(lines) + "\n")
    subprocess.run(["clang-format", "-i", str(out)], check=False)  # the repo's .clang-format


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    make_unicode_tables()
    corpus = corpus_texts()
    c4 = [t for s, _, t in corpus if s == "c4.text"]
    make_fixtures(c4)
    make_variants(c4)
    toks = {
        "qwen2.5": Tokenizer.from_file(str(SHARED / "tokenizers/qwen2.5-instruct/tokenizer.json")),
        "qwen3": Tokenizer.from_file(str(SHARED / "tokenizers/qwen3/tokenizer.json")),
        "llama3_style": Tokenizer.from_file(str(OUT / "llama3_style/tokenizer.json")),
        "gpt2_style": Tokenizer.from_file(str(OUT / "gpt2_style/tokenizer.json")),
    }
    names = list(toks)
    make_fuzz(toks)

    # corpus goldens
    texts = [t for _, _, t in corpus]
    enc = {n: [e.ids for e in toks[n].encode_batch(texts, add_special_tokens=False)] for n in names}
    enc_sp = [e.ids for e in toks["llama3_style"].encode_batch(texts, add_special_tokens=True)]
    with open(OUT / "corpus.tsv", "w", encoding="utf-8") as f:
        f.write("# source\trow\ttext_fnv64\t" + "\t".join(names) + "\tllama3_style+special\n")
        for i, (src, row, text) in enumerate(corpus):
            cols = [src, str(row), f"{fnv1a64(text.encode('utf-8')):016x}"]
            for n in names:
                cols.append(f"{len(enc[n][i])}:{ids_hash(enc[n][i]):016x}")
            cols.append(f"{len(enc_sp[i])}:{ids_hash(enc_sp[i]):016x}")
            f.write("\t".join(cols) + "\n")
    with open(OUT / "corpus_ids.jsonl", "w", encoding="utf-8") as f:
        for i in range(0, len(corpus), 97):
            rec = {"index": i, "qwen2.5": enc["qwen2.5"][i], "llama3_style": enc["llama3_style"][i]}
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    # adversarial goldens
    cases = []
    for text in ADVERSARIAL:
        case = {"text": text}
        for n in names:
            t = toks[n]
            e = t.encode(text, add_special_tokens=False)
            es = t.encode(text, add_special_tokens=True)
            case[n] = {
                "ids": e.ids,
                "offsets": byte_offsets(text, e.offsets),
                "ids_special": es.ids,
                "offsets_special": byte_offsets(text, es.offsets),
                "decoded": t.decode(e.ids, skip_special_tokens=False),
                "decoded_skip": t.decode(es.ids, skip_special_tokens=True),
            }
        cases.append(case)
    info = {}
    for n in names:
        t = toks[n]
        probe = ["Ġthe", "hello", "<|im_end|>", "<|begin_of_text|>", "<mask>", "café", "Ġzerotune",
                 "not-a-token-xyz"]
        info[n] = {
            "vocab_size": t.get_vocab_size(with_added_tokens=True),
            "token_to_id": {p: t.token_to_id(p) for p in probe},
            "id_to_token": {str(i): t.id_to_token(i) for i in [0, 1, 255, 256, 1000,
                                                                 t.get_vocab_size() - 1]},
            "decode_cases": decode_cases(t, n),
        }
    doc = {"tokenizers": names, "info": info, "cases": cases}
    with open(OUT / "adversarial.json", "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(corpus)} corpus texts, {len(cases)} adversarial cases to {OUT}",
          file=sys.stderr)


if __name__ == "__main__":
    main()

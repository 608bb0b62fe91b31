"""The context-length sweep's plan as text (shared by bench/gpu_peer_transformers.py and
bench/sweep_table.py; imports nothing heavy): shapes 'SEQSxSEQ' and peer variants
'KIND:GC[@SHAPE+SHAPE…]'."""

# Peer variant kind -> the "system" its records carry (gpu_peer_transformers.py says what each is).
SYSTEMS = {"plain": "transformers", "liger": "transformers+liger",
           "plain32": "transformers fp32-master", "liger32": "transformers+liger fp32-master"}


def parse_shape(s):
    """'4x2048' -> (4, 2048) (sequences per micro-batch, tokens per sequence); ValueError otherwise."""
    try:
        n, t = (int(x) for x in s.strip().lower().split("x"))
    except ValueError:
        raise ValueError(f"shape {s!r}: expected SEQSxSEQ, e.g. 4x2048") from None
    if n <= 0 or t <= 0:
        raise ValueError(f"shape {s!r}: both numbers must be positive")
    return n, t


def parse_shapes(text):
    """'4x2048,1x8192' -> [(4, 2048), (1, 8192)]; an empty text gives []."""
    return [parse_shape(s) for s in text.split(",") if s.strip()]


def parse_variants(text, shapes):
    """'liger:1,liger:0@4x2048+1x8192' -> [(kind, gc, [(seqs, seq), …])]: a variant without @ runs
    at every shape of `shapes`. Refuses an unknown kind, a GC other than 0/1, and a plain/plain32
    variant after a Liger one (Liger's class patch cannot be undone in a process)."""
    out, seen_liger = [], False
    for item in filter(None, (x.strip() for x in text.split(","))):
        head, _, at = item.partition("@")
        kind, _, gc = head.partition(":")
        if kind not in SYSTEMS or gc not in ("0", "1"):
            raise ValueError(f"variant {item!r}: expected KIND:GC with KIND one of "
                             f"{', '.join(SYSTEMS)} and GC 0 or 1")
        if kind.startswith("liger"):
            seen_liger = True
        elif seen_liger:
            raise ValueError(f"variant {item!r} comes after a Liger variant: Liger's class patch "
                             "cannot be undone, list plain/plain32 variants first")
        out.append((kind, int(gc), [parse_shape(s) for s in at.split("+")] if at else shapes))
    return out

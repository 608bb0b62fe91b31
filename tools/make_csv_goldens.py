#!/usr/bin/env python3
"""Golden file for zerotune's CSV reader (tests/data_layer/test_csv_pandas.cpp): what HF `datasets`
gives for a `.csv` file, `datasets.load_dataset("csv", data_files=FILE, split="train")` — its csv
builder reads the file with `pandas.read_csv(FILE, iterator=True, chunksize=10_000)` (pandas'
defaults), turns each chunk into Arrow with `pa.Table.from_pandas` and casts every later chunk to
the first chunk's schema.

Run with the reference env (datasets 4.8.5, pandas 3.x):
  /work/venv-trl/bin/python tools/make_csv_goldens.py
Output: tests/data/csv/pandas_csv_cases.json — a list of cases, each
  {"name", "csv" (the file's text, written as UTF-8 bytes) or "generated" (a recipe name the test
   builds the same bytes from: see chunk_case below and its C++ twin), "zt_refuses" (true where
   zerotune deliberately refuses what datasets reads), and either
   {"columns": [names], "types": [Arrow type names], "num_rows": N,
    "rows": {"<row index>": {column: value}}} (every row for a small case, chosen rows for a
   generated one; an infinite float is {"float": "inf"} / {"float": "-inf"}) or {"error": first line of the underlying exception}}.
"""
import json
import math
import os
import tempfile
import warnings

warnings.filterwarnings("ignore")
import datasets  # noqa: E402
import pandas  # noqa: E402

datasets.disable_progress_bar()
datasets.logging.set_verbosity_error()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "csv",
                   "pandas_csv_cases.json")

NA = sorted(pandas._libs.parsers.STR_NA_VALUES)

SMALL = {
    "basic": "prompt,completion\nhi,there\nQ2,A2\n",
    "quoted_newline": 'prompt,completion\n"line1\nline2","say ""hi"", ok"\nb,c\n',
    "bom": "\ufeffprompt,completion\na,b\n",
    "bom_quoted": '\ufeff"prompt",completion\na,b\n',
    "crlf": "prompt,completion\r\na,b\r\n\r\nc,d\r\n",
    "cr_only": "prompt,completion\ra,b\rc,d\r",
    "no_final_newline": "prompt,completion\na,b\nc,d",
    "blank_lines_first": "\n\nprompt,completion\n\na,b\n\n",
    # every default NA spelling of pandas, and near misses that stay text
    "na_spellings": "prompt,completion\n" + "".join(f"q{i},{v}\n" for i, v in enumerate(
        ["text"] + NA[1:] + [" NA", "NAN", "na", "NONE", "none", "Null"])),
    "na_empty_first": "prompt,completion\nq0,\nq1,x\n",
    "quoted_na": 'prompt,completion\nq0,"NA"\nq1,"None"\nq2,""\nq3,x\n',
    "ints": "prompt,n\na,1\nb,007\nc,+3\nd,-0\ne, 5 \n",
    "ints_na": "prompt,n\na,1\nb,\nc,3\nd,NA\n",
    "uint64": "prompt,n\na,9223372036854775808\nb,1\n",
    "floats": "prompt,x\na,3.10\nb,1e5\nc, 2 \nd,inf\ne,-Infinity\nf,.5\ng,-0\nh,5.\n",
    "floats_na": "prompt,x\na,1.5\nb,nan\nc,\n",
    "num_and_text": "prompt,completion\na,1\nb,x\nc,2.50\nd,007\n",
    "bools": "prompt,flag\na,True\nb,false\nc,TRUE\nd,tRue\n",
    "bools_na": "prompt,flag\na,True\nb,\nc,False\n",
    "bool_and_text": "prompt,completion\na,True\nb,yes\nc,1\n",
    "all_empty_column": "prompt,completion,notes\na,b,\nc,d,\n",
    "dup_header": "prompt,note,note,completion\na,n1,n2,b\n",
    "dup_prompt": "prompt,completion,prompt\na,b,c\n",
    "two_unnamed": ",prompt,,completion\n1,a,2,b\n",
    "dup_mangle_collides": "x,x,x.1,completion\n1,2,3,c\n",
    "unnamed_collides": "a,a,,Unnamed: 2,completion\n1,2,3,4,c\n",
    "trailing_comma": "prompt,completion,\na,b,\nc,d,\n",
    "ws_line": "prompt,completion\na,b\n   \nc,d\n",
    "ws_trailing_line": "prompt,completion\na,b\n \t ",
    "tab_line": "prompt,completion\na,b\n\t\t\nc,d\n",
    "ws_in_fields": "prompt,completion\n  a , b\t\n \tx,y\n",
    "short_row": "prompt,completion,n\na,b,1\nc,d\ne\n",
    "long_row": "prompt,completion\na,b\nc,d,e\n",
    "index_col": "prompt,completion\n0,a,b\n1,c,d\n",
    "time_col": "prompt,completion\na,10:30\nb,12:30:00\n",
    "date_col": "prompt,completion\na,2024-01-01\nb,2024-02-29\n",
    "timestamp_col": "prompt,completion\na,2024-01-01T10:00:00\nb,2024-01-01 10:00:00+02:00\n",
    "quote_after": 'prompt,completion\n"ab"cd,x\n',
    "quote_mid": 'prompt,completion\nab"cd,x\n',
    "unterminated_quote": 'prompt,completion\na,"open\n',
    "header_only": "prompt,completion\n",
    "empty_file": "",
    "unicode": "prompt,completion\nh\u00e9llo,\u4f60\u597d\n",
}

# zerotune refuses these on purpose (see README): a row with more fields than the header.
REFUSED = {"long_row", "index_col"}


def chunk_case(name):
    """The generated cases: CSV text of more than 10,000 data rows (the csv builder's chunk)."""
    if name == "chunk_str_then_num":
        return "prompt,completion\n" + "".join(f"Question {i},answer {i}\n" for i in range(10000)) + \
            "".join(f"Q{i}: what number?,{'3.10' if i % 2 == 0 else '007'}\n" for i in range(10000))
    if name == "chunk_str_then_bool":
        return "prompt,completion\n" + "".join(f"Question {i},answer {i}\n" for i in range(10000)) + \
            "".join(f"Is {i} even?,{'True' if i % 2 == 0 else 'False'}\n" for i in range(10000))
    if name == "chunk_num_then_str":
        return "prompt,completion\n" + "".join(f"Q{i},{i}\n" for i in range(10000)) + \
            "".join(f"Q{i},word{i}\n" for i in range(5))
    if name == "chunk_empty_then_str_extra":
        return "prompt,completion,notes\n" + "".join(f"Q{i},A{i},\n" for i in range(10000)) + \
            "".join(f"Q{i},A{i},checked by reviewer\n" for i in range(10))
    if name == "chunk_int_then_na":  # ints with NA in chunk 2 are float64, cast back to int64
        return "prompt,n\n" + "".join(f"Q{i},{i}\n" for i in range(10000)) + \
            "".join(f"Q{i},{'' if i % 2 else i}\n" for i in range(10))
    if name == "chunk_blank_lines":  # blank and whitespace lines do not count in a chunk
        out = "prompt,completion\n"
        for i in range(10000):
            out += f"Question {i},answer {i}\n" + ("\n  \n" if i % 1000 == 0 else "")
        return out + "".join(f"Q{i},00{i}\n" for i in range(3))
    raise KeyError(name)


GENERATED = ["chunk_str_then_num", "chunk_str_then_bool", "chunk_num_then_str",
             "chunk_empty_then_str_extra", "chunk_int_then_na", "chunk_blank_lines"]


def plain(v):
    """A row value as JSON: an infinite float as {"float": "inf"} or {"float": "-inf"}."""
    if isinstance(v, float) and math.isnan(v):
        raise ValueError("NaN in rows")
    if isinstance(v, float) and math.isinf(v):
        return {"float": "inf" if v > 0 else "-inf"}
    return v


def load(text):
    d = tempfile.mkdtemp()
    path = os.path.join(d, "data.csv")
    with open(path, "wb") as f:
        f.write(text.encode("utf-8"))
    try:
        ds = datasets.load_dataset("csv", data_files=path, split="train",
                                   cache_dir=os.path.join(d, "cache"))
    except Exception as e:  # noqa: BLE001 — the golden records the reference's failure
        cause = e
        while cause.__cause__ is not None or cause.__context__ is not None:
            cause = cause.__cause__ or cause.__context__
        msg = str(cause).strip().splitlines()
        return {"error": f"{type(cause).__name__}: {msg[0] if msg else ''}"}
    schema = ds.data.table.schema
    return {"columns": schema.names, "types": [str(t) for t in schema.types],
            "num_rows": ds.num_rows, "all_rows": [{k: plain(v) for k, v in r.items()}
                                                  for r in ds.to_list()]}


def main():
    cases = []
    for name, text in SMALL.items():
        got = load(text)
        if "all_rows" in got:
            got["rows"] = {str(i): r for i, r in enumerate(got.pop("all_rows"))}
        cases.append({"name": name, "csv": text, "zt_refuses": name in REFUSED, **got})
    for name in GENERATED:
        got = load(chunk_case(name))
        if "all_rows" in got:
            rows = got.pop("all_rows")
            keep = sorted({0, 1, 9999, 10000, 10001, len(rows) - 1} & set(range(len(rows))))
            got["rows"] = {str(i): rows[i] for i in keep}
        cases.append({"name": name, "generated": name, "zt_refuses": False, **got})
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"datasets": datasets.__version__, "pandas": pandas.__version__, "cases": cases},
                  f, ensure_ascii=False, indent=1)
        f.write("\n")
    for c in cases:
        print(c["name"], c.get("error") or (c["columns"], c["types"], c["num_rows"]))


if __name__ == "__main__":
    main()

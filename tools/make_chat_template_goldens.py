#!/usr/bin/env python3
"""Golden files for zerotune's Jinja chat-template engine (tests/data/chat_template/).

Run with the golden env (transformers + jinja2, offline):
    /work/goldenv/bin/python tools/make_chat_template_goldens.py [--shared ../shared/data]

Writes
  hf_render.json   Qwen2.5 / Qwen3 tokenizer templates rendered by
                   `tokenizer.apply_chat_template(..., tokenize=False)` over hand-written
                   conversations (system/user/assistant/tool turns, tool calls, tools, reasoning),
                   rows of no_robots and kto_en_demo, with and without a generation prompt;
                   plus tests/data/chat_template/qwen_generation.jinja rendered with
                   transformers' `render_jinja_template(return_assistant_tokens_mask=True)`,
                   whose {% generation %} character spans are stored as UTF-8 byte offsets.
  constructs.json  small templates, one construct each, rendered by transformers' own compiled
                   jinja2 environment (`_cached_compile_jinja_template`: sandboxed, trim_blocks,
                   lstrip_blocks, HF tojson / raise_exception, AssistantTracker), with spans;
                   templates jinja2 rejects are recorded with the jinja2 error instead.
  render_input.jsonl / render_expected.jsonl
                   the input and expected stdout of `zerotune render --tokenizer <qwen3> FILE`.
"""
import argparse
import json
import os

from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import (
    _cached_compile_jinja_template,
    _render_with_assistant_indices,
    render_jinja_template,
)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "chat_template")


def byte_spans(text, spans):
    return [[len(text[:a].encode()), len(text[:b].encode())] for a, b in spans]


# ---------------------------------------------------------------- conversations
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city (°C)",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
            "days": {"type": "integer", "default": 1}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now", "description": "Time now", "parameters": {}}},
]

HAND = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi 'there' \"you\"\n"},
     {"role": "assistant", "content": "Hello! é 😀"}],
    [{"role": "user", "content": "Weather in Paris?"},
     {"role": "assistant", "content": "", "tool_calls": [
         {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
     {"role": "tool", "content": "{\"temp\": 20}"}, {"role": "tool", "content": "sunny"},
     {"role": "assistant", "content": "It is 20°C and sunny."}],
    [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"},
     {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nanswer"},
     {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2", "reasoning_content": "r2"}],
    [{"role": "user", "content": "x"},
     {"role": "assistant", "content": "calling", "tool_calls": [
         {"function": {"name": "f", "arguments": "{\"a\": 1}"}}, {"function": {"name": "g", "arguments": {}}}]},
     {"role": "tool", "content": "done"}, {"role": "user", "content": "<tool_response>\nok\n</tool_response>"}],
    # None-valued keys are dropped by transformers; `thinking` is aliased to reasoning_content.
    [{"role": "user", "content": "q", "name": None},
     {"role": "assistant", "content": "a", "tool_calls": None, "thinking": "let me think"}],
    [{"role": "system", "content": "s"}, {"role": "system", "content": "second system"},
     {"role": "user", "content": "u"}],
]


def shared_rows(shared):
    rows = [json.loads(l) for l in open(os.path.join(shared, "datasets/no_robots/test.expected_rows.jsonl"))]
    with_sys = [r["messages"] for r in rows if r["messages"][0]["role"] == "system"
                and len(json.dumps(r["messages"])) < 2500][:5]
    multi = [r["messages"] for r in rows if len(r["messages"]) >= 4 and r["messages"][0]["role"] != "system"
             and len(json.dumps(r["messages"])) < 2500][:3]
    plain = [r["messages"] for r in rows if len(r["messages"]) == 2 and len(json.dumps(r["messages"])) < 1500][:4]
    kto = json.load(open(os.path.join(shared, "datasets/messages/kto_en_demo.json")))
    kto = [r["messages"] for r in kto if len(json.dumps(r["messages"])) < 1500][:5]
    return ([("no_robots", m) for m in with_sys + multi + plain] + [("kto_en_demo", m) for m in kto])


def make_hf(shared):
    convs = [("hand", m) for m in HAND] + shared_rows(shared)
    toks = {name: AutoTokenizer.from_pretrained(os.path.join(shared, "tokenizers", name))
            for name in ("qwen2.5-instruct", "qwen3")}
    gen_template = open(os.path.join(OUT, "qwen_generation.jinja")).read()
    cases = []
    for ci, (source, msgs) in enumerate(convs):
        for tok_name, tok in toks.items():
            for agp in (False, True):
                variants = [({}, None)]
                if source == "hand":
                    variants.append(({}, TOOLS))
                if tok_name == "qwen3":
                    variants.append(({"enable_thinking": False}, None))
                for kwargs, tools in variants:
                    text = tok.apply_chat_template(msgs, tools=tools, add_generation_prompt=agp,
                                                   tokenize=False, **kwargs)
                    cases.append({"conversation": ci, "tokenizer": tok_name, "add_generation_prompt": agp,
                                  "tools": tools is not None, "kwargs": kwargs, "expected": text})
        # The {% generation %} template: text through apply_chat_template, spans through the
        # renderer apply_chat_template(return_assistant_tokens_mask=True) calls.
        tok = toks["qwen3"]
        for agp in (False, True):
            text = tok.apply_chat_template(msgs, chat_template=gen_template, add_generation_prompt=agp,
                                           tokenize=False)
            norm = [{k: v for k, v in m.items() if v is not None} for m in msgs]
            rendered, spans = render_jinja_template(
                conversations=[norm], chat_template=gen_template, return_assistant_tokens_mask=True,
                add_generation_prompt=agp, **tok.special_tokens_map)
            assert rendered[0] == text
            cases.append({"conversation": ci, "tokenizer": "qwen3", "template": "qwen_generation.jinja",
                          "add_generation_prompt": agp, "tools": False, "kwargs": {}, "expected": text,
                          "spans": byte_spans(text, spans[0])})
    return {"tools": TOOLS, "conversations": [{"source": s, "messages": m} for s, m in convs], "cases": cases}


# ---------------------------------------------------------------- constructs
MSGS = [{"role": "system", "content": "sys é"}, {"role": "user", "content": "hi 'x' \"y\"\n"},
        {"role": "assistant", "content": "ok 😀"}, {"role": "user", "content": "q"},
        {"role": "assistant", "content": "second"}]
CTX = {"messages": MSGS, "add_generation_prompt": True, "eos_token": "<|im_end|>"}

CONSTRUCTS = [
    # output and literals
    ("text_only", "plain text\nsecond line\n", {}),
    ("numbers", "{{ 1 }} {{ 1.0 }} {{ -2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 1e-5 }} {{ 0.0001 }} {{ 1e16 }} "
                "{{ 1e15 }} {{ 0.1 + 0.2 }} {{ 123456789012345678 }} {{ -0.0 }} {{ 0x1F }} {{ 0b101 }} "
                "{{ 0o17 }} {{ 1_000 }} {{ 1_0.5 }} {{ 2.5E3 }}", {}),
    ("constants", "{{ true }} {{ True }} {{ false }} {{ False }} {{ none }} {{ None }} [{{ undefined_var }}]", {}),
    ("strings", "{{ 'a' \"b\" 'c' }}|{{ '\\x41\\u00e9\\t|\\n|\\\\|\\'|\\\"' }}|{{ \"it's\" }}|{{ '\\101' }}", {}),
    ("repr", "{{ messages[0] }}|{{ [1, 2.0, 'a\\'', none, true] }}|{{ (1,) }}|{{ (1, 2) }}|{{ () }}|"
             "{{ [] }}|{{ {} }}|{{ {'k': {'n': [1]}} }}|{{ [undefined_var] }}|{{ 1, 'a' }}", CTX),
    ("repr_escapes", "{{ ['\\x00\\x7f\\u200b\\t\\u00a0é\\U0001F600'] }}|{{ ['\\''] }}|{{ ['\"'] }}|"
                     "{{ ['\\'\"'] }}|{{ ['\\\\'] }}|{{ ['\\r\\n'] }}", {}),
    # whitespace control with trim_blocks / lstrip_blocks
    ("ws_lstrip_trim", "  {% if true %}\n    yes\n  {% endif %}\n  after {{ 'x' }}\n{# comment #}\nend\n", {}),
    ("ws_minus", "{%- for m in messages -%}\n  {{- m.content | trim -}}\n{%- endfor %}\n", CTX),
    ("ws_plus", "a\n  {%+ if true %}x{% endif %}\n  {#- c -#}  \n b {{- ' c ' -}} d", {}),
    ("ws_tabs", "\t{% if true %}\tX\n\t\t{%- if true %}\n  Y  {{ 'v' }}\n   {# c #}\n   {{ 'w' }} {% endif %}\n"
                "{% endif %}\n", {}),
    ("ws_crlf", "line\r\n  {% if true %}\r\n  a\r\n  {% endif %}\r\nend\r\n\r\n", {}),
    ("ws_both", "{%- if true -%}\n\n  a  \n\n{%- endif -%}\n\nb\n", {}),
    ("ws_plus_end", "x {%+ if true +%}\n y{% endif %}\n", {}),
    ("ws_set_lines", "{%- set x = 'a' -%}   \n   {{- x -}}   \n  {% if x %}\n  yes\n  {%- endif %}", {}),
    ("comment_only", "{# only a comment #}", {}),
    ("raw", "{% raw %}{{ not rendered }} {% if %}{% endraw %}|{{ 'r' }}", {}),
    # if / for / loop
    ("if_elif_else", "{% if x is defined and x %}a{% elif 1 %}b{% else %}c{% endif %}"
                     "{% if 0 %}a{% elif 0 %}b{% else %}c{% endif %}{% if 1 %}d{% endif %}", {}),
    ("loop_vars", "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/"
                  "{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/"
                  "{{ loop.depth }}/{{ loop.nextitem.role if not loop.last }};{% endfor %}", CTX),
    ("loop_previtem", "{% for m in messages %}{% if not loop.first %}{{ loop.previtem.role }}>"
                      "{% endif %}{{ m.role }} {% endfor %}", CTX),
    ("loop_filter_else", "{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}"
                         "{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", CTX),
    ("loop_nested_cycle", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}"
                          "{{ loop.cycle('p','q') }}{% endfor %}{{ loop.index }}{% endfor %}", {}),
    ("loop_unpack", "{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }};{% endfor %}"
                    "{% for a, b in [[1, 2], (3, 4)] %}{{ a }}{{ b }}{% endfor %}", {}),
    ("loop_dict_str", "{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}{% for c in 'hé' %}[{{ c }}]{% endfor %}", {}),
    ("loop_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
                            "{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("loop_undefined", "{% for a in nothing %}x{% else %}empty{% endfor %}", {}),
    ("loop_scope", "{% set n = 0 %}{% for i in range(3) %}{{ n }}{% set n = n + i + 10 %}{{ n }},{% endfor %}{{ n }}", {}),
    ("loop_iteration_scope", "{% set y = 7 %}{% for i in range(3) %}{% if i == 1 %}{% set y = 5 %}"
                             "{% endif %}{{ y }}|{% endfor %}", {}),
    ("if_scope", "{% if true %}{% set z = 3 %}{% endif %}{{ z }}", {}),
    # set / namespace / with / filter blocks
    ("set_namespace", "{% set ns = namespace(a=1, b='x') %}{% for i in range(3) %}{% set ns.a = ns.a + i %}"
                      "{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns }}{{ namespace({'k': 1}, j=2).k }}", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}", {}),
    ("set_block", "{% set x %}block {{ 1 }}{% endset %}{{ x }}|{% set y | upper %}up{% endset %}{{ y }}", {}),
    ("filter_block", "{% filter upper %}filt {{ 'x' }}{% endfilter %}|{% filter replace('a', 'b') | title %}aa aa{% endfilter %}", {}),
    ("with_block", "{% set x = 1 %}{% with a = 1, b = 2 %}{{ a + b }}{% set x = 2 %}{{ x }}{% endwith %}{{ a }}{{ x }}", {}),
    ("print_tag", "{% print 'p', 1 %}", {}),
    ("reassign_context", "{% set messages = messages[1:] %}{{ messages | length }}", CTX),
    # macros and call blocks
    ("macro_basic", "{% macro f(a, b=2) %}[{{ a }}{{ b }}{{ caller() if caller }}]{% endmacro %}"
                    "{{ f(1) }}{% call f(3) %}body{% endcall %}{{ f(b=5, a=4) }}", {}),
    ("macro_varargs", "{% macro g() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ g(1, 2, x=3) }}", {}),
    ("macro_caller_args", "{% macro h() %}{{ caller(7) }}{% endmacro %}{% call(x) h() %}<{{ x }}>{% endcall %}", {}),
    ("macro_default_expr", "{% macro f(a, b=a+1) %}{{ a }}{{ b }}{% endmacro %}{{ f(1) }}{{ f(1, 5) }}", {}),
    ("macro_late_binding", "{% macro f() %}{{ g }}{% endmacro %}{% set g = 1 %}{{ f() }}{% set g = 2 %}{{ f() }}", {}),
    ("macro_namespace", "{% set ns = namespace(x=[]) %}{% macro add(v) %}{% set ns.x = ns.x + [v] %}"
                        "{% endmacro %}{{ add(1) }}{{ add(2) }}{{ ns.x }}", {}),
    ("macro_missing_param", "{% macro f(a, b) %}[{{ a }}|{{ b }}]{% endmacro %}{{ f(1) }}", {}),
    # expressions
    ("arith", "{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 }} {{ 2**-1 }} "
              "{{ 10.0**16 }} {{ 7.5 // 2 }} {{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ -7.5 % 2 }} {{ 2 ** 0.5 }} "
              "{{ 10 / 4 * 2 }} {{ true + 1 }} {{ 1.5 + true }} {{ 2 ** 3 ** 2 }} {{ -1 | abs }} {{ 3 - -2 }}", {}),
    ("arith_seq", "{{ [1,2] + [3] }}{{ (1,) + (2,) }}{{ 'ab' * 3 }}{{ 2 * [0] }}{{ 'a' + 'b' }}", {}),
    ("percent_format", "{{ '%s-%d-%.2f' % ('a', 3, 2.5) }}{{ '%5.1f|%-4s|%x|%%' | format(3.14159, 'ab', 255) }}"
                       "{{ '%s' % none }}{{ '%r' % 'q' }}{{ '%(a)s' % {'a': 1} }}", {}),
    ("logic", "{{ 1 and 2 }}{{ 0 and 2 }}{{ 0 or 'x' }}{{ '' or none }}{{ not 1 }}{{ not none }}"
              "{{ not x is defined }}{{ 1 if 0 else 2 if 0 else 3 }}[{{ 'a' if false }}]{{ 'a' if true else 'b' }}", {}),
    ("concat", "{{ 'a' ~ 1 ~ none ~ undefined_y ~ 1.0 ~ [1] }}", {}),
    ("compare", "{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ 'a' != 'b' }}{{ [1, 2] < [1, 3] }}{{ 'b' >= 'a' }}"
                "{{ none == none }}{{ x == y }}{{ 1 == true }}{{ 2 <= 2.0 }}", {}),
    ("membership", "{{ 'a' in 'abc' }}{{ 'x' not in ['x'] }}{{ 1 in [1.0] }}{{ 'role' in messages[0] }}"
                   "{{ 'k' in {'k': 1} }}{{ 1 in nothing }}", CTX),
    ("precedence", "{{ messages | length - 1 }}{{ 1 + 2 * 3 }}{{ (1 + 2) * 3 }}{{ -2 ** 2 }}"
                   "{{ 'a' ~ 2 * 3 }}{{ [1, 2, 3] | first + 1 }}", CTX),
    ("dict_literal", "{{ {'a': 1, 'a': 2} }}{{ {1: 'x', 'b': none}[1] }}{{ {'a': [1, 2]}.a[1] }}", {}),
    # attribute / item access and slices
    ("access", "{{ messages[0]['content'] }}{{ messages[-1].role }}[{{ messages[0]['nokey'] }}]"
               "{{ messages[0].nokey is defined }}{{ (1, 2).0 }}{{ [[1, 2]][0].1 }}[{{ messages[9] }}]"
               "[{{ none.foo }}][{{ none[0] }}]", CTX),
    ("dict_attr_vs_item", "{% set d = {'items': 5, 'k': 2} %}{{ d['items'] }}{{ d.k }}{{ d['k'] }}"
                          "{{ d.items() | list }}", {}),
    ("slices", "{{ 'abcdef'[1:4] }}{{ 'abcdef'[::-2] }}{{ [1,2,3][-1] }}{{ [1,2,3][1:] }}{{ (1,2,3)[::2] }}"
               "{{ [1,2,3][-2:] }}{{ [1,2,3][:-1] }}{{ 'abc'[-5:10] }}{{ [1,2,3][::-1] }}{{ 'héllo'[1:3] }}"
               "{{ 'héllo'[::-1] }}{{ 'héllo'[1] }}{{ messages[::-1] | map(attribute='role') | join(',') }}", CTX),
    # tests
    ("tests", "{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}"
              "{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ {} is mapping }}"
              "{{ [] is iterable }}{{ x is iterable }}{{ 'a' is sequence }}{{ 1 is sequence }}"
              "{{ true is boolean }}{{ true is true }}{{ false is false }}{{ 1 is true }}{{ 3 is odd }}"
              "{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 5 is divisibleby(2) }}{{ 2 is equalto 2 }}"
              "{{ 2 is eq 3 }}{{ 1 is not none }}{{ 3 is gt 2 }}{{ 3 is ge 3 }}{{ 1 is lt 2 }}{{ 1 is le 0 }}"
              "{{ 1 is ne 1 }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 2 is in [1, 2] }}{{ none is sameas none }}"
              "{{ 'upper' is filter }}{{ 'odd' is test }}{{ range is callable }}{{ 1 is callable }}", {}),
    # filters
    ("filters_str", "{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'aBc dEf' | upper }}|{{ 'aBc dEf' | lower }}|"
                    "{{ 'aBc dEf' | capitalize }}|{{ 'aBc dEf-gh(ij' | title }}|{{ 'aaa' | replace('a', 'b', 2) }}|"
                    "{{ 'a b' | replace(' ', '') }}|{{ 12 | string }}|{{ 'x' | safe }}|{{ '<a&\"\\'>' | e }}|"
                    "{{ 'ab' | center(6) }}|{{ 'a b c' | wordcount }}|{{ 'hello world foo' | truncate(9) }}|"
                    "{{ 'abc' | reverse }}|{{ 'ß' | upper }}|{{ 'ǆx' | title }}", {}),
    ("filters_indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|"
                       "{{ 'x' | indent(width='>>', first=true) }}|{{ 'a\\n\\nb' | indent(blank=true) }}", {}),
    ("filters_seq", "{{ [1,2] | length }}|{{ 'héllo' | count }}|{{ x | length }}|{{ [3,1,2] | sort }}|"
                    "{{ ['b','A','a'] | sort }}|{{ ['b','A','a'] | sort(case_sensitive=true) }}|"
                    "{{ [3, 1, 2] | sort(reverse=true) }}|{{ ['b','A','a'] | unique | list }}|"
                    "{{ [1,2,3] | first }}{{ [1,2,3] | last }}|{{ 'abc' | list }}|{{ [1,2] | reverse | list }}|"
                    "{{ [1,2,3] | sum }}{{ [1.5, 2] | sum(start=10) }}|{{ [1,2,3] | max }}{{ [1,2,3] | min }}|"
                    "{{ ['B', 'a'] | max }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ {'a':1} | items | list }}|"
                    "[{{ [] | first }}]", {}),
    ("filters_default", "{{ y | default('d') }}|{{ none | default('d') }}|{{ '' | d('e', true) }}|"
                        "{{ 0 | default(5, boolean=true) }}|{{ y | d }}", {}),
    ("filters_convert", "{{ '42' | int + 1 }}|{{ '4.5' | float }}|{{ 'x' | int }}|{{ '4.7' | int }}|{{ 3.9 | int }}|"
                        "{{ 'ff' | int(base=16) }}|{{ 'x' | float(default=1.5) }}|{{ 3.7 | round }}|{{ 2.5 | round }}|"
                        "{{ 2.675 | round(2) }}|{{ 42 | round }}|{{ 2.1 | round(0, 'ceil') }}|{{ 2.19 | round(1, 'floor') }}", {}),
    ("filters_join", "{{ [1, 'a', none, true, 1.5] | join('-') }}|{{ messages | join(',', attribute='role') }}|"
                     "{{ x | join }}", CTX),
    ("filters_map_select", "{{ [1,2,3,4] | select('odd') | list }}{{ [1,2,3,4] | reject('odd') | list }}"
                           "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}"
                           "{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | list }}"
                           "{{ ['a','b'] | map('upper') | list }}{{ ['a b'] | map('replace', ' ', '_') | list }}"
                           "{{ messages | map(attribute='missing', default='d') | list }}"
                           "{{ messages | selectattr('role') | list | count }}{{ [0, 1, '', 'x', none] | select | list }}"
                           "{{ [1,2,3] | select('>', 1) | list }}{{ [1,2,3] | select('in', [1,3]) | list }}"
                           "{{ messages | sort(attribute='role') | map(attribute='role') | list }}"
                           "{{ [{'a': 2}, {'a': 1}] | map(attribute='a') | max }}", CTX),
    ("tojson", "{{ {'a': 1, 'b': [1, 2.5, none, true]} | tojson }}|{{ {'a': 'é\"\\n\\t<>&'} | tojson(indent=2) }}|"
               "{{ [1,[2,{}],[]] | tojson(indent=2) }}|{{ 'é😀' | tojson(ensure_ascii=true) }}|"
               "{{ {'b':1,'a':2} | tojson(sort_keys=true, separators=[',', ':']) }}|{{ 1.0 | tojson }}|"
               "{{ 1e100 | tojson }}|{{ {1: 2, none: 3, true: 4} | tojson }}|{{ (1, 2) | tojson }}|"
               "{{ messages[0] | tojson(indent='\\t') }}|{{ 'x' | tojson(4) }}", CTX),
    # methods
    ("str_methods", "{{ 'Hello World'.startswith('Hell') }}{{ 'abc'.endswith(('x','c')) }}{{ 'a,b,,c'.split(',') }}"
                    "{{ ' a  b '.split() }}{{ 'a b c'.rsplit(' ', 1) }}{{ 'a b c'.split(' ', 1) }}{{ '  x '.strip() }}"
                    "{{ 'xxa'.lstrip('x') }}{{ 'axx'.rstrip('x') }}{{ 'aXa'.replace('a','b') }}{{ 'ab'.upper() }}"
                    "{{ 'AB'.lower() }}{{ 'abcb'.find('b') }}{{ 'abcb'.rfind('b') }}{{ 'abcb'.find('z') }}"
                    "{{ 'abcb'.count('b') }}{{ 'hello world'.title() }}{{ 'abc'.capitalize() }}{{ 'héllo'.find('l') }}", {}),
    ("str_methods2", "{{ 'a\\nb\\r\\nc'.splitlines() }}{{ 'a,b'.partition(',') }}{{ 'ab'.center(7, '*') }}"
                     "{{ 'x'.ljust(3) }}|{{ 'x'.rjust(3, '.') }}{{ '5'.zfill(3) }}{{ '-5'.zfill(4) }}"
                     "{{ 'abc'.removeprefix('a') }}{{ 'abc'.removesuffix('c') }}{{ ' '.join(['a','b']) }}"
                     "{{ 'aBc'.isupper() }}{{ 'ABC'.isupper() }}{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}"
                     "{{ '  '.isspace() }}{{ 'éA'.upper() }}{{ 'ΟΔΟΣ'.lower() }}{{ 'ßa'.capitalize() }}{{ 'ﬁx'.upper() }}", {}),
    ("str_format", "{{ '{} {x}'.format(1, x=2) }}|{{ '{:>5}|{:<4}|{:^6}|{:.2f}|{:05d}|{!r}'.format('ab', 'c', 'mid', "
                   "3.14159, 42, 'q') }}|{{ '{0}{1}{0}'.format('a', 'b') }}|{{ '{{x}}'.format() }}", {}),
    ("dict_methods", "{{ {'a':1}.items() | list }}{{ {'a':1}.keys() | list }}{{ {'a':1}.values() | list }}"
                     "{{ {'a':1}.get('a') }}{{ {'a':1}.get('b', 5) }}{{ {'a':1}.get('b') }}{{ [1, 2, 1].count(1) }}"
                     "{{ [1, 2].index(2) }}", {}),
    # globals
    ("globals", "{{ dict(a=1, b=2) }}{{ dict({'x': 1}, y=2) }}{{ dict([('p', 1)]) }}{{ range(3) | list }}"
                "{{ range(2, 10, 3) | list }}{{ range(3, 0, -1) | list }}{{ bos_token is defined }}{{ eos_token }}", CTX),
    # generation spans
    ("generation_top", "{% generation %}abc{% endgeneration %}x{% for m in messages %}{% if m.role == 'assistant' %}"
                       "{% generation %}{{ m.content }}é{% endgeneration %}{% endif %}{% endfor %}", CTX),
    ("generation_in_macro", "{% macro m(x) %}[{% generation %}{{ x }}{% endgeneration %}]{% endmacro %}"
                            "pre{{ m('a') }}{{ m('bb') }}", {}),
    ("generation_nested", "{% set s %}xx{% generation %}yy{% endgeneration %}{% endset %}ab{{ s }}"
                          "{% generation %}{% generation %}in{% endgeneration %}out{% endgeneration %}", {}),
    ("generation_scope", "{% generation %}{% set q = 1 %}{{ q }}{% endgeneration %}[{{ q }}]", {}),
    ("generation_ws", "{%- for m in messages %}\n  {%- generation -%}\n    {{ m.role }}\n  {%- endgeneration %}\n"
                      "{% endfor %}", CTX),
    # templates jinja2 rejects (the engine must raise too)
    ("err_unknown_tag", "line1\n{% foo %}", {}),
    ("err_unknown_filter", "\n\n{{ 1 | nosuchfilter }}", {}),
    ("err_unknown_test", "{{ 1 is nosuchtest }}", {}),
    ("err_unclosed", "{% if true %}no end", {}),
    ("err_bad_end", "{% for x in [1] %}{% endif %}", {}),
    ("err_raise", "a\n{{ raise_exception('boom: ' ~ 1) }}", {}),
    ("err_undefined_attr", "{{ x.y }}", {}),
    ("err_undefined_call", "{{ nofn() }}", {}),
    ("err_unsafe", "{{ messages.append(1) }}", CTX),
    ("err_type", "{{ 1 < 'a' }}", {}),
    ("err_concat", "{{ 'a' + 1 }}", {}),
    ("err_zero", "{{ 1 / 0 }}", {}),
    ("err_not_iterable", "{% for a in none %}{% endfor %}", {}),
    ("err_tojson_undefined", "{{ x | tojson }}", {}),
    ("err_ns_underscore", "{% set ns = namespace() %}{% set ns._x = 1 %}", {}),
    ("err_not_namespace", "{% set y = 5 %}{% set y.a = 1 %}", {}),
    ("err_unterminated", "{{ 'abc }}", {}),
]


def make_constructs():
    out, bad = [], []
    for name, tpl, ctx in CONSTRUCTS:
        case = {"name": name, "template": tpl, "context": ctx}
        try:
            compiled = _cached_compile_jinja_template(tpl)
            c = dict(ctx)
            msgs = c.pop("messages", [])
            agp = c.pop("add_generation_prompt", False)
            text, spans = _render_with_assistant_indices(compiled, msgs, None, None, agp, **c)
            case["text"] = text
            case["spans"] = byte_spans(text, spans)
        except Exception as e:  # noqa: BLE001 - any jinja2 failure is the expectation
            case["jinja2_error"] = f"{type(e).__name__}: {e}"
        if name.startswith("err_") != ("jinja2_error" in case):
            bad.append(f"case {name}: unexpected outcome {case.get('jinja2_error', case.get('text'))!r}")
        out.append(case)
    if bad:
        raise SystemExit("\n".join(bad))
    return out


def make_cli(hf):
    """`zerotune render` input: hand conversations with the qwen3 tokenizer."""
    inputs, expected = [], []
    for c in hf["cases"]:
        conv = hf["conversations"][c["conversation"]]
        if c["tokenizer"] != "qwen3" or c.get("template") or conv["source"] != "hand":
            continue
        row = {"messages": conv["messages"], "add_generation_prompt": c["add_generation_prompt"]}
        if c["tools"]:
            row["tools"] = hf["tools"]
        row.update(c["kwargs"])
        inputs.append(json.dumps(row, ensure_ascii=False))
        expected.append(json.dumps(c["expected"], ensure_ascii=False))
    return inputs, expected


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    args = ap.parse_args()
    hf = make_hf(args.shared)
    with open(os.path.join(OUT, "hf_render.json"), "w") as f:
        json.dump(hf, f, ensure_ascii=False, indent=1)
    with open(os.path.join(OUT, "constructs.json"), "w") as f:
        json.dump(make_constructs(), f, ensure_ascii=False, indent=1)
    inputs, expected = make_cli(hf)
    with open(os.path.join(OUT, "render_input.jsonl"), "w") as f:
        f.write("\n".join(inputs) + "\n")
    with open(os.path.join(OUT, "render_expected.jsonl"), "w") as f:
        f.write("\n".join(expected) + "\n")
    print(f"{len(hf['cases'])} HF renders, {len(CONSTRUCTS)} constructs, {len(inputs)} CLI rows")


if __name__ == "__main__":
    main()

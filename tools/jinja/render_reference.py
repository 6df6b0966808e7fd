#!/usr/bin/env python3
"""Reference outputs for rewind's Jinja interpreter, rendered by Python jinja2 the way HF transformers does.

Renders every tests/data/chat_templates/*.jinja against every conversation in conversations.json (with and
without the generation prompt), plus the small snippets below, and writes expected.json. The environment
copies transformers' chat-template setup: ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with loop controls and the {% generation %} tag, `tojson` redefined as json.dumps(ensure_ascii=False, ...),
`raise_exception` and `strftime_now` globals, and tools/documents passed as None when absent.

Usage: python3 tools/jinja/render_reference.py [--data tests/data/chat_templates]
"""
import argparse
import glob
import json
import os
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

BOS_TOKEN = "<|bos|>"
EOS_TOKEN = "<|eos|>"


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # transformers' override: jinja2's own tojson escapes HTML characters and sorts keys.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


class AssistantTracker(Extension):
    """transformers' {% generation %} tag (it marks assistant text for training masks); renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, context):
    try:
        return {"output": env.from_string(source).render(**context)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": str(e), "error_kind": "syntax"}
    except jinja2.exceptions.UndefinedError as e:
        return {"error": str(e), "error_kind": "undefined"}
    except jinja2.exceptions.TemplateError as e:  # raise_exception
        return {"error": str(e), "error_kind": "raised"}
    except Exception as e:  # TypeError, ZeroDivisionError, ...
        return {"error": f"{type(e).__name__}: {e}", "error_kind": "runtime"}


# (template, context): the interpreter's own semantics, one feature at a time.
SNIPPETS = [
    ("{{ 1 + 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 3 / 2 }}|{{ 4 / 2 }}|{{ 2 ** 10 }}", {}),
    ("{{ 1.5 + 1 }}|{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 1e-5 }}|{{ 123456789.0 * 10 }}|{{ 2.5 * 2 }}|{{ -0.0 }}", {}),
    ("{{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ [1, 2] + [3] }}|{{ 'x' + 'y' }}", {}),
    ("{{ 1 == 1.0 }}|{{ true == 1 }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}|{{ none == none }}", {}),
    ("{{ 'b' in 'abc' }}|{{ 2 in [1, 2] }}|{{ 'k' in {'k': 1} }}|{{ 'z' not in 'abc' }}|{{ x in undefined_name }}", {"x": 1}),
    ("{{ a and b }}|{{ a or b }}|{{ not a }}|{{ '' or 'fallback' }}|{{ 0 and 1 }}|{{ none or [] }}", {"a": "A", "b": ""}),
    ("{{ 'yes' if flag else 'no' }}|{{ 'only' if not flag }}|[{{ 'x' if false }}]", {"flag": True}),
    ("{{ [1, 'a', none, true, 1.5, {'k': 'v', 'n': [1]}] }}|{{ {'q': \"it's\"} }}|{{ (1, 2) | list }}", {}),
    ("{{ s[0] }}|{{ s[-1] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ l[1:] }}|{{ l[:-1] }}|{{ l[-2:] }}|{{ l[10:] }}|{{ l[::-1] }}",
     {"s": "héllo", "l": [1, 2, 3, 4]}),
    ("{{ m.a }}|{{ m['b'] }}|{{ m.missing }}|{{ m.get('a') }}|{{ m.get('zz', 'dflt') }}|{{ m.get('zz') }}|{{ l.0 }}",
     {"m": {"a": 1, "b": 2}, "l": ["first"]}),
    ("{% for k, v in m.items() %}{{ k }}={{ v }};{% endfor %}|{{ m.keys() | list }}|{{ m.values() | list }}|{% for k in m %}{{ k }}{% endfor %}",
     {"m": {"z": 1, "a": 2}}),
    ("{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}",
     {"xs": ["a", "b", "c"]}),
    ("{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}",
     {"xs": [1, 2, 3]}),
    ("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}|{{ range(3) | list }}|{{ range(1, 10, 3) | list }}", {}),
    ("{% for x in [1, 2] %}{% for y in 'ab' %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{{ loop.index }}{% endfor %}|{{ loop is defined }}", {}),
    ("{% set y = 5 %}{% for x in [1, 2] %}{{ y }}{% set y = x %}{{ y }}{% endfor %}{{ y }}", {}),
    ("{% set ns = namespace(count=0, items=[]) %}{% for x in [1, 2, 3] %}{% set ns.count = ns.count + x %}{% set ns.items = ns.items + [x] %}{% endfor %}{{ ns.count }}{{ ns.items }}", {}),
    ("{% set a, b = [1, 2] %}{{ a }}{{ b }}|{% set t %}block {{ a }}\n{% endset %}[{{ t }}]|{% set x = 'v' %}{{ x | upper }}", {}),
    ("{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }}|{{ greet('B', '?') }}|{{ greet(punct='.', name='C') }}", {}),
    ("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3) }}|{{ m(1, z=5) }}|{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}inside{% endcall %}", {}),
    ("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'Hello' | length }}|{{ [1, 2] | length }}|{{ 'MiXed' | lower }}|{{ 'MiXed' | upper }}", {}),
    ("{{ 'hello wORLD-foo (bar)' | title }}|{{ 'hELLO wORLD' | capitalize }}|{{ 'a-b-c' | replace('-', '+') }}|{{ 'aaa' | replace('a', 'b', 2) }}", {}),
    ("{{ [1, 2, 3] | join(', ') }}|{{ users | join(',', attribute='name') }}|{{ [3, 1, 2] | first }}|{{ [3, 1, 2] | last }}|{{ 'abc' | first }}",
     {"users": [{"name": "x"}, {"name": "y"}]}),
    ("{{ missing | default('d') }}|{{ '' | default('e') }}|{{ '' | default('e', true) }}|{{ none | default('n') }}|{{ 42 | string }}|{{ '42' | int + 1 }}|{{ '4.7' | int }}|{{ 'x' | int }}|{{ 3.9 | int }}", {}),
    ("{{ 'abc' | list }}|{{ {'a': 1, 'b': 2} | items | list }}|{{ [3, 1, 2] | sort }}|{{ ['b', 'A', 'c'] | sort }}|{{ [3, 1, 2] | sort(reverse=true) }}|{{ ['b', 'A', 'a'] | unique | list }}|{{ [1, 2] | reverse | list }}|{{ 'abc' | reverse }}", {}),
    ("{{ items | selectattr('on') | map(attribute='n') | list }}|{{ items | rejectattr('on') | map(attribute='n') | list }}|{{ items | selectattr('n', 'equalto', 'b') | list | length }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ ['a', 'B'] | map('upper') | list }}|{{ items | sort(attribute='n', reverse=true) | map(attribute='n') | join }}",
     {"items": [{"n": "a", "on": True}, {"n": "b", "on": False}, {"n": "c", "on": True}]}),
    ("{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ x | tojson(separators=(',', ':')) }}|{{ x | tojson(sort_keys=true) }}|{{ 'é\"\\n\\t\\u0001' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}",
     {"x": {"b": [1, 2.5, None, True, {}], "a": "ü", "c": [], "d": {"e": "f"}}}),
    ("{{ 3 | tojson }}|{{ 1.0 | tojson }}|{{ [] | tojson(indent=4) }}|{{ {'k': [1, {'z': []}]} | tojson(indent=4) }}|{{ none | tojson }}", {}),
    ("{{ 'Hello World'.startswith('Hell') }}|{{ 'x.py'.endswith(('.js', '.py')) }}|{{ '  s  '.strip() }}|{{ 'xxsxx'.lstrip('x') }}|{{ 'xxsxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ '  a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}", {}),
    ("{{ 'AbC'.upper() }}|{{ 'AbC'.lower() }}|{{ 'aXbX'.replace('X', '-') }}|{{ 'hello'.find('l') }}|{{ 'hello'.count('l') }}|{{ '-'.join(['a', 'b']) }}|{{ 'one\\ntwo'.splitlines() }}", {}),
    ("{{ x is defined }}|{{ y is defined }}|{{ y is undefined }}|{{ n is none }}|{{ x is string }}|{{ m is mapping }}|{{ l is sequence }}|{{ x is sequence }}|{{ m is iterable }}|{{ 3 is number }}|{{ true is number }}|{{ 2.5 is float }}|{{ 3 is integer }}",
     {"x": "s", "n": None, "m": {}, "l": []}),
    ("{{ true is true }}|{{ 1 is true }}|{{ false is false }}|{{ 3 is odd }}|{{ 4 is even }}|{{ 9 is divisibleby 3 }}|{{ 'a' is in ['a'] }}|{{ 'a' is in 'cat' }}|{{ x is not none }}|{{ 'abc' is lower }}|{{ 2 is eq 2 }}|{{ 3 is gt 2 }}", {"x": 0}),
    ("{{ 'a\\tb' }}|{{ \"q'uote\" }}|{{ 'back\\\\slash' }}|{{ '\\u00e9\\x41' }}|{{ 'con' 'cat' }}|{{ 'unknown \\d escape' }}", {}),
    ("a  {# comment #}  b|{#- strip -#}  c", {}),
    ("line1\n  {% if true %}\n  inside\n  {% endif %}\nline2\n", {}),
    ("  {{ 'expr keeps indent' }}\n{%- if true %}  x{% endif -%}  \n  y  {%+ if true %}z{% endif %}", {}),
    ("{% for i in [1, 2] %}\n  - {{ i }}\n{% endfor %}\n{%- raw %}{{ not evaluated }}{% endraw %}", {}),
    ("{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}|{% if not a and not b %}none{% endif %}", {"a": False, "b": False, "c": True}),
    ("{{ messages[-1].content }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ (messages | last).role }}",
     {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]}),
    ("{{ 'x' | indent(2) }}|{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(4, first=true) }}|{{ 'a\\n\\nb' | indent('> ', blank=true) }}", {}),
    ("{{ [1, 5, 3] | max }}|{{ [1, 5, 3] | min }}|{{ [1, 2, 3] | sum }}|{{ -3 | abs }}|{{ 'aBc' | wordcount }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ [1, 2] | count }}", {}),
    ("{{ none }}|{{ true }}|{{ undefined_value }}|{{ m }}|{{ ns }}", {"m": {"a": None}, "ns": None}),
    ("{% set ns = namespace(a=1) %}{{ ns.a }}{{ ns.missing is defined }}{% set ns.b = 'x' %}{{ ns.b }}|{{ dict(a=1, b='2') }}", {}),
    ("{% filter upper %}shout {{ 'this' }}{% endfilter %}|{{ x | default('d') | upper }}|{{ -x | abs if x is defined else 'u' }}", {}),
    ("{% generation %}kept{% endgeneration %}", {}),
    # Whitespace control corners: trim_blocks/lstrip_blocks against -, +, comments, expressions, CRLF.
    ("{% if true %}  \n  x{% endif %}|a\n{%- if true -%}\n b \n{%- endif %}\nc|{{- 'a' -}}   {{- 'b' }}", {}),
    ("  {#- c #}\nx|{% for x in [1, 2] -%}\n  {{ x }}\n{%- endfor %}|x\n    {%+ if true %}y{% endif %}", {}),
    ("{% if true %}a{% endif %}\n\n{% if true %}b{% endif %}\n", {}),
    ("{ not a tag } {{ '{' }} {{ '}}' }} {{ {'a': {'b': 1}} }} {{ {'a': {'b': 1}}['a'] }}", {}),
    ("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n  c\r\n", {}),
    ("\t{% if true %}\t\n{{ 'x' }}  {% endif %}  \n{% set y = 1 %}  after", {}),
    ("{%- macro m() -%}\n  body\n{%- endmacro -%}\n[{{ m() }}]\n{# trailing #}\n", {}),
    # Errors: undefined attribute chains, type errors, raise_exception, syntax.
    ("{{ undefined_value.attribute }}", {}),
    ("{{ m.missing.deeper }}", {"m": {}}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ 1 // 0 }}", {}),
    ("{{ raise_exception('Only user and assistant roles are supported!') }}", {}),
    ("{% if x %}{{ raise_exception('x is set: ' ~ x) }}{% endif %}", {"x": "yes"}),
    ("{{ x | no_such_filter }}", {"x": 1}),
    ("{{ x is no_such_test }}", {"x": 1}),
    ("{% if x %}unterminated", {"x": 1}),
    ("{{ 'unterminated", {}),
    ("{{ x ", {}),
    ("{% for x in y %}{% endif %}", {}),
    ("{% unknown_tag %}", {}),
    ("{% set x = [].append(1) %}", {}),
    ("{% set m = {} %}{% set m.x = 1 %}", {}),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--data", default=os.path.join(here, "..", "..", "tests", "data", "chat_templates"))
    args = parser.parse_args()
    env = make_env()
    with open(os.path.join(args.data, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)["conversations"]
    renders = []
    for path in sorted(glob.glob(os.path.join(args.data, "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for conversation in conversations:
            for add_generation_prompt in (False, True):
                context = {
                    "messages": conversation["messages"],
                    "tools": conversation.get("tools"),
                    "documents": conversation.get("documents"),
                    "add_generation_prompt": add_generation_prompt,
                    "bos_token": BOS_TOKEN,
                    "eos_token": EOS_TOKEN,
                    **conversation.get("template_kwargs", {}),
                }
                entry = {"template": os.path.basename(path), "conversation": conversation["name"],
                         "add_generation_prompt": add_generation_prompt}
                entry.update(render(env, source, context))
                renders.append(entry)
    snippets = []
    for source, context in SNIPPETS:
        entry = {"template": source, "context": context}
        entry.update(render(env, source, context))
        snippets.append(entry)
    expected = {
        "generator": "tools/jinja/render_reference.py",
        "jinja2_version": jinja2.__version__,
        "environment": "ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, generation tag, loopcontrols), "
                       "HF tojson, raise_exception, strftime_now",
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "renders": renders,
        "snippets": snippets,
    }
    with open(os.path.join(args.data, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")
    n_errors = sum(1 for entry in renders + snippets if "error" in entry)
    print(f"{len(renders)} renders, {len(snippets)} snippets ({n_errors} expected errors) -> expected.json")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The Jinja oracle: renders chat templates with Debian's python3-jinja2 configured exactly as
Hugging Face transformers configures it (transformers/utils/chat_template_utils.py,
_compile_jinja_template): an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks,
the loopcontrols extension and the {% generation %} tag, transformers' tojson filter and its
raise_exception / strftime_now globals.

Usage: jinja_oracle.py CASES.json OUT.json
CASES.json: [{"template": str, "vars": {...}, "now": unix seconds}]
OUT.json:   [{"ok": rendered} | {"error": message}] in the same order.
"""
import datetime
import json
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    # transformers' extension: {% generation %}...{% endgeneration %} renders its body.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def render_case(case):
    now = datetime.datetime.fromtimestamp(case["now"])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return now.strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        return {"ok": env.from_string(case["template"]).render(**case["vars"])}
    except Exception as e:  # noqa: BLE001 - every failure is an expected outcome to compare
        return {"error": str(e), "kind": type(e).__name__}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    out = [render_case(c) for c in cases]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

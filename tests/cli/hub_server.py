#!/usr/bin/env python3
"""A Hub-shaped HTTP server on loopback for tests/cli/hub.sh: the revision API and resolve URLs of
the Hugging Face Hub, serving configs from kernels/circuits/configs/ and safetensors shards whose
headers are synthesized from the config (dense GQA tensor names; F8_E4M3 Linear weights with
scales when the stored config has a modelopt hf_quant_config.json) and whose data is virtual zeros.
Range requests get 206; every response's path, range and body bytes are appended to LOG as JSON
lines, so the test can prove that only header bytes left the server.
Usage: hub_server.py CONFIGS_DIR PORT_FILE LOG_FILE"""
import http.server
import json
import os
import struct
import sys

configs_dir, port_file, log_file = sys.argv[1], sys.argv[2], sys.argv[3]
TOKEN = "hf_test_secret_token_123"
SHA = {"hub-test/Qwen3-8B": "1" * 40, "hub-test/Gated": "2" * 40, "hub-test/NoRange": "3" * 40, "hub-test/Llama-FP8": "4" * 40}
SOURCE = {"hub-test/Qwen3-8B": "Qwen--Qwen3-8B", "hub-test/Gated": "Qwen--Qwen3-0.6B", "hub-test/NoRange": "Qwen--Qwen3-0.6B",
          "hub-test/Llama-FP8": "nvidia--Llama-3.1-70B-Instruct-FP8"}
SHARDS = 2


def tensors(config, quant):
    """name -> (dtype, shape). With a modelopt FP8 sidecar the Linear weights are F8_E4M3 with F32
    weight and input scales, as nvidia's FP8 checkpoints ship them."""
    c = config
    h, inter, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = c.get("head_dim", h // c["num_attention_heads"])
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    t = {"model.embed_tokens.weight": ("BF16", [v, h]), "model.norm.weight": ("BF16", [h])}
    if not c.get("tie_word_embeddings", False):
        t["lm_head.weight"] = ("BF16", [v, h])
    linear = "F8_E4M3" if quant else "BF16"
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        parts = [("input_layernorm", [h], False), ("post_attention_layernorm", [h], False), ("self_attn.q_proj", [q, h], True),
                 ("self_attn.k_proj", [kv, h], True), ("self_attn.v_proj", [kv, h], True), ("self_attn.o_proj", [h, q], True),
                 ("mlp.gate_proj", [inter, h], True), ("mlp.up_proj", [inter, h], True), ("mlp.down_proj", [h, inter], True)]
        if c.get("model_type") == "qwen3":
            parts += [("self_attn.q_norm", [hd], False), ("self_attn.k_norm", [hd], False)]
        for name, shape, is_linear in parts:
            t[p + name + ".weight"] = (linear if is_linear else "BF16", shape)
            if quant and is_linear:
                t[p + name + ".weight_scale"] = ("F32", [])
                t[p + name + ".input_scale"] = ("F32", [])
    return t


BYTES = {"BF16": 2, "F32": 4, "F8_E4M3": 1}


def build_repo(source):
    config_text = open("%s/%s/config.json" % (configs_dir, source), "rb").read()
    config = json.loads(config_text)
    files = {"config.json": (config_text, 0)}
    quant = os.path.exists("%s/%s/hf_quant_config.json" % (configs_dir, source))
    if quant:
        files["hf_quant_config.json"] = (open("%s/%s/hf_quant_config.json" % (configs_dir, source), "rb").read(), 0)
    names = sorted(tensors(config, quant).items())
    weight_map = {}
    per = (len(names) + SHARDS - 1) // SHARDS
    for k in range(SHARDS):
        shard = "model-%05d-of-%05d.safetensors" % (k + 1, SHARDS)
        header, offset = {}, 0
        for name, (dtype, shape) in names[k * per:(k + 1) * per]:
            n = BYTES[dtype]
            for d in shape:
                n *= d
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
            weight_map[name] = shard
            offset += n
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        files[shard] = (struct.pack("<Q", len(text)) + text, offset)  # (bytes held, virtual zero tail)
    index = json.dumps({"metadata": {"total_size": sum(z for _, z in files.values())}, "weight_map": weight_map}).encode()
    files["model.safetensors.index.json"] = (index, 0)
    return files


REPOS = {repo: build_repo(src) for repo, src in SOURCE.items()}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, status, sent, rng=None):
        with open(log_file, "a") as f:
            f.write(json.dumps({"path": self.path, "status": status, "range": rng, "sent": sent,
                                "auth": self.headers.get("Authorization") is not None}) + "\n")

    def reply(self, status, body, extra=None):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.record(status, len(body), (extra or {}).get("Content-Range"))

    def do_GET(self):
        parts = self.path.split("/")
        if self.path.startswith("/api/models/") and len(parts) == 7 and parts[5] == "revision":
            repo = parts[3] + "/" + parts[4]
        elif len(parts) == 6 and parts[3] == "resolve":
            repo = parts[1] + "/" + parts[2]
        else:
            return self.reply(404, b'{"error":"not found"}')
        if repo not in REPOS:
            return self.reply(404, b'{"error":"Repository not found"}')
        if repo == "hub-test/Gated" and self.headers.get("Authorization") != "Bearer " + TOKEN:
            return self.reply(401, b'{"error":"Access to model hub-test/Gated is restricted"}')
        files = REPOS[repo]
        if parts[1] == "api":
            body = json.dumps({"id": repo, "sha": SHA[repo], "siblings": [{"rfilename": n} for n in sorted(files)]}).encode()
            return self.reply(200, body, {"Content-Type": "application/json"})
        if parts[4] != SHA[repo] or parts[5] not in files:
            return self.reply(404, b'{"error":"Entry not found"}')
        held, tail = files[parts[5]]
        total = len(held) + tail
        rng = self.headers.get("Range")
        if rng and repo != "hub-test/NoRange":
            first, last = rng.replace("bytes=", "").split("-")
            first, last = int(first), min(int(last), total - 1)
            body = (held + b"\0" * max(0, last + 1 - len(held)))[first:last + 1]
            return self.reply(206, body, {"Content-Range": "bytes %d-%d/%d" % (first, last, total)})
        # The whole file, streamed: what a server that ignores Range would send. The client must stop it.
        self.send_response(200)
        self.send_header("Content-Length", str(total))
        self.end_headers()
        sent = 0
        try:
            self.wfile.write(held)
            sent += len(held)
            chunk = b"\0" * 65536
            while sent < total:
                n = min(len(chunk), total - sent)
                self.wfile.write(chunk[:n])
                sent += n
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.record(200, sent)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()

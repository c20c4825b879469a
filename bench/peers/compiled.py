#!/usr/bin/env python3
"""The compiled PyTorch peer: a short decoder written here for the Llama and Qwen3 architectures, read
from a checkpoint made by `met model synth` (config.json + *.safetensors, bf16), with a static KV cache,
its decode step compiled by torch.compile and captured by hand in a CUDA graph (see README.md here).

Before a batch size is timed, its logits are checked against transformers' on the same prompt and
tokens (teacher-forced over the prompt and DECODE_WARMUP_STEPS decode steps); a failed check marks
the case failed and it is not timed.
"""
import glob
import json
import math
import os
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import (DECODE_WARMUP_STEPS, PREFILL_CHUNK, STATIC_CACHE_MARGIN, check_args, compare,  # noqa: E402
                   decode_parser, device_info, eager_decode, event_pair, fail, finish, free_memory,
                   random_ids, software_info, summary, time_events, utc_now)

ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen3ForCausalLM": "qwen3"}
ROPE_TYPES = ("default", "linear", "llama3")
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")
CAPTURE_WARMUP = 3  # compiled steps on a side stream before the capture (the first one compiles)
# The check, per step and sequence: max |compiled - transformers| / max |transformers| over the
# vocabulary within CHECK_REL_TOL, and the same argmax wherever transformers' top-1/top-2 gap exceeds
# twice it (closer steps are ties that bf16 rounding may break either way: counted, not judged).
CHECK_REL_TOL = 2e-2


def read_config(path):
    """Every shape and constant from config.json; anything this decoder does not implement is refused."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    arch = cfg.get("architectures") or []
    if len(arch) != 1 or arch[0] not in ARCHITECTURES or cfg.get("model_type") != ARCHITECTURES[arch[0]]:
        fail(f"{path}: architecture {arch} / model_type {cfg.get('model_type')!r} is not implemented "
             f"(only {', '.join(ARCHITECTURES)})")
    if cfg.get("quantization_config") is not None:
        fail(f"{path}: quantized checkpoints are not implemented (bf16 only)")
    refusals = {"hidden_act": cfg.get("hidden_act", "silu") != "silu",
                "attention_bias": bool(cfg.get("attention_bias")), "mlp_bias": bool(cfg.get("mlp_bias")),
                "use_sliding_window": bool(cfg.get("use_sliding_window")),
                "layer_types": any(t != "full_attention" for t in cfg.get("layer_types") or []),
                "partial_rotary_factor": cfg.get("partial_rotary_factor", 1.0) != 1.0}
    for key, refused in refusals.items():
        if refused:
            fail(f"{path}: {key} = {cfg.get(key)!r} is not implemented")
    rope = dict(cfg.get("rope_scaling") or {})
    rope.update(cfg.get("rope_parameters") or {})  # transformers 5 writes rope_parameters
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    theta = rope.get("rope_theta", cfg.get("rope_theta"))
    if rope_type not in ROPE_TYPES or theta is None:
        fail(f"{path}: rope {rope_type!r} (theta {theta}) is not implemented (only {', '.join(ROPE_TYPES)})")
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    if heads % kv_heads:
        fail(f"{path}: {heads} attention heads are not a multiple of {kv_heads} key-value heads")
    return {"raw": cfg, "arch": arch[0], "hidden": cfg["hidden_size"], "inter": cfg["intermediate_size"],
            "layers": cfg["num_hidden_layers"], "heads": heads, "kv_heads": kv_heads,
            "head_dim": cfg.get("head_dim") or cfg["hidden_size"] // heads, "eps": cfg["rms_norm_eps"],
            "vocab": cfg["vocab_size"], "tied": bool(cfg.get("tie_word_embeddings", False)),
            "qk_norm": arch[0] == "Qwen3ForCausalLM", "rope_type": rope_type, "theta": float(theta),
            "rope": rope, "max_positions": cfg.get("max_position_embeddings")}


def parse_args(argv):
    ap = decode_parser("time a compiled, CUDA-graph PyTorch decoder on a met checkpoint (bf16, one GPU)")
    ap.add_argument("--compile-mode", choices=COMPILE_MODES, default=COMPILE_MODES[0], help="torch.compile mode")
    args = ap.parse_args(argv)
    check_args(ap, args)
    args.config = read_config(args.checkpoint)
    longest = args.ctx - 1 + DECODE_WARMUP_STEPS + args.steps + STATIC_CACHE_MARGIN  # the static cache's length
    if args.config["max_positions"] and longest > args.config["max_positions"]:
        fail(f"--ctx {args.ctx} and --steps {args.steps} need {longest} positions, the model has "
             f"{args.config['max_positions']}")
    return args


def load_weights(path, c, torch):
    """The checkpoint's tensors under their HF names, on the GPU; every one must be bf16 and used."""
    from safetensors import safe_open
    tensors = {}
    for name in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        with safe_open(name, framework="pt", device="cuda") as f:
            tensors.update({k: f.get_tensor(k) for k in f.keys()})
    other = sorted(f"{k} ({t.dtype})" for k, t in tensors.items() if t.dtype != torch.bfloat16)
    if other:
        fail(f"{path}: tensors that are not bf16 (quantized or another dtype): {', '.join(other[:4])}")
    hd, q_rows, kv_rows = c["head_dim"], c["heads"] * c["head_dim"], c["kv_heads"] * c["head_dim"]

    def take(name, shape):
        if name not in tensors:
            fail(f"{path}: no tensor {name}")
        t = tensors.pop(name)
        if tuple(t.shape) != shape:
            fail(f"{path}: {name} has shape {tuple(t.shape)}, config.json implies {shape}")
        return t

    h, inter = c["hidden"], c["inter"]
    w = {"embed": take("model.embed_tokens.weight", (c["vocab"], h)), "norm": take("model.norm.weight", (h,)),
         "layers": []}
    for i in range(c["layers"]):
        p = f"model.layers.{i}."
        layer = {"ln1": take(p + "input_layernorm.weight", (h,)), "ln2": take(p + "post_attention_layernorm.weight", (h,)),
                 "wqkv": torch.cat([take(p + "self_attn.q_proj.weight", (q_rows, h)),
                                    take(p + "self_attn.k_proj.weight", (kv_rows, h)),
                                    take(p + "self_attn.v_proj.weight", (kv_rows, h))]),
                 "wo": take(p + "self_attn.o_proj.weight", (h, q_rows)),
                 "wgu": torch.cat([take(p + "mlp.gate_proj.weight", (inter, h)), take(p + "mlp.up_proj.weight", (inter, h))]),
                 "wd": take(p + "mlp.down_proj.weight", (h, inter))}
        if c["qk_norm"]:
            layer["qn"], layer["kn"] = take(p + "self_attn.q_norm.weight", (hd,)), take(p + "self_attn.k_norm.weight", (hd,))
        w["layers"].append(layer)
    if c["tied"]:
        tensors.pop("lm_head.weight", None)  # a tied head saved anyway holds the embedding
        w["head"] = w["embed"]
    else:
        w["head"] = take("lm_head.weight", (c["vocab"], h))
    if tensors:
        fail(f"{path}: tensors this decoder does not use: {', '.join(sorted(tensors)[:4])}")
    return w


def rope_tables(c, max_len, torch):
    """cos and sin [max_len, head_dim] in bf16, computed in fp32 as transformers does (rotate-half layout)."""
    d, r = c["head_dim"], c["rope"]
    inv = 1.0 / (c["theta"] ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    if c["rope_type"] == "linear":
        inv = inv / r["factor"]
    elif c["rope_type"] == "llama3":
        factor, low, high = r["factor"], r["low_freq_factor"], r["high_freq_factor"]
        old = r.get("original_max_position_embeddings", c["raw"].get("original_max_position_embeddings"))
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        inv = torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    freqs = torch.arange(max_len, dtype=torch.float32, device="cuda")[:, None] * inv.cuda()[None, :]
    emb = torch.cat((freqs, freqs), -1)
    return emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)


def make_decoder(c, w, batch, max_len, compile_mode, torch):
    """The static cache and forward(ids [B, T], pos [1], compiled): writes the T tokens' keys and values
    at positions pos..pos+T-1 and returns the last position's logits [B, vocab] in bf16. One layer
    function serves every layer (compiled once per shape, not once per layer) and the head another;
    `compiled` picks their torch.compile'd versions (decode) or the eager ones (prefill)."""
    F = torch.nn.functional
    H, KV, D, eps = c["heads"], c["kv_heads"], c["head_dim"], c["eps"]
    G, scale = H // KV, 1.0 / math.sqrt(c["head_dim"])
    cos, sin = rope_tables(c, max_len, torch)
    keys = torch.arange(max_len, device="cuda")
    shape = (batch, KV, max_len, D)  # per layer: [batch][kv_heads][max_len][head_dim]
    kcache = [torch.zeros(shape, dtype=torch.bfloat16, device="cuda") for _ in range(c["layers"])]
    vcache = [torch.zeros(shape, dtype=torch.bfloat16, device="cuda") for _ in range(c["layers"])]

    def rms(x, weight):
        xf = x.float()
        return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(torch.bfloat16)

    def rotate(x, cs, sn):  # x [B, heads, T, D]; cs, sn [T, D]
        half = x.shape[-1] // 2
        return x * cs + torch.cat((-x[..., half:], x[..., :half]), -1) * sn

    def attend(q, kc, vc, positions):
        visible = keys[None, :] <= positions[:, None]  # [T, max_len]: causal over the whole static cache
        B, _, T, _ = q.shape
        if T > 1:  # prefill (eager, untimed): SDPA on keys and values expanded to the query heads
            return F.scaled_dot_product_attention(q, kc.repeat_interleave(G, 1), vc.repeat_interleave(G, 1),
                                                  attn_mask=visible, scale=scale)
        qg = q.view(B, KV, G, D)  # decode: the G query heads of each kv head as the rows of one product
        s = torch.matmul(qg, kc.transpose(-1, -2)).float() * scale
        p = torch.softmax(s.masked_fill(~visible, float("-inf")), -1).to(torch.bfloat16)
        return torch.matmul(p, vc).view(B, H, 1, D)

    def layer(x, positions, cs, sn, L, kc, vc):
        B, T, _ = x.shape
        q, k, v = F.linear(rms(x, L["ln1"]), L["wqkv"]).split([H * D, KV * D, KV * D], -1)
        q, k, v = q.view(B, T, H, D), k.view(B, T, KV, D), v.view(B, T, KV, D)
        if "qn" in L:  # Qwen3: RMSNorm of each head's query and key before RoPE
            q, k = rms(q, L["qn"]), rms(k, L["kn"])
        q, k, v = rotate(q.transpose(1, 2), cs, sn), rotate(k.transpose(1, 2), cs, sn), v.transpose(1, 2)
        kc.index_copy_(2, positions, k)
        vc.index_copy_(2, positions, v)
        o = attend(q, kc, vc, positions)
        x = x + F.linear(o.transpose(1, 2).reshape(B, T, H * D), L["wo"])
        g, u = F.linear(rms(x, L["ln2"]), L["wgu"]).split(c["inter"], -1)
        return x + F.linear(F.silu(g) * u, L["wd"])

    def head(x, norm, weight):
        return F.linear(rms(x[:, -1], norm), weight)

    fns = {False: (layer, head),
           True: tuple(torch.compile(f, mode=compile_mode, fullgraph=True, dynamic=False) for f in (layer, head))}

    def forward(ids, pos, compiled):
        layer_fn, head_fn = fns[compiled]
        positions = pos + torch.arange(ids.shape[1], device="cuda")
        cs, sn = cos[positions], sin[positions]
        x = F.embedding(ids, w["embed"])
        for i, L in enumerate(w["layers"]):
            x = layer_fn(x, positions, cs, sn, L, kcache[i], vcache[i])
        return head_fn(x, w["norm"], w["head"])

    return forward, kcache + vcache


def judge(got, want):
    """One checked step: compare()'s worst ratio, and the argmax judged where transformers' top-1/top-2
    gap over max |logit| exceeds 2 * CHECK_REL_TOL."""
    rel, same = compare(got, want)
    top = want.topk(2, -1).values
    decisive = (top[:, 0] - top[:, 1]) / want.abs().amax(-1).clamp_min(1e-30) > 2 * CHECK_REL_TOL
    wrong = decisive & (got.float().argmax(-1) != want.argmax(-1))
    return {"rel_diff": rel, "argmax_equal": same, "decisive": int(decisive.sum()), "decisive_wrong": int(wrong.sum())}


def compiled_decode(args, torch, weights, prompt, ref):
    """Prefills the prompt (eager), compiles and captures one decode step (forward, argmax written back
    into `ids`, position + 1), checks the prefill and the first DECODE_WARMUP_STEPS replays (fed
    transformers' tokens) against transformers' logits, then times `steps` free-running replays.
    Returns (times or None when the check failed, extra fields of the case)."""
    batch, prompt_len = prompt.shape
    max_len = prompt_len + DECODE_WARMUP_STEPS + args.steps + STATIC_CACHE_MARGIN  # as peers.py's StaticCache
    forward, caches = make_decoder(args.config, weights, batch, max_len, args.compile_mode, torch)
    ids = torch.zeros((batch, 1), dtype=torch.long, device="cuda")
    pos = torch.zeros((1,), dtype=torch.long, device="cuda")
    t0 = time.monotonic()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(CAPTURE_WARMUP):
            pos.fill_(i)
            forward(ids, pos, compiled=True)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    compile_s = time.monotonic() - t0
    for t in caches:
        t.zero_()
    for begin in range(0, prompt_len, PREFILL_CHUNK):
        pos.fill_(begin)
        first = forward(prompt[:, begin:begin + PREFILL_CHUNK], pos, compiled=False)
    pos.fill_(prompt_len)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        logits = forward(ids, pos, compiled=True)
        ids.copy_(logits.argmax(-1, keepdim=True))
        pos.add_(1)

    checks = [dict(step="prefill", **judge(first, ref["prefill_logits"]))]
    for k in range(DECODE_WARMUP_STEPS):
        ids.copy_(ref["inputs"][k])
        graph.replay()
        checks.append(dict(step=k, **judge(logits, ref["logits"][k])))
    torch.cuda.synchronize()
    worst = max(c["rel_diff"] for c in checks)
    wrong = sum(c["decisive_wrong"] for c in checks)
    check = {"passed": worst <= CHECK_REL_TOL and wrong == 0, "tol": CHECK_REL_TOL, "max_rel_diff": worst,
             "decisive_argmax": sum(c["decisive"] for c in checks), "decisive_argmax_wrong": wrong,
             "reference": "transformers, DynamicCache, eager (peers.py's eager decode)", "steps": checks}
    times = None
    if check["passed"]:
        pairs = []
        for _ in range(args.steps):
            pairs.append(event_pair())
            pairs[-1][0].record()
            graph.replay()
            pairs[-1][1].record()
        times = time_events(pairs)
        expected = prompt_len + DECODE_WARMUP_STEPS + args.steps
        check["positions"] = {"expected": expected, "pos": int(pos.item())}
        check["passed"] = check["positions"]["pos"] == expected
    del graph, logits, forward, caches
    torch._dynamo.reset()
    return (times if check["passed"] else None), {"check": check, "compile_s": compile_s}


def main():
    args = parse_args(sys.argv[1:])
    command = "python3 " + shlex.join(sys.argv)
    c = args.config

    import torch
    from transformers import AutoModelForCausalLM

    if not torch.cuda.is_available():
        fail("no CUDA device visible to torch")
    torch.backends.cuda.enable_cudnn_sdp(False)  # as peers.py (README.md: new plans per key length)
    prompt_len = args.ctx - 1
    prompts = {b: random_ids(args.seed, c["vocab"], b, prompt_len, salt=b) for b in args.batch}

    print(f"transformers reference on {args.checkpoint}", flush=True)
    refs = {}
    with torch.inference_mode():
        reference = AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.bfloat16,
                                                         attn_implementation="sdpa").cuda().eval()
        for b in args.batch:
            refs[b] = eager_decode(reference, prompts[b], 0)[1]
        del reference
    free_memory()

    weights = load_weights(args.checkpoint, c, torch)
    unique = {id(t): t for t in [weights["embed"], weights["head"], weights["norm"]] +
              [t for layer in weights["layers"] for t in layer.values()]}.values()
    raw = c["raw"]
    result = {
        "schema": "met-peers-compiled/1", "command": command, "date_utc": utc_now(),
        "device": device_info(), "software": software_info(),
        "checkpoint": {"path": os.path.abspath(args.checkpoint), "architectures": raw.get("architectures"),
                       "model_type": raw.get("model_type"), "hidden_size": c["hidden"],
                       "intermediate_size": c["inter"], "num_hidden_layers": c["layers"],
                       "num_attention_heads": c["heads"], "num_key_value_heads": c["kv_heads"],
                       "head_dim": c["head_dim"], "vocab_size": c["vocab"], "tie_word_embeddings": c["tied"],
                       "rope_type": c["rope_type"], "rope_theta": c["theta"], "dtype": "bfloat16",
                       "parameters": sum(t.numel() for t in unique),
                       "parameter_bytes": sum(t.numel() * t.element_size() for t in unique)},
        "settings": {"compile_mode": args.compile_mode, "fullgraph": True, "dynamic": False,
                     "cuda_graph": "one decode step captured by hand (torch.cuda.CUDAGraph) around the compiled step",
                     "attention": "decode: bf16 matmuls over the whole static cache, positions past the current "
                                  "length masked, fp32 softmax; prefill (eager): SDPA with a mask",
                     "batch": args.batch, "ctx": args.ctx, "steps": args.steps, "seed": args.seed,
                     "prefill_chunk": PREFILL_CHUNK, "decode_warmup_steps": DECODE_WARMUP_STEPS,
                     "capture_warmup": CAPTURE_WARMUP, "check_rel_tol": CHECK_REL_TOL},
        "cases": [],
    }
    first_timed = args.ctx + DECODE_WARMUP_STEPS
    for b in args.batch:
        case = {"name": f"compiled decode b{b} ctx{args.ctx}", "mode": "compiled", "batch": b, "ctx": args.ctx,
                "steps": args.steps, "context": f"timed steps attend over {first_timed}..{first_timed + args.steps - 1} tokens",
                "unit": "ms per decode step (one token for each of the batch's sequences)"}
        print(f"{case['name']} ...", flush=True)
        torch.cuda.reset_peak_memory_stats()
        try:
            with torch.inference_mode():
                times, extra = compiled_decode(args, torch, weights, prompts[b], refs[b])
            case.update(extra)
            if times is None:
                case["error"] = "the compiled decoder failed its check against transformers (see check); no times reported"
            else:
                case.update(ms=summary(times), samples_ms=times, tokens_per_s=b * 1000.0 / summary(times)["median"],
                            peak_memory_bytes=torch.cuda.max_memory_allocated())
        except Exception as e:  # a case that cannot run is reported as such, never skipped
            case["error"] = f"{type(e).__name__}: {e}"
        free_memory()
        result["cases"].append(case)
        print(f"  FAILED: {case['error']}" if "error" in case else
              f"  median {case['ms']['median']:.3f} ms (compile {case['compile_s']:.0f} s, "
              f"max rel diff {case['check']['max_rel_diff']:.4g})", flush=True)
    finish(result, args.out, f"compiled PyTorch ({args.compile_mode}), torch {torch.__version__}, "
           f"{result['device']['name']}, {os.path.basename(os.path.normpath(args.checkpoint))}")


if __name__ == "__main__":
    main()

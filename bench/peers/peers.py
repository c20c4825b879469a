#!/usr/bin/env python3
"""The transformers peers: Hugging Face transformers timed on a checkpoint made by `met model synth`,
on the GPU that met runs on, so met's figures have a reference beside them (see README.md here).

Three peers: eager decode (DynamicCache), CUDA-graph decode (StaticCache, one decode step captured by
hand and replayed) and eager prefill. Every time is read from CUDA events after warm-up, on seeded
random token ids; the graph must reproduce the same model's eager StaticCache logits, or the case fails.
"""
import argparse
import datetime
import gc
import json
import os
import platform
import shlex
import statistics
import sys

MODES = ("eager", "graph", "prefill")
# The decode cases prefill their prompt in chunks of this many tokens per sequence, to bound the
# activations of a batch-16 prefill; the chunks are setup, never timed.
PREFILL_CHUNK = 1024
# Decode steps run before the timed ones; in graph mode they are the checked, teacher-forced replays.
DECODE_WARMUP_STEPS = 8
# Forwards on a side stream before the capture, as torch.cuda.graph requires.
GRAPH_CAPTURE_WARMUP = 3
# Room in the static cache beyond the prompt, warm-up and timed steps.
STATIC_CACHE_MARGIN = 16
PREFILL_WARMUP = 3
PREFILL_REPEATS = 10
# The graph check: per step and sequence, max |graph - eager| / max |eager| over the vocabulary, both
# on a StaticCache (same kernels, same inputs), must stay within this.
GRAPH_REL_TOL = 1e-3


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def int_list(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers")
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"'{text}' must list positive integers")
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"'{text}' lists a value twice")
    return values


def mode_list(text):
    values = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [v for v in values if v not in MODES]
    if not values or unknown:
        raise argparse.ArgumentTypeError(f"modes must be a comma-separated subset of {','.join(MODES)}, got '{text}'")
    return [m for m in MODES if m in values]


def decode_parser(description):
    """The options peers.py and compiled.py share: checkpoint, output, decode batch sizes, context, steps."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--checkpoint", required=True, help="directory with config.json and *.safetensors")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--batch", type=int_list, default=[1, 16], help="decode batch sizes (default 1,16)")
    ap.add_argument("--ctx", type=int, default=4096, help="decode context: a prompt of ctx-1 tokens is prefilled")
    ap.add_argument("--steps", type=int, default=32, help="timed decode steps (default 32)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random prompts")
    return ap


def check_args(ap, args):
    """Refuses a short context or no steps, a checkpoint directory without config.json or *.safetensors
    and an output whose directory does not exist, before torch is loaded."""
    if args.ctx < 2:
        ap.error("--ctx must be at least 2 (the prompt is ctx-1 tokens)")
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    check_paths(args.checkpoint, args.out)


def parse_args(argv):
    ap = decode_parser("time Hugging Face transformers on a met checkpoint (bf16, one GPU)")
    ap.add_argument("--prefill", type=int_list, default=[128, 512, 4096], help="prefill prompt lengths, batch 1")
    ap.add_argument("--modes", type=mode_list, default=list(MODES), help="subset of eager,graph,prefill")
    ap.add_argument("--cudnn-attention", choices=("on", "off"), default="off",
                    help="let torch's SDPA use its cuDNN backend (default off, see README.md)")
    args = ap.parse_args(argv)
    check_args(ap, args)
    return args


def check_paths(checkpoint, out):
    """The checkpoint directory holds config.json and *.safetensors; the output's directory exists."""
    if not os.path.isdir(checkpoint):
        fail(f"--checkpoint {checkpoint}: no such directory")
    if not os.path.isfile(os.path.join(checkpoint, "config.json")):
        fail(f"--checkpoint {checkpoint}: no config.json")
    if not any(f.endswith(".safetensors") for f in os.listdir(checkpoint)):
        fail(f"--checkpoint {checkpoint}: no .safetensors files")
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir):
        fail(f"--out {out}: directory {out_dir} does not exist")


def summary(samples_ms):
    """median, p10, p90 (linear interpolation between order statistics), mean, min, max."""
    s = sorted(samples_ms)

    def quantile(q):
        pos = q * (len(s) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (pos - lo)

    return {"median": statistics.median(s), "p10": quantile(0.10), "p90": quantile(0.90),
            "mean": statistics.fmean(s), "min": s[0], "max": s[-1]}


# Helpers shared with compiled.py (the compiled PyTorch peer). They import torch when called, so
# that bad arguments are refused before torch is loaded.

def time_events(pairs):
    import torch
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def event_pair():
    import torch
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def random_ids(seed, vocab, rows, cols, salt):
    """Seeded prompt ids on the GPU; a CPU generator gives the same ids on any GPU and torch build."""
    import torch
    gen = torch.Generator().manual_seed(seed * 1000003 + salt)
    return torch.randint(0, vocab, (rows, cols), generator=gen, dtype=torch.long).to("cuda")


def free_memory():
    import torch
    gc.collect()
    torch.cuda.empty_cache()


def prefill_chunks(model, prompt, cache):
    """Runs the prompt through the model into cache; returns the last position's logits (float)."""
    logits = None
    for begin in range(0, prompt.shape[1], PREFILL_CHUNK):
        out = model(input_ids=prompt[:, begin:begin + PREFILL_CHUNK], past_key_values=cache,
                    use_cache=True, logits_to_keep=1)
        logits = out.logits[:, -1, :]
        del out
    return logits.float()


def eager_decode(model, prompt, steps):
    """Greedy decode with a DynamicCache: DECODE_WARMUP_STEPS untimed steps, then `steps` timed
    ones. Returns the per-step times and the reference for the graph check: the prefill logits,
    the tokens fed at each warm-up step and the logits each produced."""
    from transformers import DynamicCache
    cache = DynamicCache(config=model.config)
    first = prefill_chunks(model, prompt, cache)
    tok = first.argmax(-1, keepdim=True)
    ref = {"prefill_logits": first, "inputs": [], "logits": []}
    pairs = []
    for i in range(DECODE_WARMUP_STEPS + steps):
        timed = i >= DECODE_WARMUP_STEPS
        if timed:
            pairs.append(event_pair())
            pairs[-1][0].record()
        if not timed:
            ref["inputs"].append(tok)
        out = model(input_ids=tok, past_key_values=cache, use_cache=True)
        last = out.logits[:, -1, :]
        tok = last.argmax(-1, keepdim=True)
        if timed:
            pairs[-1][1].record()
        else:
            ref["logits"].append(last.float())
        del out, last
    times = time_events(pairs)
    del cache
    return times, ref


def compare(got, want):
    """Per sequence of the batch: max |got - want| / max |want| over the vocabulary, and whether
    the argmax agrees. Returns the worst ratio and the count of agreeing sequences."""
    got = got.float()
    scale = want.abs().amax(-1).clamp_min(1e-30)
    rel = (got - want).abs().amax(-1) / scale
    same = got.argmax(-1) == want.argmax(-1)
    return float(rel.max()), int(same.sum())


def device_info():
    import torch
    props = torch.cuda.get_device_properties(0)
    return {"name": torch.cuda.get_device_name(0), "capability": f"{props.major}.{props.minor}",
            "memory_bytes": props.total_memory}


def software_info():
    import torch
    info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    for name in ("transformers", "safetensors"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            info[name] = None
    return info


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def finish(result, out, title):
    """Records the failed cases, writes the JSON, prints the closing Markdown table (case, ms median,
    p10, p90) and exits 1 when a case failed."""
    failed = [c["name"] for c in result["cases"] if "error" in c]
    result["failed"] = failed
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print()
    print(title)
    print()
    print("| case | ms median | p10 | p90 |")
    print("|---|---|---|---|")
    for case in result["cases"]:
        if "error" in case:
            print(f"| {case['name']} | FAILED | | |")
        else:
            ms = case["ms"]
            print(f"| {case['name']} | {ms['median']:.3f} | {ms['p10']:.3f} | {ms['p90']:.3f} |")
    print()
    print(f"wrote {out}")
    if failed:
        fail(f"{len(failed)} case(s) failed: {', '.join(failed)}")


def main():
    args = parse_args(sys.argv[1:])
    command = "python3 " + shlex.join(sys.argv)

    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, StaticCache
    from transformers.cache_utils import StaticLayer

    if not torch.cuda.is_available():
        fail("no CUDA device visible to torch")
    # torch's cuDNN attention builds a plan for every new key length (tens of ms each here), which
    # eager decode meets at every step, and its results differ between eager and captured runs.
    torch.backends.cuda.enable_cudnn_sdp(args.cudnn_attention == "on")
    config = AutoConfig.from_pretrained(args.checkpoint)
    if getattr(config, "quantization_config", None) is not None:
        fail(f"--checkpoint {args.checkpoint}: quantized checkpoints are not measured here (bf16 only)")
    device = torch.device("cuda")
    vocab = config.vocab_size

    def graph_decode(model, prompt, steps, ref):
        """Greedy decode with a StaticCache and one captured decode step. The captured step reads
        the token in `ids`, runs the model at position `pos` (the cache appends at its own device-side
        length, which must stay equal to `pos`), writes the argmax back into `ids` and advances `pos`.

        Check: the same cache first runs the prompt and DECODE_WARMUP_STEPS decode steps eagerly,
        fed the DynamicCache run's tokens; it is then reset and refilled, and the first
        DECODE_WARMUP_STEPS replays are fed the same tokens. Graph and eager run the same kernels on
        the same inputs, so their logits must agree to GRAPH_REL_TOL; the DynamicCache logits are
        recorded beside them (other attention kernels: close, not equal). The next `steps` replays
        run free and are timed."""
        batch, prompt_len = prompt.shape
        max_len = prompt_len + DECODE_WARMUP_STEPS + steps + STATIC_CACHE_MARGIN
        cache = StaticCache(config=model.config, max_cache_len=max_len)
        ids = torch.zeros((batch, 1), dtype=torch.long, device=device)
        pos = torch.zeros((1, 1), dtype=torch.long, device=device)
        if not all(type(layer) is StaticLayer for layer in cache.layers):
            kinds = sorted({type(layer).__name__ for layer in cache.layers})
            raise RuntimeError(f"graph mode needs full-attention StaticLayer caches, got {kinds}")

        # Warm up on a side stream with single-token forwards (these also allocate the cache), as
        # torch requires before a capture; reset() then clears the cache in place, keeping the tensors
        # and so the addresses the graph will hold.
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i in range(GRAPH_CAPTURE_WARMUP):
                pos.fill_(i)
                model(input_ids=ids, position_ids=pos, past_key_values=cache, use_cache=True)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        cache.reset()

        eager_first = prefill_chunks(model, prompt, cache)
        eager_logits = []
        for k in range(DECODE_WARMUP_STEPS):
            pos.fill_(prompt_len + k)
            out = model(input_ids=ref["inputs"][k], position_ids=pos, past_key_values=cache, use_cache=True)
            eager_logits.append(out.logits[:, -1, :].float())
            del out
        cache.reset()

        first = prefill_chunks(model, prompt, cache)
        pos.fill_(prompt_len)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            out = model(input_ids=ids, position_ids=pos, past_key_values=cache, use_cache=True)
            logits = out.logits[:, -1, :]
            ids.copy_(logits.argmax(-1, keepdim=True))
            pos.add_(1)
        del out

        def entry(step, got, static_want, dynamic_want):
            rel_s, same_s = compare(got, static_want)
            rel_d, same_d = compare(got, dynamic_want)
            return {"step": step, "rel_diff_static_eager": rel_s, "argmax_equal_static_eager": same_s,
                    "rel_diff_dynamic_eager": rel_d, "argmax_equal_dynamic_eager": same_d}

        checks = [entry("prefill", first, eager_first, ref["prefill_logits"])]
        for k in range(DECODE_WARMUP_STEPS):
            ids.copy_(ref["inputs"][k])
            graph.replay()
            checks.append(entry(k, logits, eager_logits[k], ref["logits"][k]))
        torch.cuda.synchronize()

        pairs = []
        for _ in range(steps):
            pairs.append(event_pair())
            pairs[-1][0].record()
            graph.replay()
            pairs[-1][1].record()
        times = time_events(pairs)

        expected = prompt_len + DECODE_WARMUP_STEPS + steps
        positions = {"expected": expected, "pos": int(pos.item()), "cache": int(cache.get_seq_length())}
        worst = max(c["rel_diff_static_eager"] for c in checks)
        passed = (worst <= GRAPH_REL_TOL and all(c["argmax_equal_static_eager"] == batch for c in checks)
                  and positions["pos"] == expected and positions["cache"] == expected)
        check = {"passed": passed, "tol": GRAPH_REL_TOL, "max_rel_diff_static_eager": worst,
                 "max_rel_diff_dynamic_eager": max(c["rel_diff_dynamic_eager"] for c in checks),
                 "positions": positions, "steps": checks}
        del graph, logits, cache, ids, pos, eager_first, eager_logits, first
        return times, check

    def prefill_times(model, length):
        prompt = random_ids(args.seed, vocab, 1, length, salt=length)
        pairs = []
        for i in range(PREFILL_WARMUP + PREFILL_REPEATS):
            timed = i >= PREFILL_WARMUP
            if timed:
                pairs.append(event_pair())
                pairs[-1][0].record()
            out = model(input_ids=prompt, use_cache=False, logits_to_keep=1)
            if timed:
                pairs[-1][1].record()
            del out
        return time_events(pairs)

    with open(os.path.join(args.checkpoint, "config.json")) as f:
        raw_config = json.load(f)
    print(f"loading {args.checkpoint}", flush=True)
    model = AutoModelForCausalLM.from_pretrained(args.checkpoint, dtype=torch.bfloat16, attn_implementation="sdpa")
    model = model.cuda().eval()
    params = list(model.parameters())
    # The shape as config.json states it (a text model's keys, or its text_config's): transformers'
    # config objects refuse per-layer attributes of heterogeneous models (Gemma-4's head counts).
    text = raw_config.get("text_config", raw_config)
    result = {
        "schema": "met-peers-transformers/1",
        "command": command,
        "date_utc": utc_now(),
        "device": device_info(),
        "software": software_info(),
        "checkpoint": {
            "path": os.path.abspath(args.checkpoint),
            "architectures": raw_config.get("architectures"),
            "model_type": raw_config.get("model_type"),
            "hidden_size": text.get("hidden_size"),
            "intermediate_size": text.get("intermediate_size"),
            "num_hidden_layers": text.get("num_hidden_layers"),
            "num_attention_heads": text.get("num_attention_heads"),
            "num_key_value_heads": text.get("num_key_value_heads"),
            "head_dim": text.get("head_dim"),
            "vocab_size": vocab,
            "tie_word_embeddings": raw_config.get("tie_word_embeddings"),
            "dtype": "bfloat16",
            "parameters": sum(p.numel() for p in params),
            "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
        },
        "settings": {
            "attn_implementation": model.config._attn_implementation,
            "sdpa_backends": {"flash": torch.backends.cuda.flash_sdp_enabled(),
                              "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                              "math": torch.backends.cuda.math_sdp_enabled(),
                              "cudnn": torch.backends.cuda.cudnn_sdp_enabled()},
            "modes": args.modes, "batch": args.batch, "ctx": args.ctx, "steps": args.steps,
            "prefill": args.prefill, "seed": args.seed, "prefill_chunk": PREFILL_CHUNK,
            "decode_warmup_steps": DECODE_WARMUP_STEPS, "graph_capture_warmup": GRAPH_CAPTURE_WARMUP,
            "prefill_warmup": PREFILL_WARMUP, "prefill_repeats": PREFILL_REPEATS,
            "graph_rel_tol": GRAPH_REL_TOL,
        },
        "cases": [],
    }
    del params

    def run_case(case, body):
        """Runs body() -> (times_ms, extra) and records the case; an exception is recorded, not raised."""
        print(f"{case['name']} ...", flush=True)
        torch.cuda.reset_peak_memory_stats()
        try:
            times, extra = body()
            case["ms"] = summary(times)
            case["samples_ms"] = times
            case["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
            case.update(extra)
            if "check" in case and not case["check"]["passed"]:
                case["error"] = "graph decode does not reproduce the eager StaticCache logits (see check)"
        except Exception as e:  # a case that cannot run is reported as such, never skipped
            case["error"] = f"{type(e).__name__}: {e}"
        free_memory()
        result["cases"].append(case)
        if "error" in case:
            print(f"  FAILED: {case['error']}", flush=True)
        else:
            print(f"  median {case['ms']['median']:.3f} ms", flush=True)

    prompt_len = args.ctx - 1
    first_timed = args.ctx + DECODE_WARMUP_STEPS  # tokens the first timed step attends over
    decode_context = f"timed steps attend over {first_timed}..{first_timed + args.steps - 1} tokens"
    with torch.inference_mode():
        for batch in args.batch:
            if "eager" not in args.modes and "graph" not in args.modes:
                break
            prompt = random_ids(args.seed, vocab, batch, prompt_len, salt=batch)
            ref = {}

            def eager_body():
                times, ref["eager"] = eager_decode(model, prompt, args.steps)
                return times, {}

            def graph_body():
                if "eager" not in ref:  # --modes without eager: the reference is still needed
                    _, ref["eager"] = eager_decode(model, prompt, 0)
                    free_memory()
                times, check = graph_decode(model, prompt, args.steps, ref["eager"])
                return times, {"check": check}

            for mode, body in (("eager", eager_body), ("graph", graph_body)):
                if mode not in args.modes:
                    continue
                run_case({"name": f"{mode} decode b{batch} ctx{args.ctx}", "mode": mode, "batch": batch,
                          "ctx": args.ctx, "steps": args.steps, "context": decode_context,
                          "unit": "ms per decode step (one token for each of the batch's sequences)"}, body)
            del prompt, ref
            free_memory()

        if "prefill" in args.modes:
            for length in args.prefill:
                run_case({"name": f"prefill b1 p{length}", "mode": "prefill", "batch": 1, "tokens": length,
                          "unit": "ms per prefill (one forward, no cache kept, last position's logits)"},
                         lambda length=length: (prefill_times(model, length), {}))

    for case in result["cases"]:
        if "error" not in case:
            tokens = case["batch"] if case["mode"] != "prefill" else case["tokens"]
            case["tokens_per_s"] = tokens * 1000.0 / case["ms"]["median"]
    finish(result, args.out, f"transformers {transformers.__version__}, torch {torch.__version__}, "
           f"{result['device']['name']}, {os.path.basename(os.path.normpath(args.checkpoint))}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The transformers oracle: runs Hugging Face transformers on a checkpoint made by `met model synth`
and writes greedy tokens and logits for fixed prompts as a small JSON fixture.

Run on a machine with a GPU, PyTorch and transformers (the device machine); the exact command that
made each committed fixture is recorded in the fixture itself and in tests/oracle/README.md.

fp8 checkpoints are run weight-only: the e4m3 weights are dequantised exactly with their
128x128 block scales into a bf16 model, which is what met's CPU backend computes (transformers'
own fp8 path would also quantise the activations). Mixture-of-experts checkpoints (Qwen3-MoE) are
written one tensor per expert, Hugging Face's layout, which transformers stacks when it loads them.
gpt-oss checkpoints are written in its own layout (one tensor over every expert); an MXFP4 one
(quant_method mxfp4) is loaded by transformers itself with Mxfp4Config(dequantize=True), which
turns the blocks and scales into the bf16 expert weights of the bf16 model.
"""
import argparse
import json
import os
import random
import shlex
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM


def dequantised_state(checkpoint):
    state = {}
    files = sorted(f for f in os.listdir(checkpoint) if f.endswith(".safetensors"))
    for name in files:
        state.update(load_file(os.path.join(checkpoint, name)))
    out = {}
    for key, t in state.items():
        if key.endswith("_scale_inv"):
            continue
        scale = state.get(key + "_scale_inv")
        if scale is not None:
            w = t.to(torch.float32)
            rows, cols = w.shape
            s = scale.to(torch.float32).repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
            out[key] = (w * s).to(torch.bfloat16)
        else:
            out[key] = t
    return out


def load(checkpoint, device, attn_implementation, dtype=torch.bfloat16):
    """The model with every checkpoint tensor loaded: a key transformers does not take or does not
    find (a synth layout that is not Hugging Face's) stops the script instead of leaving a randomly
    initialised module. fp8 checkpoints are dequantised into a bf16 copy first, loaded the same way
    (so transformers' own conversions, such as stacking per-expert tensors, apply to both)."""
    config = AutoConfig.from_pretrained(checkpoint)
    # eager: the attention the model class writes out itself (Gemma's score scale and sliding window
    # as its modelling code states them); None keeps transformers' default.
    extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
    with tempfile.TemporaryDirectory() as tmp:
        source = checkpoint
        quant = getattr(config, "quantization_config", None)
        method = (quant.get("quant_method") if isinstance(quant, dict) else getattr(quant, "quant_method", None)) if quant else None
        if method == "mxfp4":
            from transformers import Mxfp4Config

            extra["quantization_config"] = Mxfp4Config(dequantize=True)
        elif quant is not None:
            with open(os.path.join(checkpoint, "config.json")) as f:
                plain = json.load(f)
            plain.pop("quantization_config")
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(plain, f)
            save_file(dequantised_state(checkpoint), os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
            source = tmp
        model, info = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, output_loading_info=True,
                                                          **extra)
    def keys(kind):  # loading info is a dict of lists (an object with those fields is read alike)
        found = info.get(kind) if isinstance(info, dict) else getattr(info, kind, None)
        return list(found or [])
    missing = [m for m in keys("missing_keys") if not m.endswith("lm_head.weight") or not config.tie_word_embeddings]
    bad = {"missing": missing, "unexpected": keys("unexpected_keys"), "mismatched": keys("mismatched_keys")}
    if any(bad.values()):
        sys.exit(f"state dict mismatch: {bad}")
    return model.to(device).eval()


class RouterWatch:
    """Routing margins of a mixture-of-experts model. `margin`: the smallest, since the last take(),
    for every token at every MoE layer, of the gap between the k-th and the (k+1)-th largest router
    output (k = num_experts_per_tok) relative to that token's largest |output|. Below bf16 noise,
    which experts a token reaches is a coin toss for any implementation, as a near tie of the top
    two logits is for the greedy token. `step_gap`: per forward, the smallest gap at any MoE layer
    of the forward's last token (the one whose logits the step reports) between its k-th and
    (k+1)-th router logits, counted in bf16 steps (the gate's bf16 logits, recomputed from its
    input and weight): 0 is an exact tie, 1 adjacent bf16 values. `gap`: the same count, smallest
    over every token of every forward since the last take() (the prompt's tokens too: a near tie
    there changes that token's keys and values in the later layers, which every later step reads).
    Hooks every router: `mlp.gate` (Qwen3-MoE) and `mlp.router` (gpt-oss, whose logits carry a
    bias), whose gaps are counted on the logits the top k is taken over, and Gemma-4's `router`,
    whose top k is taken over its bf16 softmax probabilities (its first output), where the gaps are
    counted: near-uniform probabilities tie in bf16 while their logits are still steps apart. k is
    num_experts_per_tok (top_k_experts for Gemma-4). A dense model has no margin; a model with
    experts whose router is none of these stops the script, rather than being ranked as if it had
    no routing to watch."""

    def __init__(self, model):
        c = model.config
        self.k = getattr(c, "num_experts_per_tok", None) or getattr(c, "top_k_experts", None) or 0
        self.margin = None
        self.step_gap = None
        self.gap = None
        names = (".mlp.gate", ".router")
        gates = [(n, m) for n, m in model.named_modules() if n.endswith(names)] if self.k else []
        experts = any(getattr(c, f, None) for f in ("num_experts", "num_local_experts"))
        if experts and getattr(c, "enable_moe_block", True) and not gates:
            sys.exit(f"{type(model).__name__} has experts but no module named *{', *'.join(names)}: "
                     f"the routing margin cannot be watched")
        for n, m in gates:
            if not hasattr(m, "weight") and not hasattr(m, "proj"):
                sys.exit(f"router module {n} has neither a weight to recompute its logits from nor a projection")
            m.register_forward_hook(self.hook)
        if gates:
            print(f"router watch: {len(gates)} modules ({gates[0][0]} ...), top {self.k}", file=sys.stderr)
        self.active = bool(gates)

    @staticmethod
    def ordered(v):
        """bf16 values as integers in the order of their values, one apart for adjacent values."""
        bits = v.to(torch.bfloat16).view(torch.int16).to(torch.int32)
        return torch.where(bits < 0, -(bits & 0x7FFF), bits)

    def hook(self, module, inputs, output):
        out = output[0] if isinstance(output, tuple) else output
        v = out.float().reshape(-1, out.shape[-1])
        top = torch.topk(v, self.k + 1, dim=-1).values
        gap = (top[:, self.k - 1] - top[:, self.k]) / v.abs().amax(dim=-1).clamp_min(1e-30)
        m = float(gap.min())
        self.margin = m if self.margin is None else min(self.margin, m)
        if hasattr(module, "proj"):  # Gemma-4: the top k of the bf16 probabilities themselves
            ranked = out.reshape(-1, out.shape[-1])
        else:
            h = inputs[0]
            ranked = torch.nn.functional.linear(h.reshape(-1, h.shape[-1]), module.weight, getattr(module, "bias", None))
        top = torch.topk(ranked.float(), self.k + 1, dim=-1).values
        steps = self.ordered(top[:, self.k - 1]) - self.ordered(top[:, self.k])  # per token
        last, least = int(steps[-1]), int(steps.min())
        self.step_gap = last if self.step_gap is None else min(self.step_gap, last)
        self.gap = least if self.gap is None else min(self.gap, least)

    def take(self):
        """The relative margin and the smallest gap in bf16 steps since the last take()."""
        m, g = self.margin, self.gap
        self.margin = self.gap = None
        return m, g

    def take_step(self):
        g, self.step_gap = self.step_gap, None
        return g


@torch.no_grad()
def greedy(model, prompt, steps, device, router, give_up=-1):
    """Greedy tokens, the logits of every step and, for a mixture-of-experts model, every step's
    router gap (RouterWatch.step_gap of the forward that gave the step's logits), and the smallest
    gap over every prompt token (a tie there moves every step's logits). With give_up >= 0,
    None as soon as any token's routing is that many bf16 steps apart or closer (a candidate
    --min-router-gap would drop: most random prompts meet one early, so the rest is not run)."""
    ids = torch.tensor([prompt], device=device)
    router.take_step()
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values
    logits = [out.logits[0, -1].float().cpu()]
    gaps = [router.take_step()]
    prompt_gap = router.gap  # every prompt token's routing (the caller took the watch before)
    tokens = []
    for _ in range(steps):
        if give_up >= 0 and router.gap is not None and router.gap <= give_up:
            return None
        nxt = int(torch.argmax(logits[-1]))
        tokens.append(nxt)
        out = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=past, use_cache=True)
        past = out.past_key_values
        logits.append(out.logits[0, -1].float().cpu())
        gaps.append(router.take_step())
    return tokens, logits[:-1], gaps[:-1], prompt_gap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--prompt-ids", action="append", default=[], help="comma-separated token ids; repeat for several")
    ap.add_argument("--random-prompts", type=int, default=0,
                    help="also draw this many random prompts (seeded) and keep the --keep most decisive")
    ap.add_argument("--keep", type=int, default=3)
    ap.add_argument("--min-router-gap", type=int, default=-1,
                    help="mixture of experts: keep only random prompts whose every routing decision (every token, "
                         "every MoE layer) has its k-th and (k+1)-th router logits more than this many bf16 steps apart")
    ap.add_argument("--min-prompt-len", type=int, default=1,
                    help="random prompts' shortest length (above a sliding window to exercise it)")
    ap.add_argument("--max-prompt-len", type=int, default=47, help="random prompts' longest length")
    ap.add_argument("--attn-implementation", default=None,
                    help="transformers' attn_implementation (eager for Gemma: its score scale, sliding windows)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="", help="the command line to record in the fixture (default: this one)")
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16",
                    help="the dtype the model runs in, greedy path and logits both (float32: for a model whose only "
                         "attention implementation rounds its scores to bf16 before the softmax, as gpt-oss's eager one "
                         "does; tests/oracle/README.md)")
    ap.add_argument("--reference-logits", choices=["bfloat16", "float32"], default="bfloat16",
                    help="float32: the tokens stay the bf16 run's greedy path, and every step's logits are "
                         "recomputed along that path by the same checkpoint loaded in fp32 (one forward pass "
                         "a case); each case records how far the bf16 run's logits were from them")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if not 1 <= args.min_prompt_len <= args.max_prompt_len:
        sys.exit("--min-prompt-len must be at least 1 and at most --max-prompt-len")
    model = load(args.checkpoint, device, args.attn_implementation, getattr(torch, args.dtype))
    prompts = [[int(x) for x in text.split(",")] for text in args.prompt_ids]
    # Random weights give flat logits: a greedy step whose top two logits differ by less than the
    # numerical noise of bf16 is a coin toss for any implementation. Random prompts are ranked by
    # the smallest top-1/top-2 margin along their greedy path (relative to max |logit|), and the
    # most decisive are kept; each case records its margin, so the criterion is visible.
    rng = random.Random(args.seed)
    vocab = model.config.vocab_size
    candidates = [[rng.randrange(3, vocab) for _ in range(rng.randrange(args.min_prompt_len, args.max_prompt_len + 1))]
                  for _ in range(args.random_prompts)]
    # A mixture-of-experts model ranks by the smaller of that margin and the routing margin
    # (RouterWatch): a router near tie flips an expert, and with it the step's logits.
    router = RouterWatch(model)
    scored = []
    dropped = 0
    for i, prompt in enumerate(prompts + candidates):
        router.take()
        run = greedy(model, prompt, args.steps, device, router, args.min_router_gap if i >= len(prompts) else -1)
        if run is None:
            dropped += 1
            continue
        tokens, logits, gaps, prompt_gap = run
        margins = []
        for l in logits:
            top = torch.topk(l, 2).values
            margins.append(float((top[0] - top[1]) / l.abs().max()))
        margin, gap = router.take()
        scored.append((prompt, tokens, logits, min(margins), margin, gaps, gap, prompt_gap))
    fixed = scored[:len(prompts)]
    decisive = lambda c: min(c[3], c[4]) if c[4] is not None else c[3]
    pool = [c for c in scored[len(prompts):] if c[6] is None or c[6] > args.min_router_gap]
    if args.min_router_gap >= 0:
        print(f"{len(pool)} of {args.random_prompts} random prompts route every token more than {args.min_router_gap} "
              f"bf16 steps apart ({dropped} given up early)", file=sys.stderr)
    if len(pool) < args.keep and args.random_prompts:
        sys.exit(f"only {len(pool)} of {args.random_prompts} random prompts route every token more than "
                 f"{args.min_router_gap} bf16 steps apart; draw more (--random-prompts) or shorten them")
    ranked = sorted(pool, key=lambda c: -decisive(c))[:args.keep]
    cases = []
    for prompt, tokens, logits, margin, router_margin, gaps, gap, prompt_gap in fixed + ranked:
        case = {"prompt": prompt, "tokens": tokens, "min_margin": round(margin, 5)}
        if router_margin is not None:
            case["min_router_margin"] = round(router_margin, 5)
            case["min_router_gap"] = gap
            case["router_gaps"] = gaps
            case["prompt_router_gap"] = prompt_gap
        case["logits"] = [[round(float(v), 5) for v in l] for l in logits]
        cases.append(case)
    if args.reference_logits == "float32":
        # A flat random model can put bf16 transformers' own logits further from the fp32 forward
        # pass than the comparison's tolerance (tests/oracle/README.md measures it): the fp32 pass
        # is then the reference, and the bf16 run only chooses the path.
        del model
        model = ref = load(args.checkpoint, device, args.attn_implementation, torch.float32)
        for case in cases:
            n, steps = len(case["prompt"]), len(case["logits"])
            ids = torch.tensor([case["prompt"] + case["tokens"][:steps - 1]], device=device)
            with torch.no_grad():
                full = ref(input_ids=ids).logits[0, n - 1:n - 1 + steps].double().cpu()
            bf = torch.tensor(case["logits"], dtype=torch.float64)
            case["bf16_vs_reference"] = round(float(((bf - full).abs().amax(-1) / full.abs().amax(-1)).max()), 5)
            case["logits"] = [[round(float(v), 5) for v in l] for l in full]
    import transformers
    fixture = {
        "schema": "met-oracle/1",
        "checkpoint": os.path.basename(os.path.normpath(args.checkpoint)),
        "generated_by": args.command or " ".join(["python3"] + [shlex.quote(a) for a in sys.argv]),
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "dtype": args.dtype,
        "reference_logits": args.reference_logits,
        "attn_implementation": model.config._attn_implementation,
        "steps": args.steps,
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(fixture, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()

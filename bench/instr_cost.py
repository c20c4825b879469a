#!/usr/bin/env python3
"""Per gemv kernel: a fixed cost per instruction and a weight-stream rate, fitted from two model
sizes run by the same kernels in the same call (time per instruction = fixed + bytes / rate).

    python3 bench/instr_cost.py LOG VARIANT MODEL_A MODEL_B

LOG is the output of bench/interp_variants.sh (its "mean slice / start spread" lines, the mean
slice time per instruction summed per kernel); VARIANT the variant name there; MODEL_A/B the
bench/configs names (their config.json give each kernel's weight bytes: dense Llama/Qwen shapes).
Prints a Markdown table per batch size."""
import json
import os
import re
import sys

KERNELS = ["gemv_rmsnorm_qkv_rope", "gemv_o_residual", "gemv_rmsnorm_gate_up_silu", "gemv_down_residual"]


def weight_bytes(cfg):
    h, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    hd = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    q, kv, f = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd, cfg["intermediate_size"]
    per = {"gemv_rmsnorm_qkv_rope": h * (q + 2 * kv), "gemv_o_residual": q * h,
           "gemv_rmsnorm_gate_up_silu": 2 * f * h, "gemv_down_residual": f * h}
    return layers, {k: 2 * v for k, v in per.items()}  # bf16


def slice_means(lines, model, variant, rows):
    head = re.compile(rf"^{re.escape(model)} {re.escape(variant)} r1 C={rows} ")
    for i, line in enumerate(lines):
        if head.match(line) and i + 1 < len(lines) and "mean slice" in lines[i + 1]:
            pairs = re.findall(r"(\w+)=([\d.]+)/([\d.]+)", lines[i + 1])
            return {k: float(mean) for k, mean, _ in pairs}
    sys.exit(f"{model} {variant} C={rows}: no mean-slice line in the log")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    log, variant, a, b = sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lines = open(log).read().splitlines()
    shapes = {m: weight_bytes(json.load(open(os.path.join(root, "bench", "configs", m + ".json")))) for m in (a, b)}
    for rows in (1, 16):
        print(f"\nC={rows} ({variant} in {os.path.basename(log)})\n")
        print(f"| kernel | {a} us / MB | {b} us / MB | rate | fixed per instruction |\n|---|---|---|---:|---:|")
        means = {m: slice_means(lines, m, variant, rows) for m in (a, b)}
        for k in KERNELS:
            (la, ba), (lb, bb) = (shapes[a][0], shapes[a][1][k]), (shapes[b][0], shapes[b][1][k])
            ta, tb = means[a][k] * 1e3 / la, means[b][k] * 1e3 / lb  # us per instruction
            rate = (ba - bb) / (ta - tb) / 1e6  # bytes per us / 1e6 = TB/s
            print(f"| {k} | {ta:.1f} / {ba / 1e6:.1f} | {tb:.1f} / {bb / 1e6:.1f} | {rate:.2f} TB/s | {ta - ba / rate / 1e6:.1f} us |")


if __name__ == "__main__":
    main()

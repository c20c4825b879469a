# tiny Gemma-4 fixtures: transformers bf16 (the fixture) and met cpu (forced) against transformers fp32
import json, sys, torch
from transformers import AutoModelForCausalLM
ck, fx_path, met_path = sys.argv[1:4]
fx = json.load(open(fx_path)); met = json.load(open(met_path))["sequences"]
m = AutoModelForCausalLM.from_pretrained(ck, dtype=torch.float32, attn_implementation="eager").cuda().eval()
def rel(a, b):
    a = torch.tensor(a, dtype=torch.float64); b = torch.tensor(b, dtype=torch.float64)
    return float((a - b).abs().max() / b.abs().max())
for i, c in enumerate(fx["cases"]):
    n = len(c["prompt"])
    with torch.no_grad():
        lg = m(torch.tensor([c["prompt"] + c["tokens"]]).cuda()).logits[0].double().cpu()
    rows = []
    for s in range(len(c["logits"])):
        f = lg[n - 1 + s].tolist()
        rows.append((rel(c["logits"][s], f), rel(met[i]["logits"][s], f), rel(met[i]["logits"][s], c["logits"][s])))
    w = [max(r[k] for r in rows) for k in range(3)]
    print(f"case {i} len {n}: worst tf16-vs-fp32 {w[0]:.4f}  met-vs-fp32 {w[1]:.4f}  met-vs-tf16 {w[2]:.4f}")
    print("   first 6 steps:", " ".join(f"({a:.4f},{b:.4f},{c2:.4f})" for a, b, c2 in rows[:6]))

# Gemma-3 1B step-0 puzzle: transformers bf16 (eager), transformers fp32 (eager, teacher-forced on
# the bf16 tokens), met cuda and met cpu-oracle (the same packets): every pair's relative logit
# difference per step.
import json, sys, torch
from transformers import AutoModelForCausalLM
ck, tf_path, cuda_path, cpu_path = sys.argv[1:5]
tf = json.load(open(tf_path))
cuda = json.load(open(cuda_path))["sequences"]
cpu = json.load(open(cpu_path))["sequences"]
m = AutoModelForCausalLM.from_pretrained(ck, dtype=torch.float32, attn_implementation="eager").cuda().eval()
def rel(a, b):
    a = torch.tensor(a, dtype=torch.float64); b = torch.tensor(b, dtype=torch.float64)
    return float((a - b).abs().max() / b.abs().max())
for i, c in enumerate(tf["cases"]):
    ids = c["prompt"] + c["tokens"]
    with torch.no_grad():
        lg = m(torch.tensor([ids]).cuda()).logits[0].double().cpu()
    n = len(c["prompt"])
    steps = min(len(c["logits"]), len(cuda[i]["logits"]), len(cpu[i]["logits"]))
    print(f"case {i} prompt len {n}: tokens cuda==tf {cuda[i]['tokens'][:steps]==c['tokens'][:steps]} cpu==tf {cpu[i]['tokens'][:steps]==c['tokens'][:steps]}")
    print("step  tf16-vs-fp32  cuda-vs-fp32  cpu-vs-fp32  cuda-vs-tf16  cpu-vs-tf16  cuda-vs-cpu  maxabs-fp32")
    for s in range(steps):
        f32 = lg[n - 1 + s].tolist()
        print(f"{s:4d}  {rel(c['logits'][s], f32):.4f}  {rel(cuda[i]['logits'][s], f32):.4f}  {rel(cpu[i]['logits'][s], f32):.4f}"
              f"  {rel(cuda[i]['logits'][s], c['logits'][s]):.4f}  {rel(cpu[i]['logits'][s], c['logits'][s]):.4f}"
              f"  {rel(cuda[i]['logits'][s], cpu[i]['logits'][s]):.4f}  {max(abs(v) for v in f32):.3f}")

"""Diagnostics of transformers' gpt-oss / gemma4 on a synth checkpoint: the source of the modules
that run, and per-layer intermediates of one prompt (JSON)."""
import inspect, json, sys
import torch
sys.path.insert(0, "tests/oracle")
from transformers_logits import load

ck, prompt, out = sys.argv[1], [int(v) for v in sys.argv[2].split(",")], sys.argv[3]
model = load(ck, "cuda", sys.argv[4] if len(sys.argv) > 4 else None)
src = []
def show(name, obj):
    try:
        src.append(f"##### {name}\n{inspect.getsource(obj)}")
    except Exception as e:
        src.append(f"##### {name}: {e}")
layer0 = model.model.layers[0]
src.append(f"config._attn_implementation={model.config._attn_implementation} experts_impl={getattr(model.config, '_experts_implementation', None)}")
src.append(repr(layer0))
for n, m in layer0.named_modules():
    show(f"{n} {type(m).__name__}.forward", type(m).forward)
show("model.forward", type(model.model).forward)
re = getattr(model.model, "rotary_emb", None)
if re is not None:
    show("rotary.forward", type(re).forward)
    src.append(f"inv_freq={re.inv_freq.tolist()} attention_scaling={getattr(re, 'attention_scaling', None)}")
mod = sys.modules[type(layer0).__module__]
for fn in ("apply_rotary_pos_emb", "_apply_rotary_emb", "rotate_half", "eager_attention_forward", "repeat_kv"):
    if hasattr(mod, fn): show(fn, getattr(mod, fn))
try:
    import transformers.integrations.moe as moe
    src.append(f"##### transformers.integrations.moe\n{inspect.getsource(moe)}")
except Exception as e:
    src.append(f"moe integration: {e}")
try:
    import transformers.masking_utils as mu
    show("sliding_window_overlay", mu.sliding_window_overlay)
    show("sliding_window_causal_mask_function", mu.sliding_window_causal_mask_function)
except Exception as e:
    src.append(f"masking: {e}")
rec = {}
def hook(name):
    def f(m, i, o):
        t = o[0] if isinstance(o, tuple) else o
        rec.setdefault(name, []).append(t.detach().float().cpu().reshape(-1, t.shape[-1]).tolist())
        if isinstance(o, tuple):
            for k, v in enumerate(o[1:]):
                if torch.is_tensor(v):
                    rec.setdefault(f"{name}#{k + 1}", []).append(v.detach().float().cpu().reshape(-1, v.shape[-1]).tolist())
    return f
for n, m in model.named_modules():
    if n.startswith("model.layers.") and n.count(".") in (3, 4):
        m.register_forward_hook(hook(n))
with torch.no_grad():
    o = model(input_ids=torch.tensor([prompt], device="cuda"), output_hidden_states=True)
rec["hidden_states"] = [h.float().cpu()[0].tolist() for h in o.hidden_states]
rec["logits"] = o.logits.float().cpu()[0].tolist()
json.dump(rec, open(out + ".json", "w"))
open(out + "-src.txt", "w").write("\n\n".join(src))
print("diag", ck, "modules hooked", len(rec))

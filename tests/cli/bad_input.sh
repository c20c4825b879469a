#!/usr/bin/env bash
# Bad input reaches the user as one located `error:` line and a non-zero exit, never a crash, a
# silent default or a half-written --out file. One named case per bad input (kernel tree copies,
# checkpoint directories with broken config.json and safetensors headers), plus one good
# checkpoint (headers only, sparse data) that must plan. Usage: bad_input.sh MET_BINARY
# Strict: a setup step that fails (a copy, an edit, a synthetic checkpoint) stops the run with its
# error instead of letting a later case pass or fail for the wrong reason.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 MET_BINARY" >&2
  exit 2
fi
met=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/met-bad-input.XXXXXX")
trap '[[ -n ${MET_KEEP_WORK:-} ]] || rm -rf "$work"' EXIT

passed=0
failed=0
llama_1b=$root/kernels/circuits/configs/meta-llama--Llama-3.2-1B-Instruct/config.json

# Writes a safetensors file: 8-byte little-endian header length, the JSON header, then the data
# region as a hole (truncate), so multi-GB checkpoints cost no disk. Tensors are laid out in name
# order. argv: PATH SPEC_JSON [MODE]; SPEC_JSON maps name -> [dtype, shape]; MODE: ok |
# truncated (data region cut in half) | lying (header length says more than the file holds).
write_safetensors() {
  python3 -c '
import json, struct, sys
path, spec = sys.argv[1], json.loads(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "ok"
bits = {"BF16": 16, "F16": 16, "F32": 32, "U8": 8, "F8_E4M3": 8}
header, offset = {}, 0
for name in sorted(spec):
    dtype, shape = spec[name]
    n = 1
    for d in shape:
        n *= d
    size = n * bits[dtype] // 8
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
    offset += size
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
length = len(text)
if mode == "lying":
    length = len(text) + offset + 4096
with open(path, "wb") as f:
    f.write(struct.pack("<Q", length))
    f.write(text)
    data = offset // 2 if mode == "truncated" else offset
    f.truncate(8 + len(text) + data)
' "$@"
}

# The tensors of the dense-gqa circuit for a Llama config (tied embeddings: no lm_head), as the
# SPEC_JSON of write_safetensors. argv: CONFIG_JSON [OVERRIDE_JSON]; overrides replace entries.
llama_tensors() {
  python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
over = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
h, inter, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
hd = c.get("head_dim", h // c["num_attention_heads"])
q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
t = {"model.embed_tokens.weight": ["BF16", [v, h]], "model.norm.weight": ["BF16", [h]]}
if not c.get("tie_word_embeddings", False):
    t["lm_head.weight"] = ["BF16", [v, h]]
for i in range(c["num_hidden_layers"]):
    p = "model.layers.%d." % i
    t[p + "input_layernorm.weight"] = ["BF16", [h]]
    t[p + "post_attention_layernorm.weight"] = ["BF16", [h]]
    t[p + "self_attn.q_proj.weight"] = ["BF16", [q, h]]
    t[p + "self_attn.k_proj.weight"] = ["BF16", [kv, h]]
    t[p + "self_attn.v_proj.weight"] = ["BF16", [kv, h]]
    t[p + "self_attn.o_proj.weight"] = ["BF16", [h, q]]
    t[p + "mlp.gate_proj.weight"] = ["BF16", [inter, h]]
    t[p + "mlp.up_proj.weight"] = ["BF16", [inter, h]]
    t[p + "mlp.down_proj.weight"] = ["BF16", [h, inter]]
t.update(over)
print(json.dumps(t))
' "$@"
}

# A checkpoint directory holding the Llama-3.2-1B config.json and nothing else.
new_checkpoint() {
  local dir=$work/ckpt-$1
  mkdir -p "$dir"
  cp "$llama_1b" "$dir/config.json"
  echo "$dir"
}

# A copy of the kernel tree to break.
new_tree() {
  local dir=$work/tree-$1
  cp -r "$root/kernels" "$dir"
  echo "$dir"
}

# Edits FILE with a python expression over `s` (the file's text); fails the run if nothing changed.
edit() {
  python3 -c '
import sys
path, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(path).read()
if old not in s:
    sys.exit("edit: %r not found in %s" % (old, path))
open(path, "w").write(s.replace(old, new, 1))
' "$@"
}

# expect_error NAME PATTERN... -- COMMAND...: the command exits non-zero, the first line of stderr
# starts with "error: ", stderr matches every extended-regex PATTERN, and when COMMAND has
# --out FILE, FILE was not written.
expect_error() {
  local name=$1
  shift
  local patterns=()
  while [[ $# -gt 0 && $1 != -- ]]; do
    patterns+=("$1")
    shift
  done
  shift
  local out="" prev="" a
  for a in "$@"; do
    [[ $prev == --out ]] && out=$a
    prev=$a
  done
  local err=$work/$name.stderr
  local rc=0
  "$@" >"$work/$name.stdout" 2>"$err" || rc=$?
  local why=()
  [[ $rc -eq 0 ]] && why+=("exit status 0, expected non-zero")
  [[ $rc -ge 128 ]] && why+=("killed by signal $((rc - 128))")
  head -n 1 "$err" | grep -q '^error: ' || why+=("stderr does not start with 'error: '")
  local p
  for p in "${patterns[@]}"; do
    grep -Eq -- "$p" "$err" || why+=("stderr does not match /$p/")
  done
  if [[ -n $out ]] && compgen -G "$out*" >/dev/null; then why+=("--out $out (or a temporary of it) was written"); fi
  report "$name" "${why[@]}"
}

# report NAME [REASON...]: pass when no reason is given.
report() {
  local name=$1
  shift
  if [[ $# -eq 0 ]]; then
    passed=$((passed + 1))
    echo "PASS $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name"
    local r
    for r in "$@"; do echo "    $r"; done
    local err=$work/$name.stderr
    if [[ -s $err ]]; then sed 's/^/    stderr: /' "$err" | head -n 5; fi
  fi
}

out=$work/out.md

# --- arguments ---------------------------------------------------------------------------------
expect_error unknown_device_lists_ids "h300-sxm" "h200-sxm" "mi355x" -- \
  "$met" circuit plan --hardware h300-sxm --out "$out"
expect_error unknown_device_in_kernels "h300-sxm" "h200-sxm" -- \
  "$met" circuit kernels --hardware h300-sxm
expect_error unknown_model_lists_ids "llama-9-nope" "llama-3.1-8b-instruct" -- \
  "$met" circuit plan --hardware h200-sxm --model llama-9-nope --out "$out"
expect_error rows_with_decode "--rows" "decode" -- \
  "$met" circuit plan --hardware h200-sxm --mode decode --rows 4 --out "$out"
expect_error tp_3 "--tp" "\b3\b" -- \
  "$met" circuit plan --hardware h200-sxm --tp 3 --out "$out"
expect_error unknown_format "--format" "yaml" -- \
  "$met" circuit plan --hardware h200-sxm --format yaml --out "$out"
expect_error unknown_mode "--mode" "sideways" -- \
  "$met" circuit plan --hardware h200-sxm --mode sideways --out "$out"
expect_error batch_without_rows "--rows" "batch" -- \
  "$met" circuit plan --hardware h200-sxm --mode batch --out "$out"
expect_error check_without_out "--check" -- \
  "$met" circuit plan --hardware h200-sxm --check
expect_error out_dir_missing "no-such-dir" -- \
  "$met" circuit plan --hardware h200-sxm --out "$work/no-such-dir/report.md"

# --- kernel tree copies --------------------------------------------------------------------------
tree=$(new_tree fusions_malformed)
printf '\n[[rule]\nid = "broken"\n' >>"$tree/hopper/FUSIONS.toml"
expect_error tree_fusions_malformed_toml "hopper/FUSIONS\.toml:[0-9]+" -- \
  "$met" --kernels "$tree" circuit plan --hardware h200-sxm --out "$out"

tree=$(new_tree devices_unknown_key)
edit "$tree/DEVICES.toml" 'id = "h200-sxm"' 'id = "h200-sxm"
bandwith_gbs = 4800.0'
expect_error tree_devices_unknown_key "DEVICES\.toml:[0-9]+" "bandwith_gbs" -- \
  "$met" --kernels "$tree" circuit plan --hardware h200-sxm --out "$out"

tree=$(new_tree hardware_wrong_type)
edit "$tree/hopper/HARDWARE.toml" 'min_rows = 64' 'min_rows = "sixty-four"'
expect_error tree_hardware_wrong_type "hopper/HARDWARE\.toml:[0-9]+" "min_rows" -- \
  "$met" --kernels "$tree" circuit plan --hardware h200-sxm --out "$out"

tree=$(new_tree fusions_unknown_op)
python3 -c '
import re, sys
path = sys.argv[1]
s = open(path).read()
s2 = re.sub(r"pattern = \[\"rmsnorm\"", "pattern = [\"rmsnorm2\"", s, count=1)
if s2 == s:
    sys.exit("no rmsnorm pattern in " + path)
open(path, "w").write(s2)
' "$tree/common/FUSIONS.toml" || echo "setup failed: common/FUSIONS.toml has no rmsnorm-led pattern"
expect_error tree_fusions_unknown_op "common/FUSIONS\.toml:[0-9]+" "rmsnorm2" -- \
  "$met" --kernels "$tree" circuit plan --hardware h200-sxm --out "$out"

# --- checkpoint directories ----------------------------------------------------------------------
ck=$(new_checkpoint missing_layers)
python3 -c '
import json, sys
c = json.load(open(sys.argv[1])); del c["num_hidden_layers"]
json.dump(c, open(sys.argv[1], "w"), indent=2)' "$ck/config.json"
expect_error config_missing_num_hidden_layers "ckpt-missing_layers/config\.json" "num_hidden_layers" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

ck=$(new_checkpoint not_json)
printf '{\n  "architectures": ["LlamaForCausalLM"],\n  "hidden_size": 2048,,\n}\n' >"$ck/config.json"
expect_error config_not_json "ckpt-not_json/config\.json" "line 3" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

ck=$(new_checkpoint no_config)
rm "$ck/config.json"
expect_error config_absent "ckpt-no_config/config\.json" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

ck=$(new_checkpoint st_truncated)
write_safetensors "$ck/model.safetensors" "$(llama_tensors "$ck/config.json")" truncated
expect_error safetensors_truncated "ckpt-st_truncated/model\.safetensors" "past the [0-9]+ data bytes" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

ck=$(new_checkpoint st_too_short)
printf '\x10\x00\x00' >"$ck/model.safetensors"
expect_error safetensors_shorter_than_length "ckpt-st_too_short/model\.safetensors" "too short" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

ck=$(new_checkpoint st_lying)
write_safetensors "$ck/model.safetensors" "$(llama_tensors "$ck/config.json")" lying
expect_error safetensors_header_length_lies "ckpt-st_lying/model\.safetensors" "header length [0-9]+ exceeds file size" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

ck=$(new_checkpoint st_shape)
write_safetensors "$ck/model.safetensors" \
  "$(llama_tensors "$ck/config.json" '{"model.embed_tokens.weight": ["BF16", [128256, 1024]]}')"
# The message must name the checkpoint file holding the tensor, not only the circuit's node.
expect_error safetensors_shape_disagrees_with_config "ckpt-st_shape/model\.safetensors" "model\.embed_tokens\.weight" \
  "128256, 1024" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

ck=$(new_checkpoint st_missing_tensor)
write_safetensors "$ck/model.safetensors" "$(llama_tensors "$ck/config.json" | python3 -c '
import json, sys
t = json.load(sys.stdin); del t["model.layers.7.mlp.down_proj.weight"]; print(json.dumps(t))')"
expect_error safetensors_missing_tensor "ckpt-st_missing_tensor" "model\.layers\.7\.mlp\.down_proj\.weight" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

ck=$(new_checkpoint missing_shard)
all=$(llama_tensors "$ck/config.json")
python3 -c '
import json, sys
t = json.loads(sys.argv[1])
names = sorted(t)
half = len(names) // 2
first = {n: t[n] for n in names[:half]}
wm = {n: ("model-00001-of-00002.safetensors" if i < half else "model-00002-of-00002.safetensors") for i, n in enumerate(names)}
json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, open(sys.argv[2] + "/model.safetensors.index.json", "w"))
print(json.dumps(first))' "$all" "$ck" >"$work/first.json"
write_safetensors "$ck/model-00001-of-00002.safetensors" "$(cat "$work/first.json")"
expect_error missing_shard "ckpt-missing_shard/model-00002-of-00002\.safetensors" "model\.safetensors\.index\.json" -- \
  "$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$out"

# --- the good checkpoint ---------------------------------------------------------------------------
ck=$(new_checkpoint good)
write_safetensors "$ck/model.safetensors" "$(llama_tensors "$ck/config.json")"
good=$work/good.md
rc=0
"$met" circuit plan --hardware h200-sxm --checkpoint "$ck" --out "$good" 2>"$work/good_checkpoint.stderr" || rc=$?
why=()
[[ $rc -ne 0 ]] && why+=("exit status $rc, expected 0")
[[ -s $good ]] || why+=("no report written to --out")
if [[ -s $good ]]; then
  grep -q "ckpt-good (circuit dense-gqa, LlamaForCausalLM, declared formats)" "$good" ||
    why+=("the report's model line does not say 'declared formats'")
  grep -Eq "^\| layers:full linear:qkv \| bf16 \| bf16 \| safetensors header \|" "$good" ||
    why+=("the Formats table does not show linear:qkv as bf16 weights and activations declared by the safetensors header")
fi
report good_checkpoint_plans_with_declared_formats "${why[@]}"

# --- rope scaling: the real Llama-3.2-1B config (llama3 rope) emits; other rope types are refused --
for hw in host-cpu h200-sxm; do
  assets=$work/assets-llama32-$hw
  rc=0
  "$met" circuit emit --hardware "$hw" --checkpoint "$ck" --out "$assets" --max-ctx 1024 --prefill-buckets 128 \
    2>"$work/llama32_rope_emits_$hw.stderr" || rc=$?
  why=()
  [[ $rc -ne 0 ]] && why+=("exit status $rc, expected 0")
  [[ -s $assets/model.pkt ]] || why+=("no model.pkt written")
  if [[ -s $assets/build.json ]]; then
    grep -q '"type": "llama3"' "$assets/build.json" || why+=("build.json does not record the llama3 rope")
  fi
  report "llama32_llama3_rope_emits_for_$hw" "${why[@]}"
done
ck=$(new_checkpoint dynamic_rope)
edit "$ck/config.json" '"rope_type": "llama3"' '"rope_type": "dynamic"'
write_safetensors "$ck/model.safetensors" "$(llama_tensors "$ck/config.json")"
expect_error rope_type_dynamic_refused "ckpt-dynamic_rope/config\.json: rope_scaling: rope type 'dynamic' is not implemented" -- \
  "$met" circuit emit --hardware host-cpu --checkpoint "$ck" --out "$work/assets-dynamic"
# A yarn block carrying llama3's keys: each unknown key is refused by name, never ignored.
ck=$(new_checkpoint yarn_rope)
edit "$ck/config.json" '"rope_type": "llama3"' '"rope_type": "yarn"'
write_safetensors "$ck/model.safetensors" "$(llama_tensors "$ck/config.json")"
expect_error rope_yarn_unknown_key "ckpt-yarn_rope/config\.json: rope_scaling: unknown key '[a-z_]*' for rope type 'yarn'" -- \
  "$met" circuit emit --hardware host-cpu --checkpoint "$ck" --out "$work/assets-yarn"

# A group of 12 query heads per KV head (tests/oracle/configs/tiny-gemma4-g16.json with 12 query
# heads: groups of 6 in the sliding layers, 12 in the full ones): hopper's split-merge decode takes
# groups of 1, 2, 4 or a multiple of 8, so the h200-sxm emit refuses the plan's gap, naming the rule
# and the head counts, and writes nothing (it prints its planning line first, so expect_error's
# first-line check does not apply). The same config with 16 query heads emits (gpu_packets_*-g16-*).
mkdir -p "$work/g12-config"
cp "$root/tests/oracle/configs/tiny-gemma4-g16.json" "$work/g12-config/config.json"
edit "$work/g12-config/config.json" '"num_attention_heads": 16' '"num_attention_heads": 12'
"$met" model synth --config "$work/g12-config/config.json" --seed 1 --dtype bf16 --out "$work/g12" >/dev/null
rc=0
"$met" circuit emit --hardware h200-sxm --checkpoint "$work/g12" --out "$work/assets-g12" 2>"$work/g12_refused.stderr" >/dev/null || rc=$?
why=()
[[ $rc -eq 0 ]] && why+=("exit status 0, expected non-zero")
[[ $rc -ge 128 ]] && why+=("killed by signal $((rc - 128))")
grep -q "^error: emit: .* gap group" "$work/g12_refused.stderr" || why+=("stderr has no 'error: emit: ... gap group' line")
grep -q "rule 'attn_decode_split_merge' requires .*(heads = 12, kv_heads = [12])" "$work/g12_refused.stderr" ||
  why+=("stderr does not name the split-merge rule with heads = 12")
compgen -G "$work/assets-g12*" >/dev/null && why+=("--out $work/assets-g12 (or a temporary of it) was written")
report emit_refuses_group12_h200 "${why[@]}"

# --- run: teacher forcing, campaigns, the cuda backend and the opcode harness --------------------
tiny=$work/tiny-run
"$met" model synth --config "$root/tests/oracle/configs/tiny-llama3.json" --seed 1 --dtype bf16 --out "$tiny" >/dev/null 2>&1
"$met" circuit emit --hardware host-cpu --checkpoint "$tiny" --out "$tiny-a" --max-ctx 256 --threads 2 2>/dev/null
fixture=$root/tests/oracle/fixtures/tiny-llama3-bf16.json
expect_error split_keys_zero "--split-keys" "\b0\b" -- \
  "$met" circuit emit --hardware h200-sxm --checkpoint "$tiny" --out "$work/split-keys-0" --split-keys 0
expect_error follow_missing_file "no-such\.json" -- \
  "$met" circuit run --assets "$tiny-a" --prompt-ids 1,2 --threads 2 --follow "$work/no-such.json"
expect_error follow_other_prompts "tiny-llama3-bf16\.json: 4 cases for 2 prompts" -- \
  "$met" circuit run --assets "$tiny-a" --prompt-ids 1,2 --prompt-ids 3 --threads 2 --follow "$fixture"
expect_error campaign_needs_cuda "--campaign measures the cuda backend" -- \
  "$met" circuit run --assets "$tiny-a" --campaign decode:1
expect_error campaign_bad_kind "--campaign 'sideways:1': kind 'sideways'" -- \
  "$met" circuit run --assets "$tiny-a" --backend cuda --campaign sideways:1
expect_error unknown_backend "--backend 'tpu'" -- \
  "$met" circuit run --assets "$tiny-a" --backend tpu --prompt-ids 1
expect_error cuda_refuses_cpu_assets "emitted for class 'cpu'; the cuda backend runs the hopper interpreter" -- \
  "$met" circuit run --assets "$tiny-a" --backend cuda --prompt-ids 1
expect_error serve_unknown_backend "--backend 'tpu': expected cpu, cuda or cpu-oracle" -- \
  "$met" serve --assets "$tiny-a" --backend tpu --port 0
# Where no NVIDIA driver is installed (CI), --backend cuda on GPU assets says so and stops.
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  "$met" circuit emit --hardware h200-sxm --checkpoint "$tiny" --out "$tiny-h" --max-ctx 256 --decode-rungs 1 \
    --prefill-buckets 64 2>/dev/null
  expect_error cuda_without_driver "cannot open libcuda\.so\.1 \(no NVIDIA driver on this machine\?\)|built without nvcc" -- \
    "$met" circuit run --assets "$tiny-h" --backend cuda --prompt-ids 1
fi
expect_error optest_no_match "optest: no case matched" -- \
  "$met" circuit optest --assets "$tiny-a" --backend cpu-oracle --filter no-such-opcode

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]

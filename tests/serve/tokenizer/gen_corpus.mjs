// Writes corpus.json: the strings met's tokenizer is compared on against Hugging Face tokenizers.
// Deterministic (seeded PRNG, no clock, no environment): `node gen_corpus.mjs` regenerates the
// committed file byte for byte. Every string is valid Unicode (no lone surrogates).
import { writeFileSync } from "node:fs";

let state = 0x9e3779b9;
function rand() {  // mulberry32
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));  // inclusive
const pick = (a) => a[Math.floor(rand() * a.length)];

const phrases = [
  "Hello, world!", "The quick brown fox jumps over the lazy dog.", "I'm sure they've said we'd go; you'll see.",
  "IT'S ALL CAPS, ISN'T IT? WE'LL SEE, WE'D KNOW.", "Ceci n'est pas une pipe — c'était déjà là.",
  "Größenwahn über Straße, Fußgänger! Äpfel, Öl, Übung.", "¿Dónde está la biblioteca? ¡Olé! Señor Muñoz.",
  "Crème brûlée à la française, naïve façade, cœur.", "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
  "Đây là tiếng Việt có dấu: Nguyễn Thị Minh Khai.", "İstanbul'da ılık şırıl şırıl; Ağaç, ÇİÇEK.",
  "Съешь же ещё этих мягких французских булок, да выпей чаю.", "Привет, мир! Ёлка, ЁЖИК, щука.",
  "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε!", "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν.",
  "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣٤٥٦٧٨٩٠.", "שלום עולם! זהו טקסט בעברית עם ניקוד: שָׁלוֹם.",
  "नमस्ते दुनिया! यह हिन्दी का वाक्य है। क्षत्रिय, ज्ञान, श्री।", "สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
  "你好，世界！这是一个中文句子。我们今天去公园散步吧。", "漢字と仮名が混じった日本語の文章です。カタカナ、ひらがな。",
  "東京都千代田区丸の内１－２－３　ＡＢＣビル　５階", "안녕하세요, 세계! 한국어 문장입니다. 감사합니다.",
  "각 decomposed hangul jamo 가각", "e\u0301 vs \u00e9, A\u030a vs \u00c5, n\u0303 vs \u00f1, \u212b angstrom, \u2126 ohm",
  "ﬁ ligature, ｆｕｌｌｗｉｄｔｈ, ①②③, ㎞, ½ ¼ ¾, x² y³", "Ελληνικά: Ά Έ Ή vs \u0391\u0301",
  "emoji: 😀😃😄😁 👍🏽 👩🏾‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ❤️ ✌🏿 🤷‍♀️", "🧑🏻‍🤝‍🧑🏿 🫶🏼 🐈‍⬛ 👁️‍🗨️ #️⃣ 1️⃣ ©️ ™️",
  "math: ∀x∈ℝ, ∃y: x² + y² ≤ 1 ⇒ |x| ≤ 1; ∑ᵢ aᵢ = ∫₀¹ f(t) dt ≈ π/4", "currency: $100, €20, £5, ¥1000, ₹50, ₩3000, ₿0.5",
  "line one\nline two\r\nline three\rline four", "tabs\tand\t\tmore\t\t\ttabs", "   leading spaces", "trailing spaces   ",
  "  ", " ", "\n", "\n\n\n", "\r\n\r\n", "\t", "", "a", "A", "0", "00", "000", "0000", "12345678901234567890",
  "3.14159265358979323846", "1,234,567.89", "1e-10 2E+5 0x1F 0b1010", "version 2.0.1-rc.3+build.42",
  "unicode spaces:\u00a0nbsp\u2002en\u2003em\u2009thin\u200bzw\u3000ideographic\u202fnarrow\u205fmath\u1680ogham",
  "other separators:\u2028line\u2029para\u0085nel\u000bvt\u000cff\u180emongolian",
  "punctuation!!! ??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}", "«quotes» „German“ “curly” ‘single’ 「かぎ」 『二重』",
  "don't DON'T Don'T it's IT'S we're WE'RE they've THEY'VE I'm I'M you'll YOU'LL he'd HE'D", "'s 't 're 've 'm 'll 'd",
  "https://example.com/path?query=1&other=two#frag", "user@example.org, +1 (555) 123-4567",
  "C:\\Windows\\System32\\drivers\\etc\\hosts", "/usr/local/bin/python3 --version",
];

const code = [
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
  "for (let i = 0; i < 10; i++) { console.log(`i=${i}`); }",
  "fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u8> = vec![1, 2, 3];\n    Ok(())\n}",
  "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%smith%' ORDER BY id DESC;",
  "<html>\n  <body>\n    <div class=\"x\">Hi &amp; bye</div>\n  </body>\n</html>",
  "{\"key\": [1, 2.5, true, null, \"str\"], \"nested\": {\"a\": {}}}",
  "x = [i**2 for i in range(100) if i % 3 == 0]  # comprehension",
  "    \n\t\n  \t  \n", "if(a&&b||!c){x+=1;}else{y-=2;}", "a->b->c; p = &q; **ptr = 0;",
  "$ ls -la | grep '^d' | awk '{print $9}' > dirs.txt 2>&1",
  "\\begin{equation} E = mc^2 \\end{equation}", "// comment\n/* block\n   comment */\n",
  "    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)",
];

const specials = [
  "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
  "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|vision_start|>", "<|image_pad|>",
  "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
  "<|reserved_special_token_5|>", "<|python_tag|>",
  "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
  "<unused0>", "<unused42>", "</table>", "<table>", "</em>", "[multimodal]", "▁▁", "▁▁▁▁", "\t\t\t", "▁",
  "<|im_start", "im_end|>", "<|", "|>", "<bo", "s>", "<0x41>", "<0xE2>",
];

const emoji = ["😀", "🎉", "🔥", "💯", "🚀", "🙏", "👍", "👍🏻", "👍🏿", "👩‍🔬", "🧑‍🚀", "👨‍👨‍👦", "🏴‍☠️",
  "🏳️‍⚧️", "🇺🇸", "🇩🇪", "❤️‍🔥", "😶‍🌫️", "🤦🏼‍♂️", "🧔🏽‍♀️", "☕", "⚡", "✅", "❌", "🀄", "🃏", "🦀", "🐍"];

// Script ranges whose code points are all assigned letters/marks/symbols in Unicode 14 or earlier.
const ranges = [
  [0x21, 0x7e], [0xc0, 0xff], [0x100, 0x17f], [0x180, 0x24f], [0x391, 0x3a1], [0x3a3, 0x3a9], [0x3b1, 0x3c9],
  [0x400, 0x45f], [0x5d0, 0x5ea], [0x621, 0x64a], [0x660, 0x669], [0x905, 0x939], [0x93e, 0x94d], [0x966, 0x96f],
  [0xe01, 0xe3a], [0xe40, 0xe4e], [0x4e00, 0x9fa5], [0x3041, 0x3096], [0x30a1, 0x30fa], [0xac00, 0xd7a3],
  [0x1f600, 0x1f64f], [0x1f300, 0x1f320], [0x2200, 0x22ff], [0x2500, 0x257f], [0xff01, 0xff5e], [0x300, 0x36f],
  [0x10a0, 0x10c5], [0x531, 0x556], [0x1100, 0x1112], [0x1161, 0x1175], [0x11a8, 0x11c2],
];
const wsChars = [" ", " ", " ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003", "\u200b", "\u0085", "\u2028", "\u180e"];

function randomScript(n) {
  const r = pick(ranges);
  let s = "";
  for (let i = 0; i < n; i++) s += String.fromCodePoint(int(r[0], r[1]));
  return s;
}
function randomWord() {
  const k = int(0, 9);
  if (k < 4) return pick(phrases).split(/\s+/).filter(Boolean)[0] ?? "x";
  if (k < 7) return randomScript(int(1, 8));
  if (k < 8) return String(int(0, 10 ** int(1, 9)));
  if (k < 9) return pick(emoji);
  return pick(specials);
}
function randomWs() {
  let s = "";
  const n = int(1, 4);
  for (let i = 0; i < n; i++) s += pick(wsChars);
  return s;
}

const out = [];
const seen = new Set();
const add = (s) => { if (!seen.has(s)) { seen.add(s); out.push(s); } };

for (const p of phrases) add(p);
for (const c of code) add(c);
for (const s of specials) { add(s); add(`text ${s} more`); add(`x${s}y`); add(` ${s} `); add(`${s}\n${s}`); }
for (const e of emoji) { add(e); add(`word${e}word ${e}${e}`); }
// Special tokens of every tokenizer inside chat-like text.
for (let i = 0; i < 150; i++) {
  const a = pick(specials), b = pick(specials);
  add(`${a}${pick(["user", "system", "assistant", " user", "model"])}\n${pick(phrases)}${b}${randomWs()}${pick(phrases)}`);
}
// Random mixes of words, whitespace and punctuation.
for (let i = 0; i < 900; i++) {
  const n = int(1, 14);
  let s = int(0, 4) === 0 ? randomWs() : "";
  for (let j = 0; j < n; j++) {
    s += randomWord();
    const k = int(0, 9);
    s += k < 6 ? " " : k < 8 ? randomWs() : pick([".", ",", "!", "?", ":", ";", "-", "'s", "'", "\"", "...", "(", ")"]);
  }
  add(s);
}
// Runs of one script, some long.
for (let i = 0; i < 300; i++) add(randomScript(int(1, 60)));
// Whitespace runs and digits runs.
for (let i = 0; i < 120; i++) { let s = ""; const n = int(1, 20); for (let j = 0; j < n; j++) s += pick(wsChars); add(s + pick(["", "x", "1", "."])); }
for (let i = 0; i < 100; i++) { let s = ""; const n = int(1, 40); for (let j = 0; j < n; j++) s += String(int(0, 9)); add(pick(["", " ", "x", "$"]) + s + pick(["", " ", "a", ".5"])); }
// Long words and long repeated runs.
for (const [c, n] of [["a", 300], ["ab", 200], ["▁", 40], [" ", 100], ["\n", 64], ["=", 90], ["0", 77], ["é", 120], ["字", 150], ["😀", 50], ["\t", 33], ["-", 257]]) add(c.repeat(n));
for (let i = 0; i < 40; i++) { let s = ""; const n = int(50, 400); for (let j = 0; j < n; j++) s += String.fromCharCode(int(97, 122)); add(s); }
for (let i = 0; i < 40; i++) add(randomScript(int(200, 600)));
// Code with random indentation.
for (let i = 0; i < 120; i++) add(pick(code).replace(/\n/g, "\n" + " ".repeat(int(0, 8))) + pick(["", "\n", "\n\n", " "]));
// Decomposed / compatibility forms (NFC matters).
for (let i = 0; i < 100; i++) {
  let s = "";
  const n = int(1, 10);
  for (let j = 0; j < n; j++) s += String.fromCharCode(int(0x41, 0x7a)) + String.fromCodePoint(int(0x300, 0x315));
  add(s + " " + "\u1100\u1161\u11a8".repeat(int(1, 3)));
}
// Mixed everything, longer.
for (let i = 0; i < 200; i++) {
  let s = "";
  const n = int(2, 6);
  for (let j = 0; j < n; j++) s += pick([pick(phrases), pick(code), randomScript(int(1, 20)), pick(emoji), pick(specials), randomWs()]);
  add(s);
}

writeFileSync(new URL("./corpus.json", import.meta.url), JSON.stringify({
  generated_by: "node tests/serve/tokenizer/gen_corpus.mjs",
  strings: out,
}, null, 1) + "\n");
console.log(`corpus.json: ${out.length} strings`);

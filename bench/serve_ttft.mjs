// Time to first token under a burst: CLIENTS streaming chats sent at once to a running `met serve`
// (any model, any backend), each a short distinct user message answered with TOKENS tokens
// (ignore_eos, greedy). Prints TTFT p50/p90/max, end-to-end and inter-token p50, tokens per second
// and the failures, and exits non-zero on any failure. What packed prefill changes shows here: the
// burst's prompts share prefill launches instead of waiting for each other's. Node's fetch only.
// Usage: node bench/serve_ttft.mjs URL [CLIENTS] [TOKENS] [ROUNDS]
//   e.g. node bench/serve_ttft.mjs http://127.0.0.1:8080 32 64 3   (MET_API_KEY for --api-key)
import { sseEvents } from "./sse.mjs";

const [base, clientsArg, tokensArg, roundsArg] = process.argv.slice(2);
if (!/^https?:\/\/[^/]+$/.test(base ?? "")) {
  console.error("usage: node bench/serve_ttft.mjs URL [CLIENTS] [TOKENS] [ROUNDS]   (URL: http://host:port)");
  process.exit(2);
}
const clients = Number(clientsArg ?? 32), tokens = Number(tokensArg ?? 64), rounds = Number(roundsArg ?? 3);
const headers = { "Content-Type": "application/json" };
if (process.env.MET_API_KEY) headers.Authorization = `Bearer ${process.env.MET_API_KEY}`;

function pct(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}
const ms = (s) => (s * 1000).toFixed(1);

const models = await (await fetch(`${base}/v1/models`, { headers })).json();
const model = process.env.MET_MODEL ?? models.data[0].id;

// One streaming chat: {ttft, e2e, gaps[], tokens, error}.
async function chat(round, i) {
  const t0 = performance.now();
  const out = { ttft: NaN, e2e: NaN, gaps: [], tokens: 0, error: null };
  const topics = ["rivers", "bridges", "clocks", "gardens", "lighthouses", "trains", "maps", "bees"];
  const content = `Round ${round}, client ${i}: write a few sentences about ${topics[i % topics.length]} and the number ${i * 13}.`;
  try {
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model, messages: [{ role: "user", content }], max_tokens: tokens, ignore_eos: true, temperature: 0,
                             stream: true, stream_options: { include_usage: true } }),
    });
    if (r.status !== 200) throw new Error(`status ${r.status}: ${(await r.text()).slice(0, 200)}`);
    let last = NaN, usage = null;
    for await (const j of sseEvents(r.body)) {
      if (j.usage) usage = j.usage;
      if (!j.choices.length || !j.choices[0].delta.content) continue;
      const now = performance.now();
      if (Number.isNaN(last)) out.ttft = (now - t0) / 1000;
      else out.gaps.push((now - last) / 1000);
      last = now;
    }
    if (!usage || usage.completion_tokens !== tokens) throw new Error(`usage ${JSON.stringify(usage)}`);
    out.tokens = usage.completion_tokens;
    out.e2e = (performance.now() - t0) / 1000;
  } catch (e) {
    out.error = String(e);
  }
  return out;
}

let failures = 0;
console.log(`serve_ttft: ${base} model ${model}: ${rounds} round(s) of ${clients} simultaneous streaming chats, ${tokens} tokens each`);
for (let round = 0; round < rounds; ++round) {
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: clients }, (_, i) => chat(round, i)));
  const wall = (performance.now() - t0) / 1000;
  const ok = results.filter((r) => !r.error);
  const errors = results.filter((r) => r.error);
  failures += errors.length;
  const ttft = ok.map((r) => r.ttft), e2e = ok.map((r) => r.e2e), gaps = ok.flatMap((r) => r.gaps);
  const total = ok.reduce((n, r) => n + r.tokens, 0);
  console.log(`round ${round}${round === 0 ? " (warm-up)" : ""}: ok ${ok.length}/${clients}  ` +
              `ttft p50 ${ms(pct(ttft, 0.5))} ms p90 ${ms(pct(ttft, 0.9))} ms max ${ms(pct(ttft, 1))} ms  ` +
              `e2e p50 ${ms(pct(e2e, 0.5))} ms  itl p50 ${ms(pct(gaps, 0.5))} ms  ${(total / wall).toFixed(1)} tok/s`);
  for (const e of errors.slice(0, 5)) console.log(`  failure: ${e.error}`);
}
console.log(`serve_ttft: ${failures} failure(s)`);
process.exit(failures ? 1 : 0);

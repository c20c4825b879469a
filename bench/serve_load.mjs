// Load on a running `met serve` (loopback only; started by bench/serve_load.sh): ROUNDS rounds of
// CLIENTS concurrent streaming completions, each TOKENS tokens (ignore_eos). Prints p50/p99 time to
// first token and inter-token latency, errors, the running gauge after each round (a leaked slot
// shows as > 0) and the server's RSS from /proc/PID/status (first round is the warm-up; RSS must
// stay flat after it). Bounded: CLIENTS * ROUNDS requests and a wall-clock limit.
import { readFileSync } from "node:fs";

import { sseEvents } from "./sse.mjs";

const base = process.env.MET_BASE_URL;
if (!/^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/.test(base ?? "")) {
  console.error(`serve_load: MET_BASE_URL must be a loopback URL, got ${base}`);
  process.exit(2);
}
const pid = Number(process.env.MET_SERVER_PID);
const model = process.env.MET_MODEL;
const clients = Number(process.env.CLIENTS ?? 64);
const rounds = Number(process.env.ROUNDS ?? 3);
const tokens = Number(process.env.TOKENS ?? 16);
const limitMs = Number(process.env.LIMIT_S ?? 240) * 1000;
const started = performance.now();

function rssKiB() {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m);
  return m ? Number(m[1]) : NaN;
}
async function gauge(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
  return line === undefined ? NaN : Number(line.split(" ").pop());
}
function pct(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}
const ms = (s) => (s * 1000).toFixed(1);

// One streaming client: returns {ttft, gaps[], tokens, error}.
async function one(i) {
  const t0 = performance.now();
  const out = { ttft: NaN, gaps: [], chunks: 0, error: null, usage: null };
  try {
    const r = await fetch(`${base}/v1/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model, prompt: `Client ${i} says`, max_tokens: tokens, ignore_eos: true, temperature: 0.8, seed: i,
                             stream: true, stream_options: { include_usage: true } }),
    });
    if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
    let last = NaN;
    for await (const j of sseEvents(r.body)) {
      if (j.usage) out.usage = j.usage;
      if (!j.choices.length || !j.choices[0].text) continue;
      const now = performance.now();
      if (Number.isNaN(last)) out.ttft = (now - t0) / 1000;
      else out.gaps.push((now - last) / 1000);
      last = now;
      out.chunks++;
    }
    if (!out.usage || out.usage.completion_tokens !== tokens) throw new Error(`usage ${JSON.stringify(out.usage)}`);
  } catch (e) {
    out.error = String(e);
  }
  return out;
}

const rss = [rssKiB()];
const ttft = [], itl = [];
let errors = 0, leaked = 0, requests = 0, generated = 0;
let measuredSeconds = 0;
for (let round = 0; round < rounds; ++round) {
  if (performance.now() - started > limitMs) { console.log(`stopping: the ${limitMs / 1000} s limit passed`); break; }
  const t0 = performance.now();
  const res = await Promise.all(Array.from({ length: clients }, (_, i) => one(round * clients + i)));
  const secs = (performance.now() - t0) / 1000;
  const errs = res.filter((r) => r.error);
  errors += errs.length;
  for (const e of errs.slice(0, 3)) console.log(`  error: ${e.error}`);
  requests += res.length;
  // The gauge may trail the last [DONE] by a moment: a slot still held after 2 s is a leak.
  let running = await gauge("vllm:num_requests_running");
  for (let i = 0; i < 40 && running !== 0; ++i) {
    await new Promise((r) => setTimeout(r, 50));
    running = await gauge("vllm:num_requests_running");
  }
  if (running !== 0) leaked++;
  rss.push(rssKiB());
  if (round > 0) {  // round 0 warms up (allocations, page faults)
    for (const r of res.filter((x) => !x.error)) { ttft.push(r.ttft); itl.push(...r.gaps); generated += tokens; }
    measuredSeconds += secs;
  }
  console.log(`round ${round}${round === 0 ? " (warm-up)" : ""}: ${clients} clients x ${tokens} tokens in ${secs.toFixed(2)} s, ` +
              `${errs.length} errors, running gauge after ${running}, RSS ${(rss.at(-1) / 1024).toFixed(1)} MiB`);
}
const growth = rss.length > 2 ? (rss.at(-1) - rss[1]) / rss[1] : 0;
console.log(`requests ${requests}, errors ${errors}, rounds with a leaked slot ${leaked}`);
console.log(`TTFT p50 ${ms(pct(ttft, 0.5))} ms, p99 ${ms(pct(ttft, 0.99))} ms`);
console.log(`inter-token latency p50 ${ms(pct(itl, 0.5))} ms, p99 ${ms(pct(itl, 0.99))} ms`);
console.log(`throughput ${(generated / measuredSeconds).toFixed(1)} tokens/s over the measured rounds`);
console.log(`RSS after warm-up ${(rss[1] / 1024).toFixed(1)} MiB -> end ${(rss.at(-1) / 1024).toFixed(1)} MiB (${(growth * 100).toFixed(1)}%)`);
const ok = errors === 0 && leaked === 0 && growth < 0.05;
console.log(ok ? "PASS: no errors, no leaked slots, RSS flat (< 5% growth after warm-up)" : "MISS: see above");
process.exit(ok ? 0 : 1);

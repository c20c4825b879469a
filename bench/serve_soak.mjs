// The soak of issue 19 on a running `met serve` (loopback only; started by bench/serve_soak.sh):
// CLIENTS (64) concurrent loops until SOAK_S seconds have passed, each request drawn at random
// (seeded: SOAK_SEED, printed) among good requests through the official OpenAI client (chat and
// completion, streaming and not, max_tokens 8-32), clients that go away (an abort after the first
// chunk or after a random delay, streaming and not) and the hostile cases of tests/serve/hostile/
// that fetch can send. Every outcome is counted per kind as expected (2xx for a good request, an
// abort for an aborted one, the 4xx and error code each hostile case must get) or unexpected
// (anything else: 5xx, a connection error on a request that was not aborted, a timeout, a stream
// without its finish). Checks: no unexpected outcome, every kind sent, RSS (VmRSS of
// /proc/PID/status) grown < 5% from after the warm-up (WARMUP_S, 60 s) to a few idle seconds after
// the load, vllm:num_requests_running and vllm:num_requests_waiting back to 0 within 10 s of the
// load's end, /health 200 at the end. Bounded: a request timeout (REQUEST_TIMEOUT_S) and a
// wall-clock limit past which the process exits. SOAK_KINDS narrows the mix (below). Last line:
// "N passed, M failed".
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(fileURLToPath(new URL("../tests/serve/client/package.json", import.meta.url)));
const OpenAI = require("openai").default ?? require("openai");

const base = process.env.MET_BASE_URL;
if (!/^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/.test(base ?? "")) {
  console.error(`serve_soak: MET_BASE_URL must be a loopback URL, got ${base}`);
  process.exit(2);
}
const pid = Number(process.env.MET_SERVER_PID);
const model = process.env.MET_MODEL ?? "tiny-qwen3";
const clients = Number(process.env.CLIENTS ?? 64);
const soakMs = Number(process.env.SOAK_S ?? 600) * 1000;
const warmupMs = Math.min(Number(process.env.WARMUP_S ?? 60) * 1000, soakMs / 3);
const requestTimeoutMs = Number(process.env.REQUEST_TIMEOUT_S ?? 300) * 1000;
const seed = Number(process.env.SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
const INT64_MAX = "9223372036854775807";
const started = performance.now();
const elapsed = () => ((performance.now() - started) / 1000).toFixed(1);

// Whatever happens, the process ends: the load stops at soakMs, a request after requestTimeoutMs,
// the checks take under a minute.
const hardLimitMs = soakMs + requestTimeoutMs + 90_000;
setTimeout(() => {
  console.log(`FAIL: the wall-clock limit of ${hardLimitMs / 1000} s passed; exiting`);
  console.log("0 passed, 1 failed");
  process.exit(1);
}, hardLimitMs).unref();

// mulberry32: one stream per client loop, from the printed seed.
function rng(s) {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const int = (r, lo, hi) => lo + Math.floor(r() * (hi - lo + 1));
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

function rssKiB() {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m);
  return m ? Number(m[1]) : NaN;
}
async function gauge(name) {
  const text = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`));
  return line === undefined ? NaN : Number(line.split(" ").pop());
}

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0, timeout: requestTimeoutMs });
const WORDS = ["the", "soak", "runs", "many", "small", "requests", "while", "clients", "leave", "early", "and", "some", "lie"];
const words = (r, n) => Array.from({ length: n }, () => WORDS[int(r, 0, WORDS.length - 1)]).join(" ");
const chatBody = (r) => ({ model, messages: [{ role: "user", content: words(r, int(r, 1, 12)) }], max_tokens: int(r, 8, 32),
                           temperature: r() < 0.5 ? 0 : 0.8, seed: int(r, 0, 1e6) });
const completionBody = (r) => ({ model, prompt: words(r, int(r, 1, 24)), max_tokens: int(r, 8, 32),
                                 temperature: r() < 0.5 ? 0 : 0.8, seed: int(r, 0, 1e6) });

// An outcome: {ok: true} or {ok: false, why}; an aborted request also says aborted: true.
const good = { ok: true };
const bad = (why) => ({ ok: false, why });
const isAbort = (e) => e instanceof OpenAI.APIUserAbortError || e?.name === "AbortError" ||
                       (e instanceof OpenAI.APIConnectionError && /abort/i.test(String(e.cause ?? e.message)));

function checkFinish(reason, usage, maxTokens) {
  if (reason !== "stop" && reason !== "length") return bad(`finish_reason ${reason}`);
  if (usage && usage.completion_tokens > maxTokens) return bad(`usage ${JSON.stringify(usage)} over max_tokens ${maxTokens}`);
  return good;
}
async function streamed(iter, maxTokens, pick) {
  let reason = null, usage = null, chunks = 0;
  for await (const c of iter) {
    ++chunks;
    if (c.usage) usage = c.usage;
    const f = c.choices?.[0]?.finish_reason;
    if (f) reason = f;
    pick?.(c);
  }
  if (!chunks) return bad("an empty stream");
  return checkFinish(reason, usage, maxTokens);
}

// Good requests: any throw is unexpected (the client does not retry).
async function chatStream(r) {
  const b = chatBody(r);
  return streamed(await client.chat.completions.create({ ...b, stream: true, stream_options: { include_usage: true } }), b.max_tokens);
}
async function chat(r) {
  const b = chatBody(r);
  const c = await client.chat.completions.create(b);
  if (typeof c.choices?.[0]?.message?.content !== "string") return bad(`no message: ${JSON.stringify(c).slice(0, 200)}`);
  return checkFinish(c.choices[0].finish_reason, c.usage, b.max_tokens);
}
async function completionStream(r) {
  const b = completionBody(r);
  return streamed(await client.completions.create({ ...b, stream: true, stream_options: { include_usage: true } }), b.max_tokens);
}
async function completion(r) {
  const b = completionBody(r);
  const c = await client.completions.create(b);
  if (typeof c.choices?.[0]?.text !== "string") return bad(`no text: ${JSON.stringify(c).slice(0, 200)}`);
  return checkFinish(c.choices[0].finish_reason, c.usage, b.max_tokens);
}

// Clients that go away: after the first chunk, or after a random delay (which may come before the
// answer starts, while the request waits for a slot, or never, when the request ends first).
// Expected: the abort, or a complete answer; anything else is unexpected. A request whose own
// abort leaves the client library's promise unsettled 10 s later (no socket left, so nothing the
// server does can settle it) counts as aborted and is shown as "hung": without this bound such a
// promise ends the process with Node's exit 13 once the load stops.
function settledAfterAbort(ac, promise) {
  return new Promise((resolve, reject) => {
    let t = null;
    const onAbort = () => { t = setTimeout(() => resolve({ ok: true, aborted: true, hung: true }), 10_000); };
    if (ac.signal.aborted) onAbort(); else ac.signal.addEventListener("abort", onAbort, { once: true });
    promise.then((v) => { clearTimeout(t); resolve(v); }, (e) => { clearTimeout(t); reject(e); });
  });
}
async function abortStream(r) {
  const ac = new AbortController();
  const afterFirst = r() < 0.5;
  const delay = int(r, 0, 3000);
  const timer = afterFirst ? null : setTimeout(() => ac.abort(), delay);
  try {
    const body = r() < 0.5 ? chatBody(r) : completionBody(r);
    const create = body.messages ? client.chat.completions : client.completions;
    const out = await settledAfterAbort(ac, (async () => {
      const s = await create.create({ ...body, stream: true }, { signal: ac.signal });
      return streamed(s, body.max_tokens, () => { if (afterFirst) ac.abort(); });
    })());
    if (out.hung || ac.signal.aborted) return { ok: true, aborted: true, hung: !!out.hung };
    return out;
  } catch (e) {
    if (ac.signal.aborted && isAbort(e)) return { ok: true, aborted: true };
    throw e;
  } finally {
    if (timer) clearTimeout(timer);
  }
}
async function abortNonStream(r) {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), int(r, 0, 3000));
  try {
    const body = r() < 0.5 ? chatBody(r) : completionBody(r);
    const c = await settledAfterAbort(ac, body.messages ? client.chat.completions.create(body, { signal: ac.signal })
                                                        : client.completions.create(body, { signal: ac.signal }));
    if (c.hung) return c;
    return checkFinish(c.choices?.[0]?.finish_reason, c.usage, body.max_tokens);
  } catch (e) {
    if (ac.signal.aborted && isAbort(e)) return { ok: true, aborted: true };
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

// Hostile cases (tests/serve/hostile/hostile_test.py) sent with fetch: each must get its status and
// its error code in the OpenAI envelope.
async function expectError(path, body, headers, status, code) {
  const res = await fetch(`${base}${path}`, { method: "POST", body, headers: { "Content-Type": "application/json", ...headers },
                                             signal: AbortSignal.timeout(requestTimeoutMs) });
  const text = await res.text();
  if (res.status !== status) return bad(`status ${res.status}, wanted ${status}: ${text.slice(0, 200)}`);
  let e;
  try { e = JSON.parse(text).error; } catch { return bad(`${status} without a JSON body: ${text.slice(0, 200)}`); }
  if (e?.code !== code) return bad(`code ${e?.code}, wanted ${code}: ${text.slice(0, 200)}`);
  return good;
}
const nested = (n) => "[".repeat(n) + "]".repeat(n);
const hostile = {
  deep_json_chat: () => expectError("/v1/chat/completions",
    `{"model": "${model}", "messages": [{"role": "user", "content": "x", "meta": ${nested(15000)}}]}`, {}, 400, "invalid_json"),
  deep_json_tokenize: () => expectError("/tokenize",
    `{"messages": [{"role": "user", "content": "x", "meta": ${nested(15000)}}]}`, {}, 400, "invalid_json"),
  max_tokens_int64_max: (r) => r() < 0.5
    ? expectError("/v1/chat/completions", `{"model": "${model}", "messages": [{"role": "user", "content": "hi"}], "max_tokens": ${INT64_MAX}}`,
                  {}, 400, "context_length_exceeded")
    : expectError("/v1/completions", `{"model": "${model}", "prompt": "hi", "max_tokens": ${INT64_MAX}}`, {}, 400, "context_length_exceeded"),
  non_json_content_type: (r) => expectError("/v1/completions", JSON.stringify({ model, prompt: "hi", max_tokens: 1 }),
    { "Content-Type": ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"][int(r, 0, 2)] },
    415, "unsupported_media_type"),
  gzip_body: () => expectError("/tokenize", new Uint8Array([0x1f, 0x8b, 8, 0, 0, 0, 0, 0]), { "Content-Encoding": "gzip" },
    415, "unsupported_media_type"),
  unknown_route_with_body: () => expectError("/nothing", JSON.stringify({ model, prompt: "hi" }), {}, 404, "not_found"),
  null_content: () => expectError("/v1/chat/completions", JSON.stringify({ model, messages: [{ role: "user", content: null }] }),
    {}, 400, "missing_required_parameter"),
  long_stop_list: () => expectError("/v1/completions",
    JSON.stringify({ model, prompt: "hi", stop: Array.from({ length: 1000 }, (_, i) => `s${i}`) }), {}, 400, "invalid_value"),
};
// Not sent, as fetch (Node 20's undici) cannot: two Content-Length headers (one reaches the wire)
// and an oversized one (the headers go out, then undici fails the request itself with
// UND_ERR_REQ_CONTENT_LENGTH_MISMATCH, so the client never reads the 413). tests/serve/hostile/
// sends both on raw sockets.

// Kind -> [weight, run]. The good requests carry most of the weight, as they hold slots.
const KINDS = {
  chat_stream: [3, chatStream],
  chat: [3, chat],
  completion_stream: [3, completionStream],
  completion: [3, completion],
  abort_stream: [2, abortStream],
  abort_nonstream: [2, abortNonStream],
  ...Object.fromEntries(Object.entries(hostile).map(([k, f]) => [`hostile_${k}`, [1, f]])),
};
// SOAK_KINDS (comma-separated name prefixes, e.g. "hostile_" or "chat,completion") narrows the mix,
// to find which kind a failed check comes from.
const only = (process.env.SOAK_KINDS ?? "").split(",").filter(Boolean);
const names = Object.keys(KINDS).filter((k) => !only.length || only.some((p) => k.startsWith(p)));
if (!names.length) { console.error(`serve_soak: SOAK_KINDS=${only} names no kind of ${Object.keys(KINDS)}`); process.exit(2); }
const totalWeight = names.reduce((s, k) => s + KINDS[k][0], 0);
function pick(r) {
  let x = r() * totalWeight;
  for (const k of names) if ((x -= KINDS[k][0]) < 0) return k;
  return names.at(-1);
}

const counts = Object.fromEntries(names.map((k) => [k, { sent: 0, expected: 0, aborted: 0, hung: 0, unexpected: 0 }]));
const examples = [];
const deadline = started + soakMs;

async function loop(i) {
  const r = rng(seed + i * 7919);
  while (performance.now() < deadline) {
    const kind = pick(r);
    const c = counts[kind];
    ++c.sent;
    const t0 = performance.now();
    let out, watchdog;
    try {
      // Any other request without an outcome past its timeout is unexpected (a stalled stream).
      out = await Promise.race([KINDS[kind][1](r), new Promise((res) => {
        watchdog = setTimeout(() => res(bad(`no outcome within ${requestTimeoutMs / 1000 + 15} s`)), requestTimeoutMs + 15_000);
      })]);
    } catch (e) {
      const status = e?.status ? `status ${e.status}: ` : "";
      out = bad(`${status}${e?.constructor?.name ?? "Error"}: ${String(e?.message ?? e).slice(0, 200)}` +
                (e?.cause ? ` (cause: ${String(e.cause?.code ?? e.cause?.message ?? e.cause).slice(0, 120)})` : ""));
    } finally {
      clearTimeout(watchdog);
    }
    if (out.ok) {
      ++c.expected;
      if (out.aborted) ++c.aborted;
      if (out.hung) ++c.hung;
    } else {
      ++c.unexpected;
      if (examples.length < 20)
        examples.push(`t=${elapsed()} s client ${i} ${kind} after ${((performance.now() - t0) / 1000).toFixed(1)} s: ${out.why}`);
    }
  }
}

console.log(`serve_soak: ${base}, server pid ${pid}, ${clients} clients for ${soakMs / 1000} s, seed ${seed}, ` +
            `warm-up ${warmupMs / 1000} s, request timeout ${requestTimeoutMs / 1000} s`);
let rssWarm = NaN;
const rssAt = [];
const monitor = (async () => {
  await sleep(warmupMs);
  rssWarm = rssKiB();
  console.log(`t=${elapsed()} s: RSS after the warm-up ${(rssWarm / 1024).toFixed(1)} MiB`);
  while (performance.now() + 60_000 < deadline) {
    await sleep(60_000);
    const sent = names.reduce((s, k) => s + counts[k].sent, 0);
    const unexpected = names.reduce((s, k) => s + counts[k].unexpected, 0);
    rssAt.push(rssKiB());
    console.log(`t=${elapsed()} s: ${sent} requests, ${unexpected} unexpected, RSS ${(rssAt.at(-1) / 1024).toFixed(1)} MiB`);
  }
})();
await Promise.all(Array.from({ length: clients }, (_, i) => loop(i)));
const loadSeconds = (performance.now() - started) / 1000;
await monitor;
console.log(`t=${elapsed()} s: the load stopped (the last requests ended ${(loadSeconds - soakMs / 1000).toFixed(1)} s past the deadline)`);

// The gauges must fall back to 0 within 10 s.
let running = NaN, waiting = NaN, gaugeSeconds = NaN;
const g0 = performance.now();
while (performance.now() - g0 < 10_000) {
  try {
    running = await gauge("vllm:num_requests_running");
    waiting = await gauge("vllm:num_requests_waiting");
  } catch (e) {
    running = waiting = NaN;
  }
  if (running === 0 && waiting === 0) { gaugeSeconds = (performance.now() - g0) / 1000; break; }
  await sleep(100);
}
await sleep(5000);  // idle a few seconds before the last RSS
const rssEnd = rssKiB();
let health = 0;
try { health = (await fetch(`${base}/health`, { signal: AbortSignal.timeout(10_000) })).status; } catch { health = 0; }

const pad = (s, n) => String(s).padEnd(n);
const padl = (s, n) => String(s).padStart(n);
console.log("");
console.log(`${pad("kind", 34)}${padl("sent", 8)}${padl("expected", 10)}${padl("(aborted)", 11)}${padl("(hung)", 8)}${padl("unexpected", 12)}`);
const total = { sent: 0, expected: 0, aborted: 0, hung: 0, unexpected: 0 };
for (const k of names) {
  const c = counts[k];
  for (const f of Object.keys(total)) total[f] += c[f];
  console.log(`${pad(k, 34)}${padl(c.sent, 8)}${padl(c.expected, 10)}${padl(c.aborted || "", 11)}${padl(c.hung || "", 8)}${padl(c.unexpected, 12)}`);
}
console.log(`${pad("total", 34)}${padl(total.sent, 8)}${padl(total.expected, 10)}${padl(total.aborted, 11)}${padl(total.hung, 8)}${padl(total.unexpected, 12)}`);
console.log(`load ${loadSeconds.toFixed(1)} s, ${(total.sent / loadSeconds).toFixed(1)} requests/s`);
if (examples.length) {
  console.log("unexpected outcomes (first 20):");
  for (const e of examples) console.log(`  ${e}`);
}
const growth = (rssEnd - rssWarm) / rssWarm;
console.log(`RSS after the warm-up ${(rssWarm / 1024).toFixed(1)} MiB; each minute ${rssAt.map((x) => (x / 1024).toFixed(1)).join(", ") || "-"}; ` +
            `5 s after the load ${(rssEnd / 1024).toFixed(1)} MiB (${(growth * 100).toFixed(2)}%)`);
console.log(`gauges after the load: running ${running}, waiting ${waiting}` +
            (Number.isNaN(gaugeSeconds) ? " (not 0 within 10 s)" : ` (0 after ${gaugeSeconds.toFixed(2)} s)`));
console.log(`/health at the end: ${health}`);
console.log("");

let passed = 0, failed = 0;
function check(ok, what) {
  console.log(`${ok ? "ok" : "FAIL"}: ${what}`);
  if (ok) ++passed; else ++failed;
}
check(total.unexpected === 0, `no unexpected outcome (${total.unexpected} of ${total.sent})`);
const unsent = names.filter((k) => counts[k].sent === 0);
check(unsent.length === 0, `every kind was sent${unsent.length ? ` (never: ${unsent.join(", ")})` : ""}`);
if (names.some((k) => k.startsWith("abort_"))) check(total.aborted > 0, `some requests were aborted by their client (${total.aborted})`);
check(growth < 0.05, `RSS growth under 5% after the warm-up (${(growth * 100).toFixed(2)}%)`);
check(!Number.isNaN(gaugeSeconds), `vllm:num_requests_running and _waiting back to 0 within 10 s (running ${running}, waiting ${waiting})`);
check(health === 200, `/health 200 at the end (${health})`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);

// `met serve` against the official OpenAI client (npm openai, pinned in package.json). Run by
// tests/serve/server_test.sh, which starts the server (with --api-key, --max-body 65536,
// --queue 4) and sets MET_BASE_URL, MET_API_KEY, MET_MODEL, MET_MAX_CTX, MET_SLOTS, MET_QUEUE and
// MET_SERVER_PID. The last cases send the server SIGTERM and watch it drain; server_test.sh then
// checks that it exits. Each case names what it would catch; the last line is "N passed, M failed".
// MET_TEST_TIME_SCALE (default 1; a sanitizer build sets it, tests/CMakeLists.txt) multiplies every
// wait for the server, so a slower build gets more time, not weaker checks.
import OpenAI from "openai";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { check, checkGreedyChat, checkStreamedChat, done, eq, test } from "./harness.mjs";

const base = process.env.MET_BASE_URL;
const key = process.env.MET_API_KEY;
const model = process.env.MET_MODEL;
const maxCtx = Number(process.env.MET_MAX_CTX);
const slots = Number(process.env.MET_SLOTS);
const queue = Number(process.env.MET_QUEUE);
const serverPid = Number(process.env.MET_SERVER_PID);
const timeScale = Number(process.env.MET_TEST_TIME_SCALE || 1);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 20000 * timeScale });
const auth = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };


async function answered(r) {  // {status, json (null unless the body is JSON), text}
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: r.status, json, text };
}
// A pooled connection that the server closed at its keep-alive (5 s) while this side was busy
// (a loaded machine, the cpu oracle's run) fails as "fetch failed" with a socket cause before the
// server reads anything; such a request goes again once, on a new connection, as an HTTP client
// does with a stale connection. Any other failure, and a second one, stays a failure.
const staleConnection = (e) => e instanceof TypeError && ["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"].includes(e.cause?.code);
async function post(path, body, headers = auth) {
  const send = () => fetch(`${base}${path}`, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  let r;
  try {
    r = await send();
  } catch (e) {
    if (!staleConnection(e)) throw e;
    r = await send();
  }
  return answered(r);
}
async function tokenCount(body) {
  const r = await post("/tokenize", { model, ...body });
  eq(r.status, 200, "/tokenize status");
  eq(r.json.count, r.json.tokens.length, "/tokenize count");
  return r.json.count;
}
function envelope(r, status, code) {
  eq(r.status, status, `status (body ${r.text.slice(0, 200)})`);
  check(r.json && r.json.error, "an {error: ...} envelope");
  const e = r.json.error;
  check(typeof e.message === "string" && e.message.length > 0, "error.message is a non-empty string");
  check(typeof e.type === "string", "error.type is a string");
  check("param" in e && "code" in e, "error has param and code");
  if (code !== undefined) eq(e.code, code, "error.code");
  return e;
}
async function metric(name, label = "") {  // label: another label the series must carry, e.g. finished_reason="abort"
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(`model_name="${model}"`) && l.includes(label));
  return line === undefined ? undefined : Number(line.split(" ").pop());
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, cond, ms = 5000 * timeScale) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (await cond()) return;
  throw new Error(`timed out waiting for ${what}`);
}
async function running() { return metric("vllm:num_requests_running"); }
async function settle() {  // waits for every slot to come free
  for (let i = 0; i < 100 * timeScale; ++i) {
    if ((await running()) === 0 && (await metric("vllm:num_requests_waiting")) === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`requests still running: ${await running()}`);
}

for (let i = 0; i < 200 * timeScale; ++i) {  // the server may still be loading
  try { if ((await fetch(`${base}/health`)).status === 200) break; } catch {}
  await new Promise((r) => setTimeout(r, 100));
}

const chatMessages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Say hello in French, then count to three." }];
let greedyChat = "";

await test("models.list names the served model and its context (catches a wrong id or slug)", async () => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  eq(ids, [model], "model ids");
  eq(list.data[0].object, "model", "object");
  eq(list.data[0].max_model_len, maxCtx, "max_model_len");
});

await test("chat non-streaming: usage equals /tokenize of the messages, length stop at max_tokens", async () => {
  greedyChat = await checkGreedyChat(client, model, chatMessages, () => tokenCount({ messages: chatMessages }));
});

await test("chat streaming with include_usage: deltas join to the greedy text, one usage chunk (catches SSE framing)", async () => {
  await checkStreamedChat(client, model, chatMessages, () => tokenCount({ messages: chatMessages }), greedyChat);
});

await test("completions: string prompt usage equals /tokenize, token-id prompt accepted", async () => {
  const prompt = "The quick brown fox jumps over";
  const r = await client.completions.create({ model, prompt, max_tokens: 6, temperature: 0, ignore_eos: true });
  eq(r.object, "text_completion", "object");
  eq(r.usage.prompt_tokens, await tokenCount({ prompt }), "prompt_tokens vs /tokenize");
  eq(r.usage.completion_tokens, 6, "ignore_eos runs to max_tokens");
  eq(r.choices[0].finish_reason, "length", "finish_reason");
  const ids = (await post("/tokenize", { model, prompt })).json.tokens;
  const r2 = await client.completions.create({ model, prompt: ids, max_tokens: 6, temperature: 0, ignore_eos: true });
  eq(r2.usage.prompt_tokens, ids.length, "token-id prompt_tokens");
  eq(r2.choices[0].text, r.choices[0].text, "ids and text prompts give the same greedy text");
});

await test("completions streaming without include_usage: text chunks, no usage chunk", async () => {
  const stream = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0, stream: true });
  let text = "", usage = null, finish = null;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    if (c.choices.length) { text += c.choices[0].text; if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason; }
  }
  eq(usage, null, "no usage without include_usage");
  check(finish !== null, "a finish_reason");
  const whole = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0 });
  eq(text, whole.choices[0].text, "streamed text equals non-streamed");
});

await test("stop string cuts the text before it and is not emitted (finish_reason stop)", async () => {
  const prompt = "Numbers:";
  const full = (await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, ignore_eos: true })).choices[0].text;
  check(full.length >= 4, `enough text to cut: ${JSON.stringify(full)}`);
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 2);
  const expect = full.slice(0, full.indexOf(stop));
  for (const stream of [false, true]) {
    const r = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, ignore_eos: true, stop: [stop], stream });
    let text = "", finish = null;
    if (stream) { for await (const c of r) if (c.choices.length) { text += c.choices[0].text; finish = c.choices[0].finish_reason ?? finish; } }
    else { text = r.choices[0].text; finish = r.choices[0].finish_reason; }
    eq(text, expect, `stream=${stream} text before the stop ${JSON.stringify(stop)}`);
    eq(finish, "stop", `stream=${stream} finish_reason`);
  }
});

await test("seeded sampling repeats; temperature/top_p accepted", async () => {
  const a = await client.completions.create({ model, prompt: "Seeds", max_tokens: 8, temperature: 1.0, top_p: 0.9, seed: 7, ignore_eos: true });
  const b = await client.completions.create({ model, prompt: "Seeds", max_tokens: 8, temperature: 1.0, top_p: 0.9, seed: 7, ignore_eos: true });
  eq(a.choices[0].text, b.choices[0].text, "same seed, same text");
});

await test("/tokenize then /detokenize round-trips text (UTF-8 intact)", async () => {
  const text = "héllo wörld — 你好 🌍";
  const t = await post("/tokenize", { model, prompt: text });
  const d = await post("/detokenize", { model, tokens: t.json.tokens });
  eq(d.status, 200, "status");
  eq(d.json.prompt, text, "round trip");
});

await test("bad and missing API key: 401 with the envelope (catches auth off when --api-key is set)", async () => {
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: "wrong-key", maxRetries: 0 });
  try {
    await bad.models.list();
    throw new Error("no error");
  } catch (e) {
    check(e instanceof OpenAI.AuthenticationError, `AuthenticationError, got ${e}`);
    eq(e.status, 401, "status");
    eq(e.error.code, "invalid_api_key", "code");
  }
  envelope(await post("/v1/chat/completions", { model, messages: chatMessages }, { "Content-Type": "application/json" }), 401, "invalid_api_key");
  envelope(await post("/tokenize", { model, prompt: "x" }, { "Content-Type": "application/json" }), 401, "invalid_api_key");
  eq((await fetch(`${base}/health`)).status, 200, "/health needs no key");
});

await test("unknown model: 404 model_not_found", async () => {
  try {
    await client.chat.completions.create({ model: "no-such-model", messages: chatMessages, max_tokens: 2 });
    throw new Error("no error");
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError, `NotFoundError, got ${e}`);
    eq(e.error.code, "model_not_found", "code");
    eq(e.error.param, "model", "param");
  }
});

await test("malformed JSON body: 400 invalid_json", async () => {
  envelope(await post("/v1/chat/completions", '{"model": "x", "messages": [', auth), 400, "invalid_json");
  envelope(await post("/v1/completions", "[1, 2]", auth), 400, "invalid_json");
});

await test("wrong field types: 400 naming the field", async () => {
  const cases = [
    [{ model, messages: chatMessages, max_tokens: "8" }, "max_tokens"],
    [{ model, messages: chatMessages, temperature: "hot" }, "temperature"],
    [{ model, messages: chatMessages, stream: 1 }, "stream"],
    [{ model, messages: "hello" }, "messages"],
    [{ model, messages: chatMessages, stop: 5 }, "stop"],
  ];
  for (const [body, param] of cases) eq(envelope(await post("/v1/chat/completions", body), 400).param, param, `param for ${JSON.stringify(body)}`);
  eq(envelope(await post("/v1/completions", { model, prompt: { text: "x" } }), 400).param, "prompt", "prompt object");
});

await test("unknown field is refused, not ignored: 400 unknown_field", async () => {
  const e = envelope(await post("/v1/chat/completions", { model, messages: chatMessages, best_of: 2 }), 400, "unknown_field");
  eq(e.param, "best_of", "param");
  envelope(await post("/v1/chat/completions", { model, messages: chatMessages, stream_options: { include_usage: true } }), 400);
});

await test("neutral values of unimplemented OpenAI fields pass through the client; others are 400 unsupported_value", async () => {
  const r = await client.chat.completions.create({ model, messages: chatMessages, max_tokens: 2, presence_penalty: 0,
                                                   frequency_penalty: 0, logprobs: false, top_logprobs: null, logit_bias: null });
  eq(r.choices.length, 1, "one choice");
  const e = envelope(await post("/v1/chat/completions", { model, messages: chatMessages, frequency_penalty: 0.5 }), 400, "unsupported_value");
  eq(e.param, "frequency_penalty", "param");
});

await test("n=2 refused with 400 through the client", async () => {
  try {
    await client.chat.completions.create({ model, messages: chatMessages, n: 2, max_tokens: 2 });
    throw new Error("no error");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `BadRequestError, got ${e}`);
    eq(e.error.param, "n", "param");
  }
});

const tools = [{ type: "function", function: { name: "get_weather", description: "Current weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const toolTurns = [
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: null, tool_calls: [{ id: "call-1", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] },
  { role: "tool", tool_call_id: "call-1", content: "{\"temp_c\": 21}" },
];
function checkToolAnswer(choice) {  // a message, or calls of a declared tool with JSON-object arguments
  const m = choice.message;
  if (choice.finish_reason === "tool_calls") {
    check(Array.isArray(m.tool_calls) && m.tool_calls.length > 0, "tool_calls with finish_reason tool_calls");
    for (const c of m.tool_calls) {
      eq(c.type, "function", "tool call type");
      eq(c.function.name, "get_weather", "a declared tool");
      check(typeof JSON.parse(c.function.arguments) === "object", "arguments are a JSON object");
    }
  } else {
    check(typeof m.content === "string" && m.tool_calls === undefined, "a plain message");
  }
}

await test("tools through the client: the template renders them (prompt_tokens equals /tokenize with tools, more than without)", async () => {
  const r = await client.chat.completions.create({ model, messages: chatMessages, tools, max_tokens: 4, temperature: 0 });
  const withTools = await tokenCount({ messages: chatMessages, tools });
  eq(r.usage.prompt_tokens, withTools, "prompt_tokens vs /tokenize with tools");
  check(withTools > (await tokenCount({ messages: chatMessages })) + 20, "the tool schema is in the prompt");
  checkToolAnswer(r.choices[0]);
});

await test("a tool round trip (assistant tool_calls with null content, then a tool message) renders and answers", async () => {
  const r = await client.chat.completions.create({ model, messages: toolTurns, tools, tool_choice: "auto", max_tokens: 4, temperature: 0 });
  eq(r.usage.prompt_tokens, await tokenCount({ messages: toolTurns, tools }), "prompt_tokens vs /tokenize");
  checkToolAnswer(r.choices[0]);
  const none = await client.chat.completions.create({ model, messages: toolTurns, tools, tool_choice: "none", max_tokens: 4, temperature: 0 });
  check(none.choices[0].message.tool_calls === undefined, "tool_choice none parses no call");
});

await test("tools streaming: content deltas and tool_call deltas join to the non-streaming answer", async () => {
  const body = { model, messages: chatMessages, tools, max_tokens: 12, temperature: 0 };
  const whole = await client.chat.completions.create(body);
  const stream = await client.chat.completions.create({ ...body, stream: true });
  let content = "", calls = [], finish = null;
  for await (const c of stream) {
    const d = c.choices[0]?.delta ?? {};
    if (d.content) content += d.content;
    for (const t of d.tool_calls ?? []) calls[t.index] = { type: t.type, function: t.function };
    if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
  }
  eq(finish, whole.choices[0].finish_reason, "finish_reason");
  eq(content, whole.choices[0].message.content ?? "", "content");
  eq(calls.map((c) => c.function), (whole.choices[0].message.tool_calls ?? []).map((c) => c.function), "tool calls");
});

await test("tool_choice that would force a call (required, a named function) is 400 unsupported_value through the client", async () => {
  for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
    try {
      await client.chat.completions.create({ model, messages: chatMessages, tools, tool_choice, max_tokens: 2 });
      throw new Error("no error");
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError, `BadRequestError, got ${e}`);
      eq(e.error.code, "unsupported_value", "code");
      eq(e.error.param, "tool_choice", "param");
    }
  }
});

// The oracle for logprobs: the same prompt through `met circuit run` on the same assets (cpu
// bodies), its logits per step written with --logits-out, and log-softmax taken here in doubles.
// Run without blocking the event loop: a run longer than the server's 5 s keep-alive (a sanitizer
// build) closes the client's idle connection, which the client must see before it sends again.
const execFileAsync = promisify(execFile);
async function oracleLogprobs(promptIds, steps, top) {
  const dir = mkdtempSync(join(tmpdir(), "met-lp-"));
  try {
    const out = join(dir, "logits.json");
    await execFileAsync(process.env.MET_BIN, ["circuit", "run", "--assets", process.env.MET_ASSETS, "--backend", "cpu",
      "--prompt-ids", promptIds.join(","), "--max-tokens", String(steps), "--logits-out", out],
      { encoding: "utf8", maxBuffer: 1 << 24, timeout: 120000 * timeScale }).catch((e) => {
      throw new Error(`met circuit run failed (exit ${e.code}, signal ${e.signal}): ${e.stderr}`);
    });
    const seq = JSON.parse(readFileSync(out, "utf8")).sequences[0];
    return seq.logits.slice(0, steps).map((row, k) => {
      const max = row.reduce((m, v) => Math.max(m, v), -Infinity);
      const lse = max + Math.log(row.reduce((s, v) => s + Math.exp(v - max), 0));
      const order = row.map((v, i) => [v, i]).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, top);
      return { token: seq.tokens[k], logprob: row[seq.tokens[k]] - lse, top: order.map(([v, i]) => [i, v - lse]) };
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await test("chat logprobs equal the log-softmax of met circuit run's logits on the same prompt (cpu oracle), top 5 in order", async () => {
  const steps = 4, top = 5;
  const r = await client.chat.completions.create({ model, messages: chatMessages, max_tokens: steps, temperature: 0,
    ignore_eos: true, logprobs: true, top_logprobs: top });
  const got = r.choices[0].logprobs.content;
  eq(got.length, steps, "one entry per token");
  const ids = (await post("/tokenize", { model, messages: chatMessages })).json.tokens;
  const want = await oracleLogprobs(ids, steps, top);
  const detok = async (id) => (await post("/detokenize", { model, tokens: [id] })).json.prompt;
  for (let k = 0; k < steps; k++) {
    eq(got[k].token, await detok(want[k].token), `token ${k}`);
    check(Math.abs(got[k].logprob - want[k].logprob) < 1e-3, `token ${k} logprob ${got[k].logprob} vs oracle ${want[k].logprob}`);
    eq(got[k].top_logprobs.length, top, `top_logprobs ${k}`);
    for (let j = 0; j < top; j++) {
      eq(got[k].top_logprobs[j].token, await detok(want[k].top[j][0]), `top ${j} of token ${k}`);
      check(Math.abs(got[k].top_logprobs[j].logprob - want[k].top[j][1]) < 1e-3, `top ${j} of token ${k}: logprob`);
    }
    eq(Buffer.from(got[k].bytes).toString("utf8"), got[k].token, `bytes of token ${k}`);
  }
  eq(got.map((e) => e.token).join(""), r.choices[0].message.content, "the tokens spell the content");
});

await test("completions logprobs (streaming): one entry per token across the chunks, matching the non-streaming answer", async () => {
  const body = { model, prompt: "The capital of France is", max_tokens: 5, temperature: 0, ignore_eos: true, logprobs: 3 };
  const whole = await client.completions.create(body);
  const lp = whole.choices[0].logprobs;
  eq(lp.tokens.length, 5, "tokens");
  eq(lp.tokens.join(""), whole.choices[0].text, "tokens spell the text");
  eq(lp.text_offset[0], 0, "first offset");
  check(lp.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 3), "up to 3 alternatives");
  check(lp.token_logprobs.every((v) => v <= 0), "log-probabilities are <= 0");
  const stream = await client.completions.create({ ...body, stream: true });
  let tokens = [], values = [];
  for await (const c of stream) {
    const l = c.choices[0]?.logprobs;
    if (l) { tokens.push(...l.tokens); values.push(...l.token_logprobs); }
  }
  eq(tokens, lp.tokens, "streamed tokens");
  check(values.every((v, i) => Math.abs(v - lp.token_logprobs[i]) < 1e-5), "streamed logprobs");
});

await test("logprobs limits: top_logprobs without logprobs, or over 20, is 400 naming the field", async () => {
  for (const [extra, param] of [[{ top_logprobs: 2 }, "top_logprobs"], [{ logprobs: true, top_logprobs: 21 }, "top_logprobs"]]) {
    try {
      await client.chat.completions.create({ model, messages: chatMessages, max_tokens: 1, ...extra });
      throw new Error("no error");
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError, `BadRequestError, got ${e}`);
      eq(e.error.param, param, "param");
    }
  }
});

await test("oversize body (over --max-body 65536): 413 with the envelope", async () => {
  const big = { model, prompt: "x".repeat(70000), max_tokens: 1 };
  envelope(await post("/v1/completions", big), 413, "body_too_large");
});

await test("prompt plus max_tokens beyond the context: 400 context_length_exceeded", async () => {
  const ids = Array.from({ length: maxCtx - 4 }, (_, i) => 100 + i);
  envelope(await post("/v1/completions", { model, prompt: ids, max_tokens: 16 }), 400, "context_length_exceeded");
  envelope(await post("/v1/completions", { model, prompt: Array(maxCtx + 1).fill(100), max_tokens: 1 }), 400, "context_length_exceeded");
  try {
    await client.chat.completions.create({ model, messages: [{ role: "user", content: "word ".repeat(maxCtx) }], max_tokens: 4 });
    throw new Error("no error");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, `BadRequestError, got ${e}`);
    eq(e.error.code, "context_length_exceeded", "code");
  }
});

await test("token id outside the vocabulary: 400", async () => {
  envelope(await post("/v1/completions", { model, prompt: [1, 999999999], max_tokens: 1 }), 400);
});

await test("a disconnected streaming client frees its slot (running gauge back to 0)", async () => {
  await settle();
  const ac = new AbortController();
  const r = await fetch(`${base}/v1/completions`, {
    method: "POST", headers: auth, signal: ac.signal,
    body: JSON.stringify({ model, prompt: "Go on and on", max_tokens: 200, ignore_eos: true, stream: true }),
  });
  const reader = r.body.getReader();
  await reader.read();
  await reader.read();
  eq(await running(), 1, "one request running while streaming");
  ac.abort();
  await settle();
});

await test("a disconnected non-streaming client frees its slot long before max_tokens (catches a request that runs on after its client left)", async () => {
  await settle();
  const maxTokens = maxCtx - 32;  // seconds of decoding on the tiny model
  const generated0 = await metric("vllm:generation_tokens_total");
  const aborts0 = await metric("vllm:request_success_total", 'finished_reason="abort"');
  const ac = new AbortController();
  const call = client.completions.create({ model, prompt: "Go on and on", max_tokens: maxTokens, ignore_eos: true }, { signal: ac.signal });
  const outcome = call.then(() => "answered", (e) => e);
  await until("the request to take a slot", async () => (await running()) === 1);
  ac.abort();  // the client closes its connection while it waits for the JSON body
  check(await outcome !== "answered", "the aborted call does not resolve");
  await settle();
  const generated = (await metric("vllm:generation_tokens_total")) - generated0;
  check(generated < maxTokens / 2, `the slot came free after ${generated} of ${maxTokens} tokens`);
  eq((await metric("vllm:request_success_total", 'finished_reason="abort"')) - aborts0, 1, "one more request finished as abort");
  const r = await client.completions.create({ model, prompt: "Still there?", max_tokens: 3, temperature: 0, ignore_eos: true });
  eq(r.usage.completion_tokens, 3, "the next request is served");
});

await test(`queue bound: more than slots + queue concurrent requests get 429, the rest complete`, async () => {
  await settle();
  const n = slots + queue + 6;
  const results = await Promise.all(Array.from({ length: n }, () =>
    post("/v1/completions", { model, prompt: "busy", max_tokens: 40, ignore_eos: true, temperature: 0 })));
  const ok = results.filter((r) => r.status === 200).length;
  const busy = results.filter((r) => r.status === 429);
  for (const r of busy) envelope(r, 429, "queue_full");
  eq(ok + busy.length, n, "every answer is 200 or 429");
  check(busy.length > 0, `some 429s (got ${ok} ok)`);
  check(ok >= slots, `at least the slots were served (got ${ok})`);
  for (const r of results.filter((x) => x.status === 200)) eq(r.json.usage.completion_tokens, 40, "served requests complete");
  await settle();
});

await test("concurrent streams each get their own text (continuous batching keeps sequences apart)", async () => {
  const prompts = ["alpha", "beta gamma", "delta epsilon zeta", "eta"];
  const solo = [];
  for (const p of prompts) solo.push((await client.completions.create({ model, prompt: p, max_tokens: 10, temperature: 0, ignore_eos: true })).choices[0].text);
  const together = await Promise.all(prompts.map(async (p, i) => {
    await new Promise((r) => setTimeout(r, i * 15));  // join at different steps
    const s = await client.completions.create({ model, prompt: p, max_tokens: 10, temperature: 0, ignore_eos: true, stream: true });
    let t = "";
    for await (const c of s) if (c.choices.length) t += c.choices[0].text;
    return t;
  }));
  eq(together, solo, "batched greedy text equals solo greedy text");
});

await test(`slots + queue simultaneous streaming chats all complete with their solo greedy text; the running gauge returns to 0 (packed prefill keeps prompts apart)`, async () => {
  await settle();
  const n = slots + queue;
  const messages = Array.from({ length: n }, (_, i) => [{ role: "user", content: `Chat ${i}: ${"more words ".repeat(i % 5)}tell me about ${i * 7}.` }]);
  const solo = [];
  for (const m of messages) solo.push((await client.chat.completions.create({ model, messages: m, max_tokens: 8, temperature: 0 })).choices[0].message.content);
  const together = await Promise.all(messages.map(async (m) => {
    const s = await client.chat.completions.create({ model, messages: m, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let t = "", usage = null;
    for await (const c of s) {
      if (c.usage) usage = c.usage;
      if (c.choices.length && c.choices[0].delta.content) t += c.choices[0].delta.content;
    }
    check(usage !== null && usage.completion_tokens >= 1, "a usage chunk with tokens");
    return t;
  }));
  eq(together, solo, "each of the simultaneous chats equals its solo greedy text");
  await settle();
  eq(await running(), 0, "running gauge back to 0");
});

await test("the server keeps serving after the errors; /health, /healthz and /metrics answer", async () => {
  const r = await client.chat.completions.create({ model, messages: chatMessages, max_tokens: 3, temperature: 0 });
  eq(r.choices.length, 1, "choices");
  eq((await fetch(`${base}/health`)).status, 200, "/health");
  const hz = await fetch(`${base}/healthz`);
  eq(hz.status, 200, "/healthz");
  eq((await hz.json()).status, "ok", "/healthz body");
  check((await metric("vllm:generation_tokens_total")) > 0, "generation tokens counted");
  await settle();  // the answer reaches the client a moment before the engine publishes its freed slot
});

// Drain (SIGTERM: Server::stop). These run last: the server stops at the end of them.
let inFlight = null;
await test("SIGTERM drains: /health turns 503 shutting_down while an accepted stream runs (catches a stop that drops work or keeps admitting)", async () => {
  check(serverPid > 0, "MET_SERVER_PID is set");
  await settle();
  const stream = await client.completions.create({
    model, prompt: "Keep going", max_tokens: 120, ignore_eos: true, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  inFlight = stream[Symbol.asyncIterator]();
  check(!(await inFlight.next()).done, "a first chunk");
  process.kill(serverPid, "SIGTERM");
  await until("/health to answer 503", async () => (await fetch(`${base}/health`)).status === 503);
  envelope(await answered(await fetch(`${base}/healthz`)), 503, "shutting_down");
});

await test("while draining a new completion gets 503 shutting_down (through the client and raw)", async () => {
  try {
    await client.completions.create({ model, prompt: "late", max_tokens: 2 });
    throw new Error("no error");
  } catch (e) {
    check(e instanceof OpenAI.InternalServerError, `InternalServerError, got ${e}`);
    eq(e.status, 503, "status");
    eq(e.error.code, "shutting_down", "code");
  }
  envelope(await post("/v1/chat/completions", { model, messages: chatMessages, max_tokens: 2, stream: true }), 503, "shutting_down");
  eq((await fetch(`${base}/metrics`)).status, 200, "/metrics still answers");
});

await test("the stream accepted before SIGTERM runs to its end (usage 120, finish length)", async () => {
  check(inFlight !== null, "the stream started");
  let usage = null, finish = null;
  for (let c = await inFlight.next(); !c.done; c = await inFlight.next()) {
    if (c.value.usage) usage = c.value.usage;
    if (c.value.choices.length && c.value.choices[0].finish_reason) finish = c.value.choices[0].finish_reason;
  }
  eq(finish, "length", "finish_reason");
  check(usage !== null, "usage chunk");
  eq(usage.completion_tokens, 120, "completion_tokens");
});

done();

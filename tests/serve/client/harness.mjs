// What the serve clients share: the case runner (each case is named by what it would catch, prints
// "ok:" or "FAIL:" with the stack; done() prints "N passed, M failed" and exits non-zero on a
// failure) and the chat checks every served model must pass through the official OpenAI client.
let passed = 0, failed = 0;

export async function test(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok: ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL: ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

export function check(cond, what) { if (!cond) throw new Error(what); }

export function eq(a, b, what) {
  if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`${what}: ${JSON.stringify(a)} != ${JSON.stringify(b)}`);
}

export function done() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

// The server's token count of a chat's messages (POST /tokenize), what usage must report.
export async function tokenizeCount(base, key, model, messages) {
  const headers = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };
  const r = await fetch(`${base}/tokenize`, { method: "POST", headers, body: JSON.stringify({ model, messages }) });
  const text = await r.text();
  eq(r.status, 200, `/tokenize status (body ${text.slice(0, 300)})`);
  return JSON.parse(text).count;
}

// A greedy non-streaming chat of at most 8 tokens: the envelope, usage against promptTokens() (the
// server's /tokenize of the same messages) and a length stop at max_tokens. Returns the text.
export async function checkGreedyChat(client, model, messages, promptTokens) {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  eq(r.object, "chat.completion", "object");
  eq(r.model, model, "model");
  eq(r.choices.length, 1, "choices");
  eq(r.choices[0].message.role, "assistant", "role");
  check(typeof r.choices[0].message.content === "string", "content is a string");
  eq(r.usage.prompt_tokens, await promptTokens(), "prompt_tokens vs /tokenize");
  check(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 8, "completion_tokens in 1..8");
  if (r.choices[0].finish_reason === "length") eq(r.usage.completion_tokens, 8, "a length stop used max_tokens");
  eq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, "total_tokens");
  return r.choices[0].message.content;
}

// The same chat streamed with include_usage: the deltas must join to greedy, one usage chunk.
export async function checkStreamedChat(client, model, messages, promptTokens, greedy) {
  const stream = await client.chat.completions.create({
    model, messages, max_completion_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = "", role = null, usage = null, finish = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    eq(c.object, "chat.completion.chunk", "chunk object");
    if (c.usage) { usage = c.usage; eq(c.choices.length, 0, "the usage chunk has no choices"); continue; }
    const d = c.choices[0].delta;
    if (d.role) role = d.role;
    if (d.content) text += d.content;
    if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
  }
  eq(role, "assistant", "first delta role");
  check(finish === "length" || finish === "stop", "finish_reason");
  check(usage !== null, "usage chunk present");
  eq(usage.prompt_tokens, await promptTokens(), "prompt_tokens vs /tokenize");
  eq(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, "total_tokens");
  eq(text, greedy, "streamed greedy text equals the non-streamed one");
  check(chunks >= 3, "several chunks");
}

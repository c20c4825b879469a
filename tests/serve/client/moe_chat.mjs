// `met serve` on a tiny Qwen3-MoE (tests/serve/serve_fixture.sh --model qwen3-moe: the real Qwen3
// tokenizer and chat template, a routed-expert layer and a dense one) against the official OpenAI
// client. Run by tests/serve/server_test.sh moe, which sets MET_BASE_URL, MET_API_KEY, MET_MODEL,
// MET_MAX_CTX and MET_SLOTS. Each case names what it would catch; the last line is "N passed, M failed".
import OpenAI from "openai";
import { check, checkGreedyChat, checkStreamedChat, done, eq, test, tokenizeCount } from "./harness.mjs";

const base = process.env.MET_BASE_URL;
const key = process.env.MET_API_KEY;
const model = process.env.MET_MODEL;
const maxCtx = Number(process.env.MET_MAX_CTX);
const slots = Number(process.env.MET_SLOTS);
const timeScale = Number(process.env.MET_TEST_TIME_SCALE || 1);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 * timeScale });

const tokenCount = (messages) => tokenizeCount(base, key, model, messages);

for (let i = 0; i < 200 * timeScale; ++i) {  // the server may still be loading
  try { if ((await fetch(`${base}/health`)).status === 200) break; } catch {}
  await new Promise((r) => setTimeout(r, 100));
}

await test("models.list names the tiny Qwen3-MoE and its context", async () => {
  const list = await client.models.list();
  eq(list.data.map((m) => m.id), [model], "model ids");
  eq(list.data[0].max_model_len, maxCtx, "max_model_len");
});

const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Name three rivers, then count to four." }];
let greedy = "";

await test("chat non-streaming: usage equals /tokenize of the messages, length stop at max_tokens", async () => {
  greedy = await checkGreedyChat(client, model, messages, () => tokenCount(messages));
});

await test("chat non-streaming again: greedy decoding repeats itself (catches routing state left between requests)", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  eq(r.choices[0].message.content, greedy, "the same greedy text");
});

await test("chat streaming with include_usage: deltas join to the greedy text, one usage chunk", async () => {
  await checkStreamedChat(client, model, messages, () => tokenCount(messages), greedy);
});

await test("as many simultaneous streaming chats as slots each get their solo greedy text (catches the expert ops mixing the rows of a packed prefill or a batched decode step)", async () => {
  const chats = Array.from({ length: slots }, (_, i) => [{ role: "user", content: `Question ${i}: ${"why ".repeat(i % 4)}is the number ${i * 11} odd?` }]);
  const solo = [];
  for (const m of chats) solo.push((await client.chat.completions.create({ model, messages: m, max_tokens: 8, temperature: 0 })).choices[0].message.content);
  const together = await Promise.all(chats.map(async (m) => {
    const s = await client.chat.completions.create({ model, messages: m, max_tokens: 8, temperature: 0, stream: true });
    let t = "";
    for await (const c of s) if (c.choices.length && c.choices[0].delta.content) t += c.choices[0].delta.content;
    return t;
  }));
  eq(together, solo, "each simultaneous chat equals its solo greedy text");
  check(new Set(solo).size > 1, "the chats' answers differ (a model that ignores its input would pass the comparison)");
});

done();

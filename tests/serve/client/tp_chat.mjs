// `met serve` on tensor-parallel assets (tests/serve/server_test.sh tp: the tiny Qwen3 emitted with
// --tp 2, its ranks simulated by the cpu backend) against the official OpenAI client, beside a
// second server of the same checkpoint emitted without --tp (MET_SOLO_URL). Each case names what it
// would catch; the last line is "N passed, M failed".
import OpenAI from "openai";
import { check, checkGreedyChat, checkStreamedChat, done, eq, test, tokenizeCount } from "./harness.mjs";

const base = process.env.MET_BASE_URL;
const soloBase = process.env.MET_SOLO_URL;
const key = process.env.MET_API_KEY;
const model = process.env.MET_MODEL;
const slots = Number(process.env.MET_SLOTS);
const timeScale = Number(process.env.MET_TEST_TIME_SCALE || 1);
const options = { apiKey: key, maxRetries: 0, timeout: 60000 * timeScale };
const tp = new OpenAI({ baseURL: `${base}/v1`, ...options });
const one = new OpenAI({ baseURL: `${soloBase}/v1`, ...options });

const tokenCount = (messages) => tokenizeCount(base, key, model, messages);

for (const url of [base, soloBase]) {  // the servers may still be loading
  for (let i = 0; i < 200 * timeScale; ++i) {
    try { if ((await fetch(`${url}/health`)).status === 200) break; } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function greedyOf(client, messages) {
  return (await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 })).choices[0].message.content;
}

const chats = Array.from({ length: slots }, (_, i) => [{ role: "user", content: `Question ${i}: ${"why ".repeat(i % 4)}is the number ${i * 11} odd?` }]);
const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Name three rivers, then count to four." }];
let greedy = "";

await test("chat non-streaming on --tp 2 assets: usage equals /tokenize of the messages, length stop at max_tokens", async () => {
  greedy = await checkGreedyChat(tp, model, messages, () => tokenCount(messages));
});

await test("the --tp 2 server's greedy text equals the --tp 1 server's on every prompt (catches a collective that drops a rank's partial sums or gathers the vocabulary slices out of order)", async () => {
  eq(greedy, await greedyOf(one, messages), "the system prompt's chat");
  const ranks2 = [], ranks1 = [];
  for (const m of chats) {
    ranks2.push(await greedyOf(tp, m));
    ranks1.push(await greedyOf(one, m));
  }
  eq(ranks2, ranks1, "each chat, --tp 2 against --tp 1");
  check(new Set(ranks1).size > 1, "the chats' answers differ (a model that ignores its input would pass the comparison)");
});

await test("chat streaming with include_usage on --tp 2 assets: deltas join to the greedy text, one usage chunk", async () => {
  await checkStreamedChat(tp, model, messages, () => tokenCount(messages), greedy);
});

await test("as many simultaneous streaming chats as slots on --tp 2 assets each get the --tp 1 server's solo text (catches ranks that pair the collectives of a packed prefill or a batched decode step wrongly)", async () => {
  const solo = [];
  for (const m of chats) solo.push(await greedyOf(one, m));
  const together = await Promise.all(chats.map(async (m) => {
    const s = await tp.chat.completions.create({ model, messages: m, max_tokens: 8, temperature: 0, stream: true });
    let t = "";
    for await (const c of s) if (c.choices.length && c.choices[0].delta.content) t += c.choices[0].delta.content;
    return t;
  }));
  eq(together, solo, "each simultaneous chat equals its --tp 1 solo greedy text");
});

done();

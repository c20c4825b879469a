// `met serve` on the tiny Gemma-4 (tests/serve/serve_fixture.sh --model gemma4: Gemma's vocabulary
// and tokenizer, Google's Gemma-4 chat template) against the official OpenAI client. Run by
// tests/serve/server_test.sh gemma4, which sets MET_BASE_URL, MET_API_KEY, MET_MODEL, MET_MAX_CTX
// and MET_TEMPLATES_EXPECTED (tests/serve/templates/expected.json, jinja2's renderings). Each case
// names what it would catch; the last line is "N passed, M failed".
import OpenAI from "openai";
import { readFileSync } from "node:fs";
import { check, checkGreedyChat, checkStreamedChat, done, eq, test } from "./harness.mjs";

const base = process.env.MET_BASE_URL;
const key = process.env.MET_API_KEY;
const model = process.env.MET_MODEL;
const maxCtx = Number(process.env.MET_MAX_CTX);
const timeScale = Number(process.env.MET_TEST_TIME_SCALE || 1);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 60000 * timeScale });
const auth = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };
const jinja2 = JSON.parse(readFileSync(process.env.MET_TEMPLATES_EXPECTED, "utf8")).chat.gemma4;
const conversations = JSON.parse(readFileSync(new URL("../templates/conversations.json", import.meta.url), "utf8"));

async function post(path, body) {
  const r = await fetch(`${base}${path}`, { method: "POST", headers: auth, body: JSON.stringify(body) });
  const text = await r.text();
  eq(r.status, 200, `${path} status (body ${text.slice(0, 300)})`);
  return JSON.parse(text);
}

for (let i = 0; i < 200 * timeScale; ++i) {  // the server may still be loading
  try { if ((await fetch(`${base}/health`)).status === 200) break; } catch {}
  await new Promise((r) => setTimeout(r, 100));
}

// The served prompt, as text: what the server renders and tokenizes for these messages.
async function servedPrompt(c) {
  const t = await post("/tokenize", { model, messages: c.messages, tools: c.tools, add_generation_prompt: c.add_generation_prompt });
  return (await post("/detokenize", { model, tokens: t.tokens })).prompt;
}

// Conversations of templates/conversations.json whose messages the OpenAI API carries as they are
// (plain string content, OpenAI tool declarations) and that need no extra template variable.
const served = ["single_user_gen", "single_user_nogen", "system_user_gen", "multi_turn_system", "non_ascii",
  "empty_assistant_content", "quotes_and_braces", "many_turns", "tools_with_system"];

await test("models.list names the tiny Gemma-4 and its context", async () => {
  const list = await client.models.list();
  eq(list.data.map((m) => m.id), [model], "model ids");
  eq(list.data[0].max_model_len, maxCtx, "max_model_len");
});

for (const name of served) {
  await test(`${name}: the served prompt is jinja2's rendering of Google's Gemma-4 template (catches any engine or request-mapping drift)`, async () => {
    const c = conversations.find((x) => x.name === name);
    check(c !== undefined && !c.extra, `conversations.json has ${name} without extra variables`);
    check(jinja2[name] && "output" in jinja2[name], `expected.json has gemma4/${name}`);
    eq(await servedPrompt(c), jinja2[name].output, "served prompt");
  });
}

// The conversation as an OpenAI client sends it: each call's arguments as JSON text.
function asOpenAI(c) {
  const messages = c.messages.map((m) => !m.tool_calls ? m : {
    ...m, tool_calls: m.tool_calls.map((t) => ({ ...t, function: { ...t.function, arguments: JSON.stringify(t.function.arguments) } })),
  });
  return { ...c, messages };
}

// met parses no Gemma-4 tool-call answers yet (<|tool_call>call:...), so tools go with tool_choice
// "none": rendered for the model, its answer returned as text.
await test("a tool loop as the OpenAI client sends it (arguments as JSON text): served as jinja2 renders the objects, and answered (catches the template's refusal of text arguments)", async () => {
  const c = conversations.find((x) => x.name === "gemma4_null_content_tool_call");
  check(c !== undefined && jinja2[c.name] && "output" in jinja2[c.name], "conversations.json and expected.json have gemma4_null_content_tool_call");
  const openai = asOpenAI(c);
  check(typeof openai.messages[1].tool_calls[0].function.arguments === "string", "arguments sent as text");
  eq(await servedPrompt(openai), jinja2[c.name].output, "served prompt");
  const r = await client.chat.completions.create({ model, messages: openai.messages, tools: openai.tools, tool_choice: "none", max_tokens: 4, temperature: 0 });
  check(r.choices[0].message.tool_calls === undefined, "no tool calls parsed");
  eq(r.usage.prompt_tokens, (await post("/tokenize", { model, messages: openai.messages, tools: openai.tools })).count, "prompt_tokens vs /tokenize");
});

const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Say hello in French, then count to three." }];
let greedy = "";

const promptTokens = async () => (await post("/tokenize", { model, messages })).count;

await test("chat non-streaming: a Gemma-4 turn, usage equals /tokenize of the messages, length stop at max_tokens", async () => {
  greedy = await checkGreedyChat(client, model, messages, promptTokens);
});

await test("chat non-streaming again: greedy decoding repeats itself (catches state left between requests)", async () => {
  const r = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0 });
  eq(r.choices[0].message.content, greedy, "the same greedy text");
});

await test("chat streaming with include_usage: deltas join to the greedy text, one usage chunk (catches SSE framing)", async () => {
  await checkStreamedChat(client, model, messages, promptTokens, greedy);
});

await test("chat streaming, multi-turn with a system prompt, seeded sampling: two runs agree", async () => {
  const turns = [{ role: "system", content: "Answer in French." }, { role: "user", content: "Good morning" },
    { role: "assistant", content: "Bonjour !" }, { role: "user", content: "How are you?" }];
  const run = async () => {
    const stream = await client.chat.completions.create({ model, messages: turns, max_tokens: 6, temperature: 0.8, seed: 11, stream: true });
    let text = "";
    for await (const c of stream) if (c.choices.length && c.choices[0].delta.content) text += c.choices[0].delta.content;
    return text;
  };
  eq(await run(), await run(), "same seed, same streamed text");
});

done();

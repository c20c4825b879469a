// Sends a little traffic (a completion, a streamed chat) to the server at MET_BASE_URL, then prints
// its /metrics text to stdout for `promtool check metrics` (tests/serve/server_test.sh).
import OpenAI from "openai";

const base = process.env.MET_BASE_URL;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: process.env.MET_API_KEY, maxRetries: 0 });
const model = process.env.MET_MODEL;

for (let i = 0; i < 100; ++i) {
  try { if ((await fetch(`${base}/health`)).status === 200) break; } catch {}
  await new Promise((r) => setTimeout(r, 100));
}
await client.completions.create({ model, prompt: "The metrics of", max_tokens: 4, temperature: 0 });
const stream = await client.chat.completions.create({
  model, messages: [{ role: "user", content: "count" }], max_tokens: 4, stream: true,
});
for await (const _ of stream) { /* drain */ }
process.stdout.write(await (await fetch(`${base}/metrics`)).text());

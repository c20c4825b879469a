// The SSE reading the serve benchmarks share: the JSON payload of each `data:` event of a streamed
// answer, in order; an `{error: ...}` event throws, and a stream that ends without `data: [DONE]`
// throws too. Node's fetch only.
export async function* sseEvents(body) {
  const dec = new TextDecoder();
  let buf = "", done = false;
  for await (const part of body) {
    buf += dec.decode(part, { stream: true });
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, at);
      buf = buf.slice(at + 2);
      if (!ev.startsWith("data: ")) continue;
      const data = ev.slice(6);
      if (data === "[DONE]") { done = true; continue; }
      const j = JSON.parse(data);
      if (j.error) throw new Error(JSON.stringify(j.error));
      yield j;
    }
  }
  if (!done) throw new Error("stream ended without [DONE]");
}

#!/usr/bin/env python3
"""Time to first token under a burst: CLIENTS streaming chats sent at once to a running `met serve`
(any model, any backend), each a short distinct user message answered with TOKENS tokens
(ignore_eos, greedy), ROUNDS times (the first round is the warm-up). Prints TTFT p50/p90/max,
end-to-end and inter-token p50, tokens per second and the failures; exits non-zero on any failure.
What packed prefill changes shows here: the burst's prompts share prefill launches instead of
waiting for each other's. Python's standard library only (one thread per client), so it runs on
the device machine, which has no node.

Usage: python3 bench/serve_ttft.py URL [CLIENTS] [TOKENS] [ROUNDS]
  e.g. python3 bench/serve_ttft.py http://127.0.0.1:8080 32 64 3   (MET_API_KEY for --api-key;
  MET_MODEL picks the model, else the first of /v1/models)
"""
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse

TOPICS = ["rivers", "bridges", "clocks", "gardens", "lighthouses", "trains", "maps", "bees"]


def usage():
    print("usage: python3 bench/serve_ttft.py URL [CLIENTS] [TOKENS] [ROUNDS]   (URL: http://host:port)", file=sys.stderr)
    sys.exit(2)


def positive(text):
    if not re.fullmatch(r"[1-9][0-9]*", text):
        usage()
    return int(text)


def pct(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def sse_events(resp):
    """The JSON payload of each `data:` event, in order; an error event or a stream that ends
    without `data: [DONE]` raises."""
    done = False
    for raw in resp:
        line = raw.decode().rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            done = True
            continue
        j = json.loads(data)
        if "error" in j:
            raise RuntimeError(json.dumps(j["error"]))
        yield j
    if not done:
        raise RuntimeError("stream ended without [DONE]")


def main():
    args = sys.argv[1:]
    if not args or not re.fullmatch(r"https?://[^/]+", args[0]):
        usage()
    url = urllib.parse.urlsplit(args[0])
    clients = positive(args[1]) if len(args) > 1 else 32
    tokens = positive(args[2]) if len(args) > 2 else 64
    rounds = positive(args[3]) if len(args) > 3 else 3
    headers = {"Content-Type": "application/json"}
    if os.environ.get("MET_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["MET_API_KEY"]

    def connect():
        cls = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        return cls(url.hostname, url.port, timeout=600)

    conn = connect()
    conn.request("GET", "/v1/models", headers=headers)
    model = os.environ.get("MET_MODEL") or json.loads(conn.getresponse().read())["data"][0]["id"]
    conn.close()

    def chat(rnd, i, out):
        t0 = time.perf_counter()
        r = {"ttft": None, "e2e": None, "gaps": [], "tokens": 0, "error": None}
        content = f"Round {rnd}, client {i}: write a few sentences about {TOPICS[i % len(TOPICS)]} and the number {i * 13}."
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": tokens,
                           "ignore_eos": True, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
        try:
            c = connect()
            c.request("POST", "/v1/chat/completions", body=body, headers=headers)
            resp = c.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"status {resp.status}: {resp.read()[:200]!r}")
            last, usage = None, None
            for j in sse_events(resp):
                if j.get("usage"):
                    usage = j["usage"]
                if not j.get("choices") or not j["choices"][0].get("delta", {}).get("content"):
                    continue
                now = time.perf_counter()
                if last is None:
                    r["ttft"] = now - t0
                else:
                    r["gaps"].append(now - last)
                last = now
            c.close()
            if not usage or usage.get("completion_tokens") != tokens:
                raise RuntimeError(f"usage {json.dumps(usage)}")
            r["tokens"] = usage["completion_tokens"]
            r["e2e"] = time.perf_counter() - t0
        except Exception as e:  # every failure is counted and printed, none stops the burst
            r["error"] = str(e)
        out[i] = r

    ms = lambda s: f"{s * 1000:.1f}"
    failures = 0
    print(f"serve_ttft: {args[0]} model {model}: {rounds} round(s) of {clients} simultaneous streaming chats, {tokens} tokens each")
    for rnd in range(rounds):
        out = [None] * clients
        t0 = time.perf_counter()
        threads = [threading.Thread(target=chat, args=(rnd, i, out)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        ok = [r for r in out if not r["error"]]
        errors = [r for r in out if r["error"]]
        failures += len(errors)
        ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
        e2e = [r["e2e"] for r in ok]
        gaps = [g for r in ok for g in r["gaps"]]
        total = sum(r["tokens"] for r in ok)
        print(f"round {rnd}{' (warm-up)' if rnd == 0 else ''}: ok {len(ok)}/{clients}  ttft p50 {ms(pct(ttft, 0.5))} ms "
              f"p90 {ms(pct(ttft, 0.9))} ms max {ms(pct(ttft, 1))} ms  e2e p50 {ms(pct(e2e, 0.5))} ms  "
              f"itl p50 {ms(pct(gaps, 0.5))} ms  {total / wall:.1f} tok/s", flush=True)
        for e in errors[:5]:
            print(f"  failure: {e['error']}")
    print(f"serve_ttft: {failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

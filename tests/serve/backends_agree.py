#!/usr/bin/env python3
"""Two `met serve` instances on the same assets must answer alike: the cuda backend and the same
packets on the cpu bodies (cpu-oracle). A real HTTP client (urllib), concurrent requests.

    python3 tests/serve/backends_agree.py URL_A URL_B MODEL

Checks, printing one line each and exiting 1 on any failure:
  - /v1/models on both lists MODEL;
  - 8 different greedy chat requests sent at once to each server: the same text, finish reason and
    usage from both (continuous batching over the decode rungs on both sides); or, where the two
    answers part, they part at a near tie: at the first token that differs, each side's top two
    (logprobs, top_logprobs 2) are the two tokens chosen, at most TIE_NATS apart on both sides;
  - a streaming request on A: its deltas concatenate to A's non-streaming text, and it ends with
    [DONE] after a usage chunk;
  - a seeded sampled request (temperature 0.9, top_p 0.95, top_k 50, seed 7) twice on A: the same
    text both times, and not every token equal to the greedy one;
  - /metrics on A counts every request sent to it as finished (within 5 s of the last answer).
"""
import concurrent.futures
import json
import os
import sys
import time
import urllib.error
import urllib.request

# Two bf16 steps of a logit in [4, 8): where the two backends' top two candidates are this close,
# the order of their sums (cuda against the cpu bodies) may pick either, and the answers part there.
TIE_NATS = 0.125

PROMPTS = ["Hello", "What is a GPU?", "Count to five.", "Name a color.", "Why is the sky blue?",
           "Write a haiku about rain.", "2 + 2 =", "Say something in French."]


def call(url, path, body=None, stream=False):
    req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            data = r.read().decode()
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{url}{path}: HTTP {e.code}: {e.read().decode()[:500]}") from None
    if stream:
        return data
    return json.loads(data) if path != "/metrics" else data


def chat(url, model, prompt, **kw):
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 32, "temperature": 0}
    body.update(kw)
    return call(url, "/v1/chat/completions", body)


def parted_at_tie(ca, cb):
    """(True, what) where two greedy choices part first at a near tie, else (False, what)."""
    la, lb = ca["logprobs"]["content"], cb["logprobs"]["content"]
    k = next((i for i, (x, y) in enumerate(zip(la, lb)) if x["token"] != y["token"]), None)
    if k is None:
        return False, "no token differs (the texts differ in length or finish)"
    chosen = {la[k]["token"], lb[k]["token"]}
    gaps = []
    for side in (la[k], lb[k]):
        top = side["top_logprobs"]
        if len(top) < 2 or {t["token"] for t in top[:2]} != chosen:
            return False, f"token {k}: the two choices {sorted(chosen)} are not both sides' top two"
        gaps.append(top[0]["logprob"] - top[1]["logprob"])
    what = f"token {k}: top two {gaps[0]:.4f} and {gaps[1]:.4f} nats apart on A and B"
    return max(gaps) <= TIE_NATS, what


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: backends_agree.py URL_A URL_B MODEL")
    a, b, model = sys.argv[1:]
    bad = 0

    def check(ok, what):
        nonlocal bad
        print(("ok    " if ok else "FAIL  ") + what)
        bad += 0 if ok else 1

    for url in (a, b):
        ids = [m["id"] for m in call(url, "/v1/models")["data"]]
        check(model in ids, f"{url}/v1/models lists {model} ({ids})")

    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS) * 2) as pool:
        fa = [pool.submit(chat, a, model, p, logprobs=True, top_logprobs=2) for p in PROMPTS]
        fb = [pool.submit(chat, b, model, p, logprobs=True, top_logprobs=2) for p in PROMPTS]
        ra = [f.result() for f in fa]
        rb = [f.result() for f in fb]
    for p, x, y in zip(PROMPTS, ra, rb):
        cx, cy = x["choices"][0], y["choices"][0]
        same = (cx["message"]["content"] == cy["message"]["content"] and cx["finish_reason"] == cy["finish_reason"]
                and x["usage"] == y["usage"])
        if same:
            ok = True
            what = f"greedy {p!r}: {x['usage']['completion_tokens']} tokens, finish {cx['finish_reason']}, same text on both"
        else:
            tie, why = parted_at_tie(cx, cy)
            ok = tie and x["usage"]["prompt_tokens"] == y["usage"]["prompt_tokens"]
            what = (f"greedy {p!r}: the answers part at a near tie ({why}; at most {TIE_NATS})" if ok else
                    f"greedy {p!r}: A {cx['message']['content']!r} B {cy['message']['content']!r} ({why})")
        check(ok, what)

    text = ra[1]["choices"][0]["message"]["content"]
    raw = call(a, "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": PROMPTS[1]}],
                                            "max_tokens": 32, "temperature": 0, "stream": True,
                                            "stream_options": {"include_usage": True}}, stream=True)
    events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    chunks = [json.loads(e) for e in events if e != "[DONE]"]
    streamed = "".join(c["choices"][0]["delta"].get("content", "") or "" for c in chunks if c.get("choices"))
    check(events and events[-1] == "[DONE]" and chunks[-1].get("usage") is not None and streamed == text,
          f"streaming on A: {len(chunks)} chunks, text equals the non-streaming answer, usage then [DONE]")

    sampled = dict(temperature=0.9, top_p=0.95, top_k=50, seed=7)
    s1 = chat(a, model, PROMPTS[4], **sampled)["choices"][0]["message"]["content"]
    s2 = chat(a, model, PROMPTS[4], **sampled)["choices"][0]["message"]["content"]
    greedy = ra[4]["choices"][0]["message"]["content"]
    check(s1 == s2 and s1 != greedy, "seeded sampling on A: reproducible, and differs from greedy")

    # The server counts a request once its last bytes are written, which can be just after the
    # client has read them: the count must reach what was sent within a bound, and never pass it.
    want = len(PROMPTS) + 3  # greedy, streaming, two sampled
    deadline = time.monotonic() + 5 * int(os.environ.get("MET_TEST_TIME_SCALE", "1"))
    while True:
        metrics = call(a, "/metrics")
        served = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                     if line.startswith("vllm:request_success_total{"))
        if served >= want or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    check(served == want, f"/metrics on A: vllm:request_success_total sums to {served:g} (sent {want})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

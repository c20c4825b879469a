#!/usr/bin/env python3
"""Hostile-but-realistic clients against a running `met serve` (tests/serve/hostile/run.sh starts
it on loopback). One case per defect of issue 19 that met fixes, each named by what it catches.
After every case the server must still answer /health 200; after the whole suite its RSS must
have grown by less than RSS_BUDGET_MB. Every socket has a short timeout and every loop a bound.
Usage: hostile_test.py PORT SERVER_PID WORK_DIR. The last line is "N passed, M failed"."""
import http.client
import json
import os
import socket
import sys
import time

PORT = int(sys.argv[1])
PID = int(sys.argv[2])
WORK = sys.argv[3]  # the server's files live here: no error may name it
MODEL = "tiny-qwen3"
# A 256-token completion on the cpu backend while other tests load both cores; a sanitizer build
# (MET_TEST_TIME_SCALE, tests/CMakeLists.txt) takes that many times longer. The cases' own bounds
# on the server's behaviour (read timeout, /health latency) do not scale.
TIMEOUT = 30.0 * int(os.environ.get("MET_TEST_TIME_SCALE", "1"))
INT64_MAX = 9223372036854775807
RSS_BUDGET_MB = 48  # a single buffered hostile body below is 64 MiB or more
MSGS = [{"role": "user", "content": "hi"}]


def rss_mb():
    with open(f"/proc/{PID}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body
        try:
            self.json = json.loads(body)
        except ValueError:
            self.json = None

    def error(self):
        if not (isinstance(self.json, dict) and isinstance(self.json.get("error"), dict)):
            raise AssertionError(f"no error envelope in {self.status} {self.body[:200]!r}")
        return self.json["error"]


def request(method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=TIMEOUT)
    try:
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        return Answer(r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace"))
    finally:
        conn.close()


def raw(head, body_chunks=(), read_first=False):
    """Sends `head` (the request line and headers), then up to len(body_chunks) chunks while the
    server keeps reading; returns the answer, or None when the server closed without one, and the
    bytes of body it took."""
    s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
    sent = 0
    try:
        s.sendall(head)
        if not read_first:
            for chunk in body_chunks:
                try:
                    s.sendall(chunk)
                except (BrokenPipeError, ConnectionResetError, socket.timeout):
                    break
                sent += len(chunk)
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        r = http.client.HTTPResponse(s)
        try:
            r.begin()
            return Answer(r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace")), sent
        except (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError):
            return None, sent
    finally:
        s.close()


def expect_error(a, status, code):
    assert a is not None, f"no answer (wanted {status} {code})"
    assert a.status == status, f"status {a.status}, wanted {status}: {a.body[:300]!r}"
    e = a.error()
    assert e.get("code") == code, f"code {e.get('code')!r}, wanted {code!r}: {e}"
    assert isinstance(e.get("message"), str) and e["message"], f"empty message: {e}"
    assert WORK not in a.body, f"the answer names the server's directory: {a.body[:300]!r}"
    return e


def nested(levels):
    return "[" * levels + "]" * levels


MiB = 1 << 20


# ---- the cases --------------------------------------------------------------------------------

def deep_json_in_a_chat_message_is_400_not_a_stack_overflow():
    body = '{"model": "%s", "messages": [{"role": "user", "content": "x", "meta": %s}]}' % (MODEL, nested(15000))
    e = expect_error(request("POST", "/v1/chat/completions", body), 400, "invalid_json")
    assert "deeper than" in e["message"], e


def deep_json_in_tokenize_messages_is_400_not_a_stack_overflow():
    body = '{"messages": [{"role": "user", "content": "x", "meta": %s}]}' % nested(15000)
    expect_error(request("POST", "/tokenize", body), 400, "invalid_json")


def max_tokens_int64_max_is_400_and_the_engine_keeps_serving():
    expect_error(request("POST", "/v1/chat/completions", {"model": MODEL, "messages": MSGS, "max_tokens": INT64_MAX}),
                 400, "context_length_exceeded")
    expect_error(request("POST", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": INT64_MAX}),
                 400, "context_length_exceeded")
    a = request("POST", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 2, "temperature": 0})
    assert a.status == 200, f"a normal request after it: {a.status} {a.body[:300]!r}"


def a_completion_that_fills_the_context_ends_with_length_and_the_engine_keeps_serving():
    a = request("POST", "/v1/chat/completions", {"model": MODEL, "messages": MSGS, "ignore_eos": True, "temperature": 0})
    assert a.status == 200, f"{a.status} {a.body[:300]!r}"
    assert a.json["choices"][0]["finish_reason"] == "length", a.json
    assert a.json["usage"]["total_tokens"] == 256, a.json["usage"]


def chunked_body_to_an_unknown_route_is_not_buffered_past_max_body():
    before = rss_mb()
    head = b"POST /nothing HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n" % MiB + b"a" * MiB + b"\r\n"
    a, sent = raw(head, [chunk] * 64)
    grown = rss_mb() - before
    assert grown < 16, f"RSS grew {grown:.0f} MiB while {sent >> 20} MiB of chunked body were sent"
    if a is not None:
        assert a.status in (404, 413), f"status {a.status}: {a.body[:200]!r}"
        a.error()


def chunked_body_over_max_body_is_413_while_it_is_read():
    before = rss_mb()
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % MiB + b" " * MiB + b"\r\n"
    a, sent = raw(head, [chunk] * 64)
    grown = rss_mb() - before
    assert grown < 16, f"RSS grew {grown:.0f} MiB while {sent >> 20} MiB of chunked body were sent"
    assert sent < 64 * MiB, "the server read all 64 MiB of a body over --max-body 65536"
    if a is not None:
        expect_error(a, 413, "body_too_large")


def chunked_body_within_max_body_is_accepted():
    body = json.dumps({"model": MODEL, "messages": MSGS, "max_tokens": 2}).encode()
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    chunks = [b"%x\r\n" % len(body[i:i + 7]) + body[i:i + 7] + b"\r\n" for i in range(0, len(body), 7)] + [b"0\r\n\r\n"]
    a, _ = raw(head, chunks)
    assert a is not None and a.status == 200, f"{a and a.status} {a and a.body[:300]!r}"
    assert a.json["usage"]["completion_tokens"] == 2, a.json


def chunked_together_with_content_length_is_400():
    a, _ = raw(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n", read_first=True)
    assert a is not None and a.status == 400, f"{a and a.status} {a and a.body[:300]!r}"
    a.error()


def post_without_content_length_is_411_not_read_until_close():
    before = rss_mb()
    a, sent = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n", [b"b" * MiB] * 64)
    grown = rss_mb() - before
    assert grown < 16, f"RSS grew {grown:.0f} MiB while {sent >> 20} MiB of unframed body were sent"
    if a is not None:
        expect_error(a, 411, "length_required")


def content_length_far_over_max_body_is_413_at_once_not_skipped_byte_by_byte():
    t0 = time.monotonic()
    a, _ = raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n",
               read_first=True)
    expect_error(a, 413, "body_too_large")
    assert time.monotonic() - t0 < 5, "the 413 waited for the body"


def two_different_content_lengths_are_400():
    a, _ = raw(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 17\r\n"
               b"Content-Length: 5\r\n\r\n{\"prompt\": \"x\"}  ", read_first=True)
    expect_error(a, 400, "bad_request")


def gzip_body_is_415_not_inflated_without_a_limit():
    a = request("POST", "/tokenize", b"\x1f\x8b\x08\x00\x00\x00\x00\x00", {"Content-Encoding": "gzip"})
    expect_error(a, 415, "unsupported_media_type")


def text_plain_and_form_bodies_are_415_so_a_web_page_cannot_post_json_without_a_preflight():
    body = json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": 1})
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        expect_error(request("POST", "/v1/completions", body, {"Content-Type": ctype}), 415, "unsupported_media_type")
    a = request("POST", "/v1/completions", body, {"Content-Type": "application/json; charset=utf-8"})
    assert a.status == 200, f"application/json with a charset: {a.status} {a.body[:200]!r}"


def a_malformed_request_line_gets_the_openai_envelope_with_a_code():
    a, _ = raw(b"THIS IS NOT HTTP\r\n\r\n", read_first=True)
    expect_error(a, 400, "bad_request")


def an_http10_client_gets_no_chunked_encoding_and_a_body_that_ends_at_close():
    for stream in (False, True):
        body = json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": 3, "stream": stream}).encode()
        for keep_alive in (b"", b"Connection: Keep-Alive\r\n"):
            a, _ = raw(b"POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\n" + keep_alive +
                       b"Content-Length: %d\r\n\r\n" % len(body) + body, read_first=True)
            assert a is not None and a.status == 200, f"stream={stream}: {a and a.status} {a and a.body[:200]!r}"
            assert "chunked" not in a.headers.get("Transfer-Encoding", ""), f"stream={stream}: {a.headers}"
            if stream:
                assert a.body.endswith("data: [DONE]\n\n"), f"stream={stream}: {a.body[-200:]!r}"
            else:
                assert json.loads(a.body)["choices"][0]["finish_reason"] == "length", a.body[:200]


def pipelined_requests_are_each_answered_in_order():
    reqs = b""
    for word in (b"one", b"two", b"three"):
        body = b'{"prompt": "%s"}' % word
        reqs += b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    reqs += b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
    try:
        s.sendall(reqs)
        stream = s.makefile("rb")  # one reader for the four answers, each with a Content-Length
        statuses, tokens = [], []
        for _ in range(4):
            statuses.append(int(stream.readline().split()[1]))
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = stream.read(length)
            if len(tokens) < 3:
                tokens.append(json.loads(body)["tokens"])
    finally:
        s.close()
    assert statuses == [200, 200, 200, 200], statuses
    assert len(set(map(tuple, tokens))) == 3, f"three different prompts, answers {tokens}"


def a_client_that_half_closes_after_its_request_gets_the_answer():
    for path, body in (("/tokenize", {"prompt": "hi"}),
                       ("/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 3}),
                       ("/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 3, "stream": True})):
        data = json.dumps(body).encode()
        a, _ = raw(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                   % (path.encode(), len(data)), [data])
        assert a is not None and a.status == 200, f"{path} {body}: {a and a.status} {a and a.body[:200]!r}"
        if body.get("stream"):
            assert a.body.endswith("data: [DONE]\n\n"), a.body[-200:]
        else:
            assert a.json is not None, a.body[:200]


def slow_header_clients_are_cut_and_health_answers_meanwhile():
    """150 connections trickle their headers (slowloris): /health answers all along, and they are
    cut (the server is crowded past --max-connections 200 / 2, so after about 2 s)."""
    slow = []
    try:
        for _ in range(150):
            s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        t0 = time.monotonic()
        cut = set()
        for tick in range(40):  # 10 s at most
            for k, s in enumerate(slow):
                if k in cut:
                    continue
                try:
                    s.sendall(b"X-%d: y\r\n" % tick)
                except OSError:
                    cut.add(k)
            t = time.monotonic()
            assert healthy(), f"/health failed {t - t0:.1f} s into the trickle ({len(cut)} cut so far)"
            assert time.monotonic() - t < 5, "/health took over 5 s"
            if len(cut) == len(slow):
                break
            time.sleep(0.25)
        assert len(cut) == len(slow), f"{len(slow) - len(cut)} of {len(slow)} trickling connections were never cut"
    finally:
        for s in slow:
            s.close()


def a_slow_request_is_cut_at_the_read_timeout():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
    t0 = time.monotonic()
    try:
        s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        for _ in range(60):  # one byte every 0.25 s, inside any per-read timeout
            time.sleep(0.25)
            s.sendall(b" ")
        raise AssertionError("a body trickled for 15 s was not cut (--read-timeout 5)")
    except OSError:
        took = time.monotonic() - t0
        assert 4 < took < 8, f"cut after {took:.1f} s, wanted about 5 (--read-timeout 5)"
    finally:
        s.close()


def connections_over_max_connections_get_503_and_service_resumes():
    held = []
    try:
        for _ in range(220):  # --max-connections 200; the excess is answered 503 at once, unread
            held.append(socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT))
        import select
        refused, deadline = 0, time.monotonic() + 1.5
        pending = list(held)
        while pending and time.monotonic() < deadline and not refused:
            ready, _, _ = select.select(pending, [], [], 0.1)
            for s in ready:
                pending.remove(s)
                answer = s.recv(4096)
                if answer:  # (an empty read is a connection the crowded server cut)
                    assert answer.startswith(b"HTTP/1.1 503") and b"too_many_connections" in answer, answer[:200]
                    refused += 1
        assert refused > 0, "220 connections were open and none was refused"
    finally:
        for s in held:
            s.close()
    for _ in range(20):
        if healthy():
            return
        time.sleep(0.25)
    raise AssertionError("/health did not come back once the connections closed")


def neutral_values_of_openai_fields_are_accepted():
    a = request("POST", "/v1/chat/completions", {"model": MODEL, "messages": MSGS, "max_tokens": 1, "presence_penalty": 0,
                                                 "frequency_penalty": 0, "logprobs": False, "top_logprobs": None,
                                                 "logit_bias": None})
    assert a.status == 200, f"{a.status} {a.body[:300]!r}"


def other_values_of_unimplemented_openai_fields_are_400_by_name():
    for field, value in (("presence_penalty", 0.5), ("frequency_penalty", 1), ("logit_bias", {"5": 1})):
        e = expect_error(request("POST", "/v1/chat/completions", {"model": MODEL, "messages": MSGS, field: value}),
                         400, "unsupported_value")
        assert e["param"] == field, e


def null_content_is_400_by_name_without_a_template_trace():
    e = expect_error(request("POST", "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": None}]}),
                     400, "missing_required_parameter")
    assert e["param"] == "messages[0].content", e


def a_chat_template_error_names_no_server_path():
    # A tool call without its function object: the Qwen3 template's `arguments | tojson` fails on it
    # (as jinja2's does).
    msgs = [{"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function"}]}]
    e = expect_error(request("POST", "/tokenize", {"messages": msgs}), 400, "invalid_messages")
    assert "/" not in e["message"].split(":")[0], e


def a_long_stop_list_is_400_not_a_cost_on_every_stream():
    expect_error(request("POST", "/v1/completions", {"model": MODEL, "prompt": "hi", "stop": ["s%d" % i for i in range(1000)]}),
                 400, "invalid_value")


CASES = [
    deep_json_in_a_chat_message_is_400_not_a_stack_overflow,
    deep_json_in_tokenize_messages_is_400_not_a_stack_overflow,
    max_tokens_int64_max_is_400_and_the_engine_keeps_serving,
    a_completion_that_fills_the_context_ends_with_length_and_the_engine_keeps_serving,
    chunked_body_to_an_unknown_route_is_not_buffered_past_max_body,
    chunked_body_over_max_body_is_413_while_it_is_read,
    chunked_body_within_max_body_is_accepted,
    chunked_together_with_content_length_is_400,
    post_without_content_length_is_411_not_read_until_close,
    content_length_far_over_max_body_is_413_at_once_not_skipped_byte_by_byte,
    two_different_content_lengths_are_400,
    gzip_body_is_415_not_inflated_without_a_limit,
    text_plain_and_form_bodies_are_415_so_a_web_page_cannot_post_json_without_a_preflight,
    a_malformed_request_line_gets_the_openai_envelope_with_a_code,
    an_http10_client_gets_no_chunked_encoding_and_a_body_that_ends_at_close,
    pipelined_requests_are_each_answered_in_order,
    a_client_that_half_closes_after_its_request_gets_the_answer,
    slow_header_clients_are_cut_and_health_answers_meanwhile,
    a_slow_request_is_cut_at_the_read_timeout,
    connections_over_max_connections_get_503_and_service_resumes,
    neutral_values_of_openai_fields_are_accepted,
    other_values_of_unimplemented_openai_fields_are_400_by_name,
    null_content_is_400_by_name_without_a_template_trace,
    a_chat_template_error_names_no_server_path,
    a_long_stop_list_is_400_not_a_cost_on_every_stream,
]


def process_gone(pid):
    """True once pid has exited (reaped, or a zombie); the process may vanish between any two reads."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def sigterm_with_slow_header_clients_stops_the_server():
    """Run last (it stops the server): clients that trickle header lines must not keep a SIGTERM'd
    server alive past its drain."""
    import os
    import signal
    slow = []
    for _ in range(6):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    t0 = time.monotonic()
    os.kill(PID, signal.SIGTERM)
    gone = False
    for tick in range(120):  # 30 s of trickling at most; the server must be gone well before
        for s in slow:
            try:
                s.sendall(b"X-Slow-%d: y\r\n" % tick)
            except OSError:
                pass
        if process_gone(PID):
            gone = True
            break
        time.sleep(0.25)
    for s in slow:
        s.close()
    assert gone, "met serve still runs 30 s after SIGTERM while clients trickle headers"
    print(f"   (exited {time.monotonic() - t0:.1f} s after SIGTERM)")


def healthy():
    try:
        return request("GET", "/health").status == 200
    except OSError:
        return False


def main():
    only = sys.argv[4] if len(sys.argv) > 4 else ""
    if only == "--shutdown":
        try:
            sigterm_with_slow_header_clients_stops_the_server()
            print("ok: sigterm_with_slow_header_clients_stops_the_server")
        except AssertionError as e:
            print(f"FAIL: sigterm_with_slow_header_clients_stops_the_server: {e}")
            sys.exit(1)
        return
    passed = failed = 0
    for _ in range(3):  # warm up: the first requests allocate what the server keeps
        request("POST", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 2})
    start_rss = rss_mb()
    for case in CASES:
        if only and only not in case.__name__:
            continue
        try:
            case()
            if not healthy():
                raise AssertionError("/health is not 200 after the case")
            passed += 1
            print(f"ok: {case.__name__}", flush=True)
        except Exception as e:  # a case's failure is reported and the suite goes on
            failed += 1
            print(f"FAIL: {case.__name__}: {type(e).__name__}: {e}", flush=True)
            if not healthy():
                print("FAIL: the server no longer answers /health 200; stopping", flush=True)
                break
    try:
        grown = rss_mb() - start_rss
    except OSError:
        print("FAIL: met serve is gone")
        print(f"{passed} passed, {failed + 1} failed")
        sys.exit(1)
    if grown < RSS_BUDGET_MB:
        passed += 1
        print(f"ok: RSS grew {grown:.1f} MiB over the suite (budget {RSS_BUDGET_MB})")
    else:
        failed += 1
        print(f"FAIL: RSS grew {grown:.1f} MiB over the suite (budget {RSS_BUDGET_MB})")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

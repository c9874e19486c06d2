"""hearthd end to end on the default model, over raw HTTP on its Unix socket: OpenAI
shapes streamed and not, a disconnect mid-stream frees the sequence, and SIGTERM during
streams lets them finish and exits 0."""
import argparse
import json
import os
import signal
import subprocess
import threading
import time

from hearthd_process import HANG_GUARD_S, Hearthd, gemma_model_or_skip, sse_events

MESSAGES = [{"role": "user", "content": "Name three colours of the rainbow."}]

# Tokens per request. HEARTH_E2E_SHORT=1 (the run on lavapipe, ~1 s a step) asks for a
# quarter: every check keeps its shape; the SIGTERM streams still have ~10 steps to go
# when the signal comes.
SHORT = os.environ.get("HEARTH_E2E_SHORT") == "1"


def n(tokens):
    return max(4, tokens // 4) if SHORT else tokens


def metric(m, name):
    """Sum of every sample of a metric family (all label sets)."""
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


def check_shapes(d):
    status, full = d.post_json("/v1/chat/completions", {"messages": MESSAGES, "temperature": 0, "max_tokens": n(20)})
    assert status == 200, full
    assert full["object"] == "chat.completion" and full["id"].startswith("chatcmpl-"), full
    assert full["model"] == "gemma3:270m", full
    choice = full["choices"][0]
    assert choice["index"] == 0 and choice["message"]["role"] == "assistant", choice
    assert choice["finish_reason"] in ("stop", "length")
    u = full["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] and u["completion_tokens"] > 0, u
    assert "cached_tokens" in u["prompt_tokens_details"], u
    t = full["timings"]
    for k in ("ttft_ms", "prefill_ms", "decode_ms", "prefill_tok_s", "decode_tok_s"):
        assert k in t, t
    assert set(t["itl_ms"]) >= {"mean", "p50", "p95"}, t

    c = d.connection()
    c.request("POST", "/v1/chat/completions", body=json.dumps(
        {"messages": MESSAGES, "temperature": 0, "max_tokens": n(20), "stream": True,
         "stream_options": {"include_usage": True}}), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream"), r.status
    events = list(sse_events(r))
    c.close()
    assert events[-1] == "[DONE]", events[-3:]
    chunks = events[:-1]
    assert all(ch["object"] == "chat.completion.chunk" for ch in chunks)
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant"
    text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks if ch["choices"])
    finishes = [ch["choices"][0]["finish_reason"] for ch in chunks if ch["choices"] and ch["choices"][0]["finish_reason"]]
    assert finishes == [choice["finish_reason"]], finishes
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == u["completion_tokens"]
    assert text == choice["message"]["content"], (text, choice["message"]["content"])

    status, comp = d.post_json("/v1/completions", {"prompt": "The capital of France is", "temperature": 0,
                                                   "max_tokens": n(8)})
    assert status == 200 and comp["object"] == "text_completion" and comp["choices"][0]["text"], comp

    status, err = d.post_json("/v1/completions", {"prompt": "word " * 3000, "max_tokens": 8})
    assert status == 400 and err["error"]["type"] == "invalid_request_error", (status, err)
    print("shapes ok: %r" % text)


def check_disconnect(d):
    before = d.metrics()
    c = d.connection()
    c.request("POST", "/v1/completions", body=json.dumps(
        {"prompt": "Once upon a time", "temperature": 1.0, "seed": 3, "max_tokens": 400, "stream": True}),
        headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    got = 0
    for ev in sse_events(r):
        got += 1
        if got == 3:
            break
    running = metric(d.metrics(), "hearth_running_sequences")
    assert running == 1, running
    c.sock.close()  # the client goes away mid-stream
    c.close()
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        m = d.metrics()
        if metric(m, "hearth_running_sequences") == 0 and \
                metric(m, "hearth_cancelled_total") > metric(before, "hearth_cancelled_total"):
            break
        time.sleep(0.02)
    else:
        raise AssertionError("hang guard: the sequence was not cancelled and freed within %d s of the disconnect: %r"
                             % (HANG_GUARD_S, d.metrics()))
    assert metric(m, "hearth_kv_blocks_used") == 0, m
    print("disconnect ok")


def check_sigterm_during_streams(d):
    results = [None, None]

    def stream(i):
        c = d.connection()
        c.request("POST", "/v1/completions", body=json.dumps(
            {"prompt": "Count: one, two, three,", "temperature": 0, "max_tokens": n(48), "stream": True}),
            headers={"Content-Type": "application/json"})
        r = c.getresponse()
        results[i] = list(sse_events(r))
        c.close()

    # SIGTERM once both streams run and have produced tokens (counters are cumulative). On a
    # loaded machine this poller can be descheduled until both streams have ended; then that
    # round proves nothing about SIGTERM and is run again.
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        generated_before = metric(d.metrics(), "hearth_generated_tokens_total")
        threads = [threading.Thread(target=stream, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        caught = False
        while time.monotonic() < deadline and any(t.is_alive() for t in threads):
            m = d.metrics()
            if metric(m, "hearth_running_sequences") == 2 and \
                    metric(m, "hearth_generated_tokens_total") >= generated_before + 4:
                caught = True
                break
            time.sleep(0.01)
        if caught:
            break
        for t in threads:
            t.join(HANG_GUARD_S)
        if time.monotonic() >= deadline:
            raise AssertionError("hang guard: the two streams were not both running within %d s: %r"
                                 % (HANG_GUARD_S, d.metrics()))
        print("both streams ended before the poll saw them running; again")
    d.proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(HANG_GUARD_S)
        assert not t.is_alive(), "hang guard: a stream did not end within %d s of SIGTERM" % HANG_GUARD_S
    try:
        rc = d.proc.wait(HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        raise AssertionError("hang guard: hearthd did not exit within %d s of SIGTERM:\n%s"
                             % (HANG_GUARD_S, d.log_text())) from None
    assert rc == 0, (rc, d.log_text())
    for events in results:
        assert events and events[-1] == "[DONE]", events
        finishes = [e["choices"][0]["finish_reason"] for e in events[:-1] if e["choices"]
                    and e["choices"][0]["finish_reason"]]
        assert len(finishes) == 1, events
    print("sigterm ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    args = ap.parse_args()
    model = gemma_model_or_skip()
    d = Hearthd(args.hearthd, model, "--parallel", "4", "--ctx", "2048")
    try:
        check_shapes(d)
        check_disconnect(d)
        check_sigterm_during_streams(d)
    finally:
        d.close()
    print("ok")


if __name__ == "__main__":
    main()

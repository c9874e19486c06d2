"""A client that stops reading a streamed answer does not hold its sequence: once its socket
buffer is full and it has read nothing for --write-timeout, hearthd closes the connection
and cancels the generation, freeing the sequence and its KV blocks; other clients are
served meanwhile. A real hearthd (Gemma 3 270M), a real Unix socket that is never read."""
import argparse
import json
import socket
import time

from hearthd_process import HANG_GUARD_S, Hearthd, gemma_model_or_skip

WRITE_TIMEOUT_S = 3
# Far more than the tokens that fill the daemon's socket buffer (a few hundred SSE chunks of
# ~200 bytes: AF_UNIX charges each write's buffer, ~1 KiB, to the sender's 208 KiB
# SO_SNDBUF), so the stream can only end early by the write timeout.
MAX_TOKENS = 3000
# A base model continues a counting list greedily without an end of text.
PROMPT = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"


def metric(m, name):
    """Sum of every sample of a metric family (all label sets)."""
    return sum(v for k, v in m.items() if k == name or k.startswith(name + "{"))


def wait_for(d, what, pred):
    """Polls /metrics until pred(metrics) holds; returns those metrics (hang guard: fails)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        m = d.metrics()
        if pred(m):
            return m
        time.sleep(0.05)
    raise AssertionError("hang guard: %s did not happen within %d s:\n%s" % (what, HANG_GUARD_S, d.log_text()))


def open_stalled_stream(d):
    """Sends a streamed completion on a raw socket that will not be read."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # As small as the kernel allows: on AF_UNIX the sender's buffer is what fills, but a
    # small receive buffer costs nothing and is what a stalled TCP client would have.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect(d.socket)
    body = json.dumps({"prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


def short_completion(d):
    status, body = d.post_json("/v1/completions", {"prompt": "The sky is", "max_tokens": 4, "temperature": 0})
    assert status == 200, body
    return body["usage"]["completion_tokens"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    args = ap.parse_args()
    d = Hearthd(args.hearthd, gemma_model_or_skip(), "--parallel", "2", "--ctx", "4096",
                "--write-timeout", str(WRITE_TIMEOUT_S))
    try:
        before = d.metrics()
        assert metric(before, "hearth_write_timeouts_total") == 0, before
        started = time.monotonic()
        stalled = open_stalled_stream(d)
        wait_for(d, "the stalled request running", lambda m: metric(m, "hearth_running_sequences") >= 1)

        # Others are served while it stalls: short requests, one after another, until the
        # write timeout cuts it off. Each one that returned before the cut was served beside it.
        served_beside, short_tokens = 0, 0
        while True:
            short_tokens += short_completion(d)
            m = d.metrics()
            if metric(m, "hearth_write_timeouts_total") > 0:
                break
            served_beside += 1
            if time.monotonic() - started > HANG_GUARD_S:
                raise AssertionError("hang guard: no write timeout within %d s:\n%s" % (HANG_GUARD_S, d.log_text()))
        cut_after_s = time.monotonic() - started
        print("served beside the stalled stream: %d; write timeout seen after %.1f s" % (served_beside, cut_after_s))
        assert served_beside >= 1, "no request was served while the stalled stream held its sequence"
        assert cut_after_s >= WRITE_TIMEOUT_S, "cut off before the write timeout (%.1f s)" % cut_after_s

        # The sequence is gone and every KV block is back (cached blocks count as free).
        after = wait_for(d, "the stalled sequence ending",
                         lambda m: metric(m, "hearth_running_sequences") == 0 and metric(m, "hearth_kv_blocks_used") == 0)
        assert metric(after, "hearth_write_timeouts_total") == 1, after
        assert metric(after, "hearth_cancelled_total") - metric(before, "hearth_cancelled_total") == 1, after
        stalled_tokens = metric(after, "hearth_generated_tokens_total") - metric(before, "hearth_generated_tokens_total") \
            - short_tokens
        print("the stalled stream generated %d of its %d tokens" % (stalled_tokens, MAX_TOKENS))
        assert 0 < stalled_tokens < MAX_TOKENS, stalled_tokens

        # What the client would read now: the chunks that were buffered, then the end of the
        # connection, without the stream's end ([DONE], the last chunk).
        stalled.settimeout(HANG_GUARD_S)
        received = b""
        while True:
            data = stalled.recv(65536)
            if not data:
                break
            received += data
        stalled.close()
        assert received.startswith(b"HTTP/1.1 200"), received[:200]
        assert b"data: {" in received and b"[DONE]" not in received, received[-300:]
        print("stalled client read %d bytes, then the connection's end" % len(received))

        # The daemon serves on as before.
        short_completion(d)
        assert "read nothing for" in d.log_text(), d.log_text()
    finally:
        assert d.close() == 0
    print("ok")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Benchmarks a real hearthd over its Unix socket (the issue-3 figures):

1. N concurrent streaming clients (N = 1, 4, 8): aggregate decode tok/s and the p50/p95
   inter-token latency each client sees (arrival times of SSE chunks, client side).
2. Interference: one client streams while another sends a ~2000-token prompt; the p95 and
   largest gap of the running stream during the admission, and the long prompt's response
   time beside the stream and alone, for each --prefill-chunk in --chunks and each
   --step-budget-ms in --budgets (0: fixed chunks, the behaviour before the step budget).

Usage: bench/daemon_bench.py --hearthd build/daemon/hearthd [--threads 2] [--tokens 128]
       [--chunks 128] [--budgets 0,100] [--model qwen2.5-coder:0.5b]
       [--long-items 420] [--stream-tokens 400] [--timeout 600]   (smaller and longer for a slow
       backend, e.g. HEARTH_E2E_HEARTHD_ARGS="--backend vulkan" on llvmpipe)
       bench/daemon_bench.py --server-url http://127.0.0.1:8080   (the interference test only,
       against another engine's server started by hand on the same model and threads)
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from hearthd_process import Hearthd, default_chat_model_or_skip, gemma_model_or_skip, sse_events  # noqa: E402


def pct(v, q):
    if not v:
        return 0.0
    s = sorted(v)
    return s[min(len(s) - 1, max(0, int(round(q * len(s) + 0.5)) - 1))]


TIMEOUT_S = 600  # per request; --timeout raises it for a slow backend (llvmpipe)


def stream(d, body, out, started=None):
    """Streams a completion; out gets arrival times of content chunks and the final usage."""
    c = d.connection(timeout=TIMEOUT_S)
    body = dict(body, stream=True, stream_options={"include_usage": True})
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200, r.read()
    times = []
    for ev in sse_events(r):
        if ev == "[DONE]":
            break
        if ev["choices"] and ev["choices"][0].get("text"):
            times.append(time.perf_counter())
            if started is not None and len(times) == 10:
                started.set()
        if ev.get("usage"):
            out["usage"] = ev["usage"]
            out["timings"] = ev.get("timings")
    c.close()
    out["times"] = times


def concurrent(d, n, tokens):
    outs = [dict() for _ in range(n)]
    threads = [threading.Thread(target=stream, args=(d, {
        "prompt": "Counting from %d: %d, %d, %d," % (100 * i, 100 * i, 100 * i + 1, 100 * i + 2),
        "temperature": 0, "max_tokens": tokens}, outs[i])) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = min(o["times"][0] for o in outs)
    last = max(o["times"][-1] for o in outs)
    decoded = sum(o["usage"]["completion_tokens"] - 1 for o in outs)
    gaps = [b - a for o in outs for a, b in zip(o["times"], o["times"][1:])]
    return decoded / (last - first), 1000 * pct(gaps, 0.5), 1000 * pct(gaps, 0.95)


LONG_ITEMS = 420  # about 2,000 tokens; --long-items makes it shorter for a slow backend


def long_prompt(tag):
    return tag + ": " + " ".join("item%d is %s;" % (i, "red" if i % 2 else "blue") for i in range(LONG_ITEMS))


class OtherServer:
    """An OpenAI-compatible server already running on host:port (e.g. llama-server --parallel 2),
    for the interference figures side by side; its tokenizer endpoint is /tokenize."""

    tokenize_path = "/tokenize"

    def __init__(self, url):
        self.host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
        self.port = int(port or 80)

    def connection(self, timeout=None):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout or TIMEOUT_S)

    def post_json(self, path, body):
        c = self.connection()
        try:
            c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, json.loads(r.read())
        finally:
            c.close()

    def close(self):
        pass


def interference(args, model, chunk, budget):
    if args.server_url:
        d = OtherServer(args.server_url)
    else:
        d = Hearthd(args.hearthd, model, "--parallel", "2", "--ctx", "4096", "--prefill-chunk", str(chunk),
                    "--step-budget-ms", str(budget), threads=args.threads)
    try:
        # The long prompt alone first (another text: nothing of it is cached for the run beside the stream).
        t0 = time.perf_counter()
        status, resp = d.post_json("/v1/completions", {"prompt": long_prompt("Alone"), "max_tokens": 1,
                                                       "temperature": 0})
        alone_ms = 1000 * (time.perf_counter() - t0)
        assert status == 200, resp
        long_text = long_prompt("Beside")
        _, tok = d.post_json(getattr(d, "tokenize_path", "/api/tokenize"), {"content": long_text})
        a, b = {}, {}
        started = threading.Event()
        ta = threading.Thread(target=stream, args=(d, {"prompt": "Counting: 1, 2, 3,", "temperature": 0,
                                                       "max_tokens": args.stream_tokens}, a, started))
        ta.start()
        started.wait()
        t0 = time.perf_counter()
        status, resp = d.post_json("/v1/completions", {"prompt": long_text, "max_tokens": 1, "temperature": 0})
        t1 = time.perf_counter()
        assert status == 200, resp
        ta.join()
        gaps = [(y - x) for x, y in zip(a["times"], a["times"][1:]) if y >= t0 and x <= t1]
        return len(tok["tokens"]), 1000 * (t1 - t0), alone_ms, 1000 * pct(gaps, 0.95), 1000 * max(gaps or [0]), \
            1000 * statistics.median([(y - x) for x, y in zip(a["times"], a["times"][1:])])
    finally:
        d.close()


def main():
    global LONG_ITEMS, TIMEOUT_S
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--chunks", default="128", help="--prefill-chunk values for the interference test")
    ap.add_argument("--budgets", default="0,100", help="--step-budget-ms values for the interference test")
    ap.add_argument("--skip-concurrent", action="store_true")
    ap.add_argument("--model", default="gemma3:270m",
                    help="gemma3:270m (the figures of issue 21), qwen2.5-coder:0.5b, or a GGUF path")
    ap.add_argument("--server-url", help="run only the interference test, against this already running "
                    "OpenAI-compatible server (e.g. http://127.0.0.1:8080, llama-server --parallel 2)")
    ap.add_argument("--long-items", type=int, default=LONG_ITEMS,
                    help="items in the long prompt (420: about 2,000 tokens)")
    ap.add_argument("--stream-tokens", type=int, default=400,
                    help="tokens the running stream asks for (it must outlast the long prompt)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per request")
    args = ap.parse_args()
    LONG_ITEMS, TIMEOUT_S = args.long_items, args.timeout
    if not args.hearthd and not args.server_url:
        ap.error("--hearthd or --server-url is required")
    if args.server_url:
        args.skip_concurrent, args.chunks, args.budgets = True, "0", "0"
    if args.model == "gemma3:270m":
        model = gemma_model_or_skip()
    elif args.model == "qwen2.5-coder:0.5b":
        model = default_chat_model_or_skip()
    else:
        model = args.model

    d = None if args.skip_concurrent else Hearthd(args.hearthd, model, "--parallel", "8", "--ctx", "1024",
                                                   threads=args.threads)
    try:
        if d is None:
            raise StopIteration
        concurrent(d, 1, 16)  # warm-up
        print("clients  aggregate decode tok/s  ITL p50 ms  ITL p95 ms")
        for n in (1, 4, 8):
            tps, p50, p95 = concurrent(d, n, args.tokens)
            print("%7d  %22.1f  %10.1f  %10.1f" % (n, tps, p50, p95))
    except StopIteration:
        pass
    finally:
        if d is not None:
            d.close()

    print("\nprefill chunk  budget ms  prompt tokens  its response ms  alone ms  stream ITL p95 ms during it"
          "  max gap ms  median ITL ms")
    for chunk in (int(c) for c in args.chunks.split(",")):
        for budget in (int(b) for b in args.budgets.split(",")):
            n, ms, alone, p95, gmax, med = interference(args, model, chunk, budget)
            print("%13s  %9s  %13d  %15.0f  %8.0f  %27.1f  %10.1f  %13.1f" % (
                chunk or "off", budget or "off", n, ms, alone, p95, gmax, med), flush=True)


if __name__ == "__main__":
    main()

"""What a front hearthd adds to an upstream's answers (issue 45): a hearthd on loopback TCP
is the upstream; a second hearthd on a Unix socket forwards to it. The same greedy streamed
chat is sent alternately to the upstream directly (TCP) and through the front (Unix socket),
and the client measures time to the first content chunk and the gaps between chunks.
Prints the medians of each path and their difference. With --tls the front reaches the
upstream through a TLS-terminating relay (tests/e2e/fault_proxy.py, with a CA made by the
openssl CLI); with --proxy, through the same relay without TLS. Through a relay, the number of
connections the front opened is counted (one per request without keep-alive). Also prints the
descriptors the front holds at rest after the runs. Usage:
  bench/upstream_overhead.py --hearthd build/daemon/hearthd [--runs 20] [--max-tokens 32] [--tls]"""
import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from hearthd_process import CacheDaemon, Hearthd, free_port, gemma_model_or_skip  # noqa: E402
from fault_proxy import FaultProxy, make_certs  # noqa: E402


def timed_stream(conn, model, max_tokens, i):
    body = {"model": model, "stream": True, "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "Tell me about rivers, part %d." % i}]}
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    times, server = [], {}
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ev = json.loads(line[6:])
        if ev.get("choices") and (ev["choices"][0].get("delta") or {}).get("content"):
            times.append(time.perf_counter())
        if "timings" in ev:
            server = ev["timings"]
    conn.close()
    gaps = [(b - a) * 1000 for a, b in zip(times, times[1:])]
    # The daemon's own TTFT: the front's (request sent upstream -> first content) and the
    # upstream's, from the answer's timings.
    own = (server.get("ttft_ms", 0.0), server.get("upstream_timings", server).get("ttft_ms", 0.0))
    return (times[0] - t0) * 1000, statistics.median(gaps) if gaps else 0.0, own


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--tls", action="store_true", help="front -> TLS relay -> upstream")
    ap.add_argument("--proxy", action="store_true", help="front -> plain relay -> upstream")
    args = ap.parse_args()
    model = gemma_model_or_skip()
    work = tempfile.mkdtemp(prefix="hearth-upstream-bench-")
    port = free_port()
    upstream = Hearthd(args.hearthd, model, "--listen-tcp", "127.0.0.1:%d" % port, threads=1)
    proxy, url, extra = None, "http://127.0.0.1:%d" % port, ""
    if args.tls:
        ca, _, cert, key = make_certs(work)
        proxy = FaultProxy(port, cert=cert, key=key)
        url, extra = "https://localhost:%d" % proxy.port, 'ca_file = "%s"\n' % ca
    elif args.proxy:
        proxy = FaultProxy(port)
        url = "http://127.0.0.1:%d" % proxy.port
    config = os.path.join(work, "front.toml")
    with open(config, "w") as f:
        f.write('[[upstream]]\nname = "up"\nurl = "%s"\nmodel_prefix = "up/"\n%s' % (url, extra))
    front = CacheDaemon(args.hearthd, model, os.path.join(work, "cache"), "--config", config)
    results = {"direct": [], "front": []}
    try:
        for i in range(args.runs):
            results["direct"].append(timed_stream(http.client.HTTPConnection("127.0.0.1", port), "gemma3:270m",
                                                  args.max_tokens, i))
            results["front"].append(timed_stream(front.connection(), "up/gemma3:270m", args.max_tokens, i))
        fds = len(os.listdir("/proc/%d/fd" % front.proc.pid))
    finally:
        if proxy:
            proxy.close()
        front.close()
        upstream.close()
    med = {k: (statistics.median(t for t, _, _ in v), statistics.median(g for _, g, _ in v)) for k, v in results.items()}
    for k, (ttft, itl) in med.items():
        print("%-7s TTFT median %7.2f ms   ITL median %6.2f ms   (%d runs, %d tokens)" %
              (k, ttft, itl, args.runs, args.max_tokens))
    print("front adds: TTFT %+.2f ms, ITL %+.2f ms (client side)" % (med["front"][0] - med["direct"][0],
                                                                     med["front"][1] - med["direct"][1]))
    print("through the front, timings say: front TTFT median %.2f ms, upstream's own %.2f ms" %
          (statistics.median(o[0] for _, _, o in results["front"]),
           statistics.median(o[1] for _, _, o in results["front"])))
    print("front TTFT minus the upstream's own, median of each run's: %.2f ms" %
          statistics.median(o[0] - o[1] for _, _, o in results["front"]))
    print("the front holds %d descriptors at rest after the runs" % fds)
    if proxy:
        print("the front opened %d connections to the upstream for %d requests%s" %
              (proxy.connections, args.runs, " (TLS)" if args.tls else ""))


if __name__ == "__main__":
    main()

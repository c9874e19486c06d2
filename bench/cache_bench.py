#!/usr/bin/env python3
"""Time to first token of one long prompt on hearthd: cold, with a memory hit, and with a
disk hit after a restart; bytes on disk per token; restore throughput next to a plain
sequential read of the same chunk files.

  bench/cache_bench.py --hearthd build/daemon/hearthd [--model FILE|NAME] [--kv-type f16|q8_0]
                      [--tokens 4000] [--threads 2]

Page cache: before the disk hit (and before the plain read) the chunk files are evicted
from the page cache with posix_fadvise(DONTNEED), so both read from the disk; the model's
weights stay cached (a short unrelated request runs first after the restart), as they
would on a machine whose daemon restarted. --warm-chunks skips the eviction.

--beside-stream N: after the rest, restarts N more times and sends the disk hit while
another client's stream decodes (a short prompt, 200 tokens), then the same prompt again
(a memory hit, the same first step without a restore); prints the stream's inter-token gaps
as its client sees them (median, and the largest one that overlaps each hit) and the hits'
TTFT.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from hearthd_process import UnixHTTPConnection  # noqa: E402


def post(sock, path, body):
    c = UnixHTTPConnection(sock, 600)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    c.close()
    if r.status != 200:
        raise SystemExit("%s -> %d %s" % (path, r.status, data))
    return data


def start(args, sock, cache):
    log = open(os.path.join(os.path.dirname(sock), "hearthd.log"), "ab")
    cmd = [args.hearthd, "--socket", sock, "--cache-dir", cache, "--threads", str(args.threads),
           "--ctx", str(args.tokens + 512)]
    if args.model:
        cmd += ["--model", args.model]
    if args.kv_type:
        cmd += ["--kv-type", args.kv_type]
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            c = UnixHTTPConnection(sock, 5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("hearthd did not start")


def prompt_of(sock, n_tokens):
    """Numbered sentences, cut to n_tokens tokens (BOS included)."""
    words = ["red", "green", "blue", "grey"], ["fox", "owl", "cat", "bear", "eel"], ["river", "hill", "market"]
    items = ["Item %d: the %s %s walks to the %s and counts %d stones." %
             (i, words[0][i % 4], words[1][i % 5], words[2][i % 3], i * 7) for i in range(n_tokens // 10)]
    text = " ".join(items)
    ids = post(sock, "/api/tokenize", {"content": text})["tokens"]
    return post(sock, "/api/detokenize", {"tokens": ids[1:n_tokens]})["content"]


def ask(sock, prompt):
    t0 = time.time()
    r = post(sock, "/v1/completions", {"prompt": prompt, "max_tokens": 1, "temperature": 0})
    wall = (time.time() - t0) * 1000
    return r, wall


def evict(files):
    """Drops the files' pages from the page cache; False where the kernel refuses."""
    os.sync()
    ok = True
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            ok = False
        finally:
            os.close(fd)
    return ok


def stream_times(sock, times):
    """Streams 200 tokens of a short prompt; appends each event's arrival time to times."""
    c = UnixHTTPConnection(sock, 600)
    body = {"prompt": "Once upon a time", "max_tokens": 200, "temperature": 0, "stream": True, "ignore_eos": True}
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data:"):
            times.append(time.time())
    c.close()


def beside_stream(args, sock, cache, prompt, files):
    """A disk hit after a restart while another client's stream decodes."""
    p = start(args, sock, cache)
    try:
        post(sock, "/v1/completions", {"prompt": "Warm-up: the weights are read once.", "max_tokens": 2})
        if not args.warm_chunks:
            evict(files)
        times = []
        t = threading.Thread(target=stream_times, args=(sock, times))
        t.start()
        time.sleep(0.6)  # the stream is decoding
        t0 = time.time()
        hit, _ = ask(sock, prompt)
        t1 = time.time()
        # The same prompt again, now a memory hit: what a new sequence's first step beside
        # the stream costs without any restore, for comparison.
        time.sleep(0.3)
        t2 = time.time()
        mem, _ = ask(sock, prompt)
        t3 = time.time()
        t.join()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
    if times[-1] < t3:
        print("(the stream ended before the memory hit did; the last column is not comparable)")

    def largest_gap(a, b):
        during = [(times[i] - times[i - 1]) * 1000 for i in range(1, len(times)) if times[i] >= a and times[i - 1] <= b]
        return max(during) if during else float("nan")

    gaps = sorted((times[i] - times[i - 1]) * 1000 for i in range(1, len(times)))
    print("| %.1f | %.1f | %d | %.1f | %.1f | %.1f | %.1f |" % (
        hit["timings"]["ttft_ms"], hit["timings"].get("cache_restore_ms", 0),
        hit["timings"].get("cached_tokens", {}).get("disk", 0), gaps[len(gaps) // 2], largest_gap(t0, t1),
        mem["timings"]["ttft_ms"], largest_gap(t2, t3)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", help="hearthd's --model (default: hearthd's own default)")
    ap.add_argument("--kv-type", help="hearthd's --kv-type (default: hearthd's own default, f16)")
    ap.add_argument("--beside-stream", type=int, default=0, metavar="N",
                    help="N more restarts, each with the disk hit sent while another stream decodes")
    ap.add_argument("--warm-chunks", action="store_true", help="leave the chunk files in the page cache")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="hearth-cache-bench-")
    sock, cache = os.path.join(d, "hearth.sock"), os.path.join(d, "cache")
    try:
        p = start(args, sock, cache)
        prompt = prompt_of(sock, args.tokens)
        rows = []
        cold, wall = ask(sock, prompt)
        rows.append(("cold", cold, wall))
        mem, wall = ask(sock, prompt)
        rows.append(("memory hit", mem, wall))
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        files = glob.glob(os.path.join(cache, "chunks", "*", "*.kv"))
        disk_bytes = sum(os.path.getsize(f) for f in files)
        p = start(args, sock, cache)
        post(sock, "/v1/completions", {"prompt": "Warm-up: the weights are read once.", "max_tokens": 2})
        dropped = not args.warm_chunks and evict(files)
        disk, wall = ask(sock, prompt)
        rows.append(("disk hit after restart" + (" (chunk files not in the page cache)" if dropped else " (chunk files in the page cache)"), disk, wall))
        p.send_signal(signal.SIGTERM)
        p.wait(60)
        dropped_read = not args.warm_chunks and evict(files)
        t0 = time.time()
        n = 0
        for f in files:
            with open(f, "rb") as fh:
                n += len(fh.read())
        read_s = time.time() - t0
        print("prompt: %d tokens; %d chunk files, %.1f MiB, %.0f bytes per cached token" %
              (cold["usage"]["prompt_tokens"], len(files), disk_bytes / 2**20,
               disk_bytes / max(1, disk["timings"]["cached_tokens"]["disk"] if "cached_tokens" in disk["timings"] else 1)))
        print("| case | TTFT (server) ms | wall ms | cached (memory/disk) | prefilled | restore ms | restore MiB |")
        print("|---|---|---|---|---|---|---|")
        for name, r, wall in rows:
            t, u = r["timings"], r["usage"]
            c = t.get("cached_tokens", {})
            print("| %s | %.1f | %.1f | %s/%s | %s | %.1f | %.1f |" % (
                name, t["ttft_ms"], wall, c.get("memory", "?"), c.get("disk", "?"), t.get("prefilled_tokens", "?"),
                t.get("cache_restore_ms", 0), t.get("cache_restore_bytes", 0) / 2**20))
        restore_ms = disk["timings"].get("cache_restore_ms", 0)
        # Bytes the restore read (a sliding-window model reads part of most chunks), else
        # every file's size for an older hearthd that does not report them.
        read_bytes = disk["timings"].get("cache_restore_bytes") or disk_bytes
        if restore_ms:
            print("restore: %.2f GB/s (%.1f MiB of %.1f MiB on disk in %.1f ms, read + verify + copy into KV blocks)" %
                  (read_bytes / restore_ms / 1e6, read_bytes / 2**20, disk_bytes / 2**20, restore_ms))
        print("sequential read of the same files%s: %.2f GB/s (%.1f ms)" %
              (" (not in the page cache)" if dropped_read else " (in the page cache)", n / read_s / 1e9, read_s * 1000))
        print("disk hit TTFT / cold TTFT = 1/%.0f" % (cold["timings"]["ttft_ms"] / disk["timings"]["ttft_ms"]))
        if args.beside_stream:
            print("\ndisk hit beside a decoding stream%s:" % ("" if args.warm_chunks else " (chunk files evicted)"))
            print("| disk hit TTFT ms | restore ms | disk tokens | stream median gap ms | stream largest gap during "
                  "the disk hit ms | memory hit TTFT ms | stream largest gap during the memory hit ms |")
            print("|---|---|---|---|---|---|---|")
            for _ in range(args.beside_stream):
                beside_stream(args, sock, cache, prompt, files)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

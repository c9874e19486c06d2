#!/usr/bin/env python3
"""Several models in one hearthd (issue 16): load time of each installed model, cold (its
file dropped from the page cache with posix_fadvise DONTNEED) and with the file in the page
cache; the first-token time of a request that has to load its model; the daemon's RSS with
one, two and three models loaded.

hearthd runs without --model on the models folder ($HEARTH_MODELS or the default), with
--keep-alive -1 so that nothing is unloaded but by /api/unload. Each model is measured with
a one-token completion (max_tokens 1, "model" naming it); its load time is read from the
daemon's log ("model loaded in N ms").

    bench/model_host_bench.py --hearthd build/daemon/hearthd [--rounds 3]

Dropping a file from the page cache needs no privilege (it only asks); a file other
processes keep mapped may stay cached, which the "cold" figure then says by being warm.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from hearthd_process import Hearthd, models_dir  # noqa: E402


def drop_from_page_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def loaded_ids(d):
    status, data = d.request("GET", "/api/ps")
    assert status == 200, (status, data)
    return [m["id"] for m in json.loads(data)["models"]]


def first_token(d, model):
    """A one-token completion naming model; (seconds to the answer, the answer)."""
    t0 = time.monotonic()
    status, data = d.post_json("/v1/completions",
                               {"model": model, "prompt": "The capital of France is", "max_tokens": 1,
                                "temperature": 0})
    assert status == 200, (status, data)
    return time.monotonic() - t0, data


def last_load_ms(d, model_path):
    found = re.findall(r"model loaded in (\d+) ms: " + re.escape(model_path), d.log_text())
    return int(found[-1]) if found else None


def unload_all(d, keep=()):
    for m in loaded_ids(d):
        if m not in keep:
            status, _ = d.post_json("/api/unload", {"model": m})
            assert status == 200
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and [m for m in loaded_ids(d) if m not in keep]:
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    d = Hearthd(args.hearthd, None, "--keep-alive", "-1", threads=args.threads)
    try:
        status, data = d.request("GET", "/v1/models")
        models = [m for m in json.loads(data)["data"] if m["meta"]["available"]]
        paths = {}
        status, data = d.request("GET", "/api/models")
        for m in json.loads(data)["models"]:
            paths[os.path.splitext(m["file"])[0]] = os.path.join(models_dir(), m["file"])
        start = loaded_ids(d)
        print("models folder: %s; loaded at start: %s" % (models_dir(), ", ".join(start)))
        print("RSS with %d model(s) loaded: %.0f MiB" % (len(start), rss_mib(d.proc.pid)))

        # RSS as models are added, in listing order.
        for m in models:
            if m["id"] not in loaded_ids(d):
                first_token(d, m["id"])
            print("RSS with %d model(s) loaded (%s): %.0f MiB" %
                  (len(loaded_ids(d)), ", ".join(loaded_ids(d)), rss_mib(d.proc.pid)))

        # Load times: each model unloaded, then loaded by a request, cold and warm.
        print()
        print("%-36s %14s %14s %16s %16s" % ("model", "load cold ms", "load warm ms", "1st token cold s",
                                            "1st token warm s"))
        for m in models:
            rows = {"cold": ([], []), "warm": ([], [])}
            for _ in range(args.rounds):
                for kind in ("cold", "warm"):
                    unload_all(d)
                    if kind == "cold":
                        drop_from_page_cache(paths[m["id"]])
                    seconds, _ = first_token(d, m["id"])
                    rows[kind][0].append(last_load_ms(d, paths[m["id"]]) or float("nan"))
                    rows[kind][1].append(seconds)
            med = statistics.median
            print("%-36s %14.0f %14.0f %16.3f %16.3f" % (m["id"], med(rows["cold"][0]), med(rows["warm"][0]),
                                                        med(rows["cold"][1]), med(rows["warm"][1])))
        # A request to a model already loaded, for comparison.
        t, _ = first_token(d, models[-1]["id"])
        t, _ = first_token(d, models[-1]["id"])
        print("a one-token request to a loaded model: %.3f s" % t)
    finally:
        d.close()


if __name__ == "__main__":
    main()

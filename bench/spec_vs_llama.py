#!/usr/bin/env python3
"""hearth's speculative decoding next to llama.cpp's n-gram speculation, in one sitting (issue 44).

The same three greedy requests as bench/spec_bench.py (same messages, max_tokens, temperature 0)
go to one hearthd and two llama-servers on the same GGUF: one started without speculation, one
with --spec-type SPEC (plus --llama-args). Each prompt is run once first in every server so its KV
is cached; then every repetition runs hearth with drafts, llama.cpp with drafts, hearth without,
llama.cpp without (the order reversed on odd repetitions), so both engines and both modes see the
same machine. Prints decode tok/s per run, the medians, the ratios speculative / plain per engine
and hearth / llama.cpp per mode, drafts kept, and whether each engine's two texts are the same.

Usage: bench/spec_vs_llama.py --hearthd build/daemon/hearthd
       --llama-server /tmp/llama.cpp/build2/bin/llama-server [--threads 1,2] [--reps 2]
       [--spec ngram-simple] [--llama-args "--spec-draft-n-max 8"] [--only rewrite,document]
"""
import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from hearthd_process import Hearthd, default_chat_model_or_skip, models_dir  # noqa: E402
from spec_bench import PROMPTS  # noqa: E402
from spec_bench import run as run_hearth  # noqa: E402

MODEL_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, binary, model, threads, extra):
        self.port = free_port()
        self.log = open(f"/tmp/llama-server-{self.port}.log", "w", encoding="utf-8")
        cmd = [binary, "-m", model, "-t", str(threads), "-tb", str(threads), "-c", "8192", "-np", "1",
               "--host", "127.0.0.1", "--port", str(self.port), "--no-webui"] + extra
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited {self.proc.returncode}: {self.log.name}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"llama-server not ready: {self.log.name}")

    def run(self, prompt, max_tokens):
        body = json.dumps({"messages": [{"role": "user", "content": prompt}], "temperature": 0,
                           "max_tokens": max_tokens}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions", body,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            out = json.load(r)
        t = out["timings"]
        return (out["choices"][0]["message"]["content"], t["predicted_per_second"],
                t.get("draft_n", 0), t.get("draft_n_accepted", 0))

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


class Tally:
    """Decode tok/s, drafts and texts of one engine in one mode."""

    def __init__(self):
        self.speeds, self.texts, self.drafted, self.accepted = [], set(), 0, 0

    def add(self, text, speed, drafted, accepted):
        self.speeds.append(speed)
        self.texts.add(text)
        self.drafted += drafted
        self.accepted += accepted

    def median(self):
        return statistics.median(self.speeds)


def hearth_call(d, prompt, max_tokens, speculative):
    text, t, _ = run_hearth(d, prompt, max_tokens, speculative)
    return text, t["decode_tok_s"], t.get("draft_tokens", 0), t.get("accepted_tokens", 0)


def bench_prompt(d, llama_off, llama_on, prompt, max_tokens, reps):
    calls = {("hearth", True): lambda: hearth_call(d, prompt, max_tokens, True),
             ("llama", True): lambda: llama_on.run(prompt, max_tokens),
             ("hearth", False): lambda: hearth_call(d, prompt, max_tokens, False),
             ("llama", False): lambda: llama_off.run(prompt, max_tokens)}
    hearth_call(d, prompt, 4, False)  # every prompt's KV cached first: the runs below decode only
    llama_on.run(prompt, 4)
    llama_off.run(prompt, 4)
    tally = {k: Tally() for k in calls}
    order = list(calls)
    for rep in range(reps):
        for key in order if rep % 2 == 0 else reversed(order):
            tally[key].add(*calls[key]())
    return tally


def report(threads, name, tally):
    def fmt(key):
        t = tally[key]
        return f"{'/'.join('%.1f' % s for s in t.speeds)} (median {t.median():.1f})"

    h_on, h_off = tally[("hearth", True)], tally[("hearth", False)]
    l_on, l_off = tally[("llama", True)], tally[("llama", False)]
    print(f"threads {threads} {name}: hearth spec {fmt(('hearth', True))} plain {fmt(('hearth', False))}"
          f" kept {h_on.accepted}/{h_on.drafted}; llama spec {fmt(('llama', True))} plain "
          f"{fmt(('llama', False))} kept {l_on.accepted}/{l_on.drafted}", flush=True)
    print(f"  ratios: hearth spec/plain {h_on.median() / h_off.median():.2f}, llama spec/plain "
          f"{l_on.median() / l_off.median():.2f}; hearth/llama spec {h_on.median() / l_on.median():.2f},"
          f" plain {h_off.median() / l_off.median():.2f}; same text: hearth "
          f"{len(h_on.texts | h_off.texts) == 1}, llama {len(l_on.texts | l_off.texts) == 1}, "
          f"hearth==llama {(h_on.texts | h_off.texts) == (l_on.texts | l_off.texts)}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--spec", default="ngram-simple")
    ap.add_argument("--llama-args", default="")
    ap.add_argument("--only", default=",".join(PROMPTS))
    args = ap.parse_args()
    default_chat_model_or_skip()
    model = os.path.join(models_dir(), MODEL_FILE)
    spec_args = ["--spec-type", args.spec] + shlex.split(args.llama_args)
    for threads in [int(t) for t in args.threads.split(",")]:
        servers = []
        try:
            servers.append(Hearthd(args.hearthd, None, threads=threads))
            servers.append(LlamaServer(args.llama_server, model, threads, []))
            servers.append(LlamaServer(args.llama_server, model, threads, spec_args))
            for name in args.only.split(","):
                prompt, max_tokens = PROMPTS[name]
                report(threads, name, bench_prompt(*servers, prompt, max_tokens, args.reps))
        finally:
            for s in servers:
                s.close()


if __name__ == "__main__":
    main()

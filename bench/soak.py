#!/usr/bin/env python3
"""Soak: many clients against one server for a chosen time, mixing every kind of traffic a
desktop daemon meets, then checks that nothing broke and nothing leaked (issue 15).

  bench/soak.py --hearthd build/daemon/hearthd [--model smollm2:135m] [--clients 64]
                [--duration 600] [--parallel 4] [--threads 2] [--hearthd-arg=--kv-type=q8_0 ...]
                [--no-upstream] [--upstream-model smollm2:135m] [--upstream-down-s 3] [--no-upstream-fault]
  bench/soak.py --socket /run/user/1000/hearth/hearth.sock      (a running hearthd)
  bench/soak.py --url http://127.0.0.1:8080 [--pid PID]          (another OpenAI server, e.g.
                llama-server on the same model file: no /api/cache, no hearth gauges)

Each client loops until the time is up, picking one action at random (weights in ACTIONS):
greedy requests (temperature 0, streamed or whole, completions or chat, short prompts and
long ones that share a ~700-token prefix so they hit the prompt cache), sampled requests
with a random max_tokens, streams it drops after a few events, whole requests it abandons
before the answer (cancels, often while still queued), half-open connections (part of a
header, or headers and part of a body, then gone), /api/cache/warm of the long prefix and
DELETE /api/cache, and what users send now (bench/soak_kinds.py; hearth only): tool calls
(`tools`, on --tools-model, a second model loaded beside --model), schema-constrained answers
(OpenAI response_format json_schema, Ollama format), and the Ollama (/api/chat) and Anthropic
(/v1/messages) surfaces, streamed and whole, greedy (equal to their answers alone) and sampled
(valid: calls parse and fit their tool, JSON fits its schema, streams end as their surface says),
speculative requests (hearth only: greedy ones whose answers repeat their prompts, so drafts
are made, with drafts and with "speculative": false; the summary adds up their draft and
accepted tokens from the answers' timings, and one without drafts must show none), and the
tools model unloaded (/api/unload, or Ollama's keep_alive 0) and loaded (/api/load) while
others ask it, /api/ps read after each (it is unloaded before every rest, so each rest holds
the same models), and (--hearthd, unless --no-upstream; bench/soak_upstream.py) models
served by an upstream: a second hearthd serving --upstream-model on a loopback TCP port, the
soak's hearthd (the front) configured with one [[upstream]] for it whose `fallback` is --model;
greedy chats for "up/<model>" through the front on OpenAI's route, whole and streamed, and
on Ollama's and Anthropic's (equal to their answers alone, asked once through the front
before the load), and sampled ones (complete); every answer's timings must say `upstream`.
Once, at 15% of the load, the upstream is killed (SIGKILL, mid-answer when one is in
flight) and started again on its port --upstream-down-s later (while it is down the soak
itself asks a greedy chat on each route): until every upstream request
begun before the restart has ended and the front's /health shows the circuit closed again,
an upstream request may instead get the fallback's answer (timings say `fallback_from`;
greedy ones still equal their solo answers when the fallback is the same model), a 502/503/
504 naming the upstream, or a stream that ends with an error event and no finish; outside
that window any of those fails the soak, and a cut stream fails it always. Local requests
are judged as usual throughout. The summary counts upstream requests by route and outcome,
inside and outside the fault window, and when the window opened and closed.
A monitor asks /health every 0.5 s; a sampler records the daemon's RSS and
open descriptors (/proc/PID) and its gauges (/metrics) every --sample-s seconds.

Before the load, every greedy request is sent once alone (one at a time, empty cache); during
the load each completed greedy answer must equal its solo answer byte for byte. On hearth's
CPU backend that is exact by design (docs: a row's reductions run in a fixed order whatever
the batch, and restored KV equals prefilled KV; tests/engine/batch_test.cpp and
scheduler_test.cpp hold it). Engines without that property (llama-server batches with other
kernels) may differ legitimately: --greedy report counts mismatches without failing, and the
summary says so.

Invariants (exit 1 when one breaks):
  * every request the client completed is a 200 with a complete body: a whole answer parses
    and has a finish_reason, a stream ends with data: [DONE] after a finish_reason;
  * the other kinds' answers are valid (soak_kinds.py: tool calls parse and fit their tool,
    JSON fits its schema, each surface's stream ends as it should);
  * greedy answers equal their solo answers (unless --greedy report);
  * upstream answers as above; after the fault the circuit closes again and the upstream
    answers; the upstream hearthd exits 0 after SIGTERM, like the front;
  * GET /health answers 200 within 1 s, every time;
  * after the load (once the daemon has had --settle-s to finish cancelled work): no sequence
    running or queued, one connection open (the one asking), no KV block used (every block
    not held by the prompt cache is free: free == total), the disk writer's queue empty;
  * descriptors: every sample during the load <= the idle count before it + clients + 16 (the
    connections the clients, the monitor and the sampler may hold, plus chunk files being
    written or restored), + 4 for each upstream request the clients had in flight at once at
    most (the front's connection to the upstream and the io_context of that exchange: epoll,
    eventfd, timerfd); at rest (halfway and after the load), exactly the idle count before,
    once the front's kept connections to the upstream (4 descriptors each, counted from /proc)
    are set aside on both sides; and no more kept than upstream requests were ever in flight;
  * RSS flat: at rest after the load <= at rest at the checkpoint + max(4 MiB, 2%). Against
    hearthd, whose /metrics splits malloc's heap into bytes in use and bytes freed but kept,
    two figures are judged so: the heap in use (a leak is memory never freed), and RSS less the
    heap's free bytes (resident memory that is neither: mappings, stacks, pages of files). A
    restore's chunk buffers (tens of MiB, allocated on the reader threads) may be kept by
    malloc after they are freed or returned to the kernel, by chance of what else lies in the
    same arena: a CI run had 14 MiB more RSS at rest after the load than at the checkpoint,
    and the same jump in a rerun was all free heap. Against another server, RSS itself.
    Halfway through, the clients stop (each finishing what it was doing) and the daemon is
    left to go idle (the same checks as after the load); then the second half runs. Both RSS
    figures are taken at rest, so the chunk copies queued for the disk writer and a restore's
    buffers (tens of MiB that come and go with the load) are not in either. The traffic mix is
    the same from the first second, so warm-up (allocator arenas growing to the peak
    concurrency, sqlite's page cache, first use of each code path) happens in the first half;
    a leak grows with the requests served and shows again in the second. The KV pool, which
    hearthd allocates at start but the kernel backs only as blocks are first written (up to
    360 MiB for SmolLM2 at the default --ctx), is filled once before the load (warms of
    distinct prompts until every block holds a cached prefix), so the load never reaches a
    block not yet written. RSS under load, its range and its slope in each half are printed
    as information.
Standard library only.
"""
import argparse
import collections
import copy
import http.client
import json
import os
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from hearthd_process import Hearthd, UnixHTTPConnection, model_or_skip, models_dir  # noqa: E402
from soak_kinds import Invalid, KindCase, kind_cases  # noqa: E402
from soak_upstream import Upstream, UpstreamLoad  # noqa: E402

HEALTH_LIMIT_S = 1.0
RSS_TOL_FRACTION, RSS_TOL_MIB = 0.02, 4.0
FD_SLACK = 16

SHORT_PROMPTS = [
    "Name three colours of the rainbow.",
    "Write one sentence about a lighthouse.",
    "What is 17 plus 25?",
    "List four animals that live in the sea.",
]
LONG_QUESTIONS = [
    "Which item counts the most stones?",
    "Summarise the list in one sentence.",
    "How many items walk to the river?",
]
# Catalog names whose file tests/e2e/hearthd_process.py can find (or skip without).
MODEL_FILES = {"smollm2:135m": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3:270m": "gemma-3-270m-q4_k_m.gguf",
               "qwen2.5-coder:0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"}


def long_prefix():
    """About 700 tokens of numbered sentences: the shared prefix of the long prompts."""
    words = ["red", "green", "blue", "grey"], ["fox", "owl", "cat", "bear", "eel"], ["river", "hill", "market"]
    return "Here is an inventory.\n" + " ".join(
        "Item %d: the %s %s walks to the %s and counts %d stones." %
        (i, words[0][i % 4], words[1][i % 5], words[2][i % 3], i * 7) for i in range(48))


class Target:
    """Where the server is: a Unix socket (hearth) or a TCP address (--url)."""

    def __init__(self, unix_path=None, host=None, port=None):
        self.unix_path, self.host, self.port = unix_path, host, port

    def connection(self, timeout):
        if self.unix_path:
            return UnixHTTPConnection(self.unix_path, timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def raw_socket(self, timeout):
        if self.unix_path:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(self.unix_path)
        else:
            s = socket.create_connection((self.host, self.port), timeout=timeout)
        return s

    def server_pid(self):
        """The pid at the other end of the Unix socket (SO_PEERCRED), or None."""
        if not self.unix_path:
            return None
        s = self.raw_socket(5)
        try:
            pid, _, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            return pid
        finally:
            s.close()


def request(target, method, path, body=None, timeout=60):
    """(status, body bytes) of one request on a new connection."""
    c = target.connection(timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                out[key] = float(value)
            except ValueError:
                pass
    return out


def connections_to(pid, port):
    """How many TCP connections pid has to a loopback port (a front's connections to its
    upstream, kept between requests), from /proc: its sockets' inodes against net/tcp."""
    try:
        inodes = set()
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
        n = 0
        with open("/proc/%d/net/tcp" % pid) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[2].split(":")[1], 16) == port and fields[9] in inodes:
                    n += 1
        return n
    except OSError:
        return None


def fds_at_rest(s):
    """A sample's descriptors less the front's kept connections to its upstream, 4 each (the
    socket and its io_context's epoll, eventfd and timerfd: fetch/http_conn.h)."""
    return s.get("fds", 0) - 4 * (s.get("kept") or 0)


def proc_sample(pid):
    """(RSS in KiB, its anonymous part in KiB, open descriptors, threads) of pid, or None when it is gone."""
    if pid is None:
        return None
    try:
        rss = anon = threads = 0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        return rss, anon, len(os.listdir("/proc/%d/fd" % pid)), threads
    except OSError:
        return None


class Failure(Exception):
    """A completed request that broke an invariant; kind names it in the summary."""

    def __init__(self, kind, detail):
        super().__init__(detail)
        self.kind = kind


class Case:
    """One greedy request: its endpoint, body, and the answer it gave alone."""

    def __init__(self, endpoint, body, label):
        self.endpoint, self.body, self.label = endpoint, body, label
        self.solo = None


def greedy_cases(max_tokens):
    prefix = long_prefix()
    cases = []
    for mt in max_tokens:
        for i, p in enumerate(SHORT_PROMPTS):
            cases.append(Case("/v1/completions", {"prompt": p, "max_tokens": mt, "temperature": 0}, "short%d" % i))
            cases.append(Case("/v1/chat/completions", {"messages": [{"role": "user", "content": p}],
                                                       "max_tokens": mt, "temperature": 0}, "chat-short%d" % i))
        for i, q in enumerate(LONG_QUESTIONS):
            cases.append(Case("/v1/completions", {"prompt": prefix + "\n\nQuestion: " + q + "\nAnswer:",
                                                  "max_tokens": mt, "temperature": 0}, "long%d" % i))
            cases.append(Case("/v1/chat/completions", {
                "messages": [{"role": "system", "content": prefix}, {"role": "user", "content": q}],
                "max_tokens": mt, "temperature": 0}, "chat-long%d" % i))
    return cases


# Text an answer copies: the n-gram drafter drafts from the prompt's own tokens.
COPY_CODE = ("def area(width, height):\n    return width * height\n\n"
             "def perimeter(width, height):\n    return 2 * (width + height)\n\n")


def speculative_cases(max_tokens):
    """Greedy requests whose answers repeat text of their prompts, so drafts are made: each with
    drafts (hearth's default) and with "speculative": false; (on, off) pairs."""
    prompts = [("/v1/chat/completions", {"messages": [{"role": "user", "content": "Copy this code exactly:\n" + COPY_CODE}]}),
               ("/v1/chat/completions", {"messages": [{"role": "system", "content": long_prefix()},
                                                      {"role": "user", "content": "Repeat items 1 to 3 word for word."}]}),
               ("/v1/completions", {"prompt": "one two three four five, one two three four five, one two three"})]
    pairs = []
    for i, (endpoint, body) in enumerate(prompts):
        body = dict(body, max_tokens=max_tokens, temperature=0)
        pairs.append((Case(endpoint, body, "spec%d" % i),
                      Case(endpoint, dict(body, speculative=False), "spec%d-off" % i)))
    return pairs


def whole(target, endpoint, body, timeout, timings=None):
    """Text of a whole (non-streamed) answer; Failure when it is not a complete 200. timings (a
    dict): gets the answer's hearth timings."""
    status, data = request(target, "POST", endpoint, body, timeout)
    if status != 200:
        raise Failure("status_%d" % status, data[:300].decode("utf-8", "replace"))
    try:
        j = json.loads(data)
        choice = j["choices"][0]
        text = choice["message"]["content"] if endpoint.endswith("chat/completions") else choice["text"]
        finish = choice["finish_reason"]
        n = j["usage"]["completion_tokens"]
        if timings is not None:
            timings.update(j.get("timings") or {})
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise Failure("bad_body", "%r in %r" % (e, data[:300]))
    if finish not in ("stop", "length"):
        raise Failure("bad_finish_reason", repr(finish))
    if n > body["max_tokens"]:
        raise Failure("too_many_tokens", "%d > max_tokens %d" % (n, body["max_tokens"]))
    return text or ""


def read_stream(r, endpoint, stop_after=None, timings=None):
    """Reads an SSE answer: (text, complete). complete: [DONE] came after a finish_reason.
    stop_after: return (text, None) after that many data events (the caller drops it).
    timings (a dict): gets the hearth timings of the finishing event."""
    text, finish, n_events = [], None, 0
    chat = endpoint.endswith("chat/completions")
    while True:
        line = r.readline()
        if not line:
            return "".join(text), False
        line = line.rstrip(b"\r\n")
        if not line.startswith(b"data: "):
            continue
        payload = line[6:]
        if payload == b"[DONE]":
            return "".join(text), finish is not None
        try:
            ev = json.loads(payload)
        except ValueError:
            raise Failure("bad_event", payload[:300].decode("utf-8", "replace"))
        if ev.get("error"):
            raise Failure("stream_error_event", payload[:300].decode("utf-8", "replace"))
        if timings is not None and isinstance(ev.get("timings"), dict):
            timings.update(ev["timings"])
        for ch in ev.get("choices") or []:
            piece = (ch.get("delta") or {}).get("content") if chat else ch.get("text")
            text.append(piece or "")
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
        n_events += 1
        if stop_after is not None and n_events >= stop_after:
            return "".join(text), None


def open_stream(c, endpoint, body):
    """Sends a streamed request on connection c; the response, which must be a 200."""
    c.request("POST", endpoint, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise Failure("status_%d" % r.status, r.read()[:300].decode("utf-8", "replace"))
    return r


def streamed(target, endpoint, body, timeout, timings=None):
    c = target.connection(timeout)
    try:
        text, complete = read_stream(open_stream(c, endpoint, body), endpoint, timings=timings)
        if not complete:
            raise Failure("stream_truncated", "no finish_reason and [DONE] before the end: %r" % text[-80:])
        return text
    finally:
        c.close()


class Soak:
    def __init__(self, args, target, pid, hearth):
        self.args, self.target, self.pid, self.hearth = args, target, pid, hearth
        self.cases = greedy_cases(args.greedy_max_tokens)
        # Drafted and plain (hearth only: "speculative" is its own field).
        self.spec_pairs = speculative_cases(args.spec_tokens) if hearth else []
        self.drafts = collections.Counter()  # "draft_tokens", "accepted_tokens", "requests"
        # Load and unload the tools model during the load (hearth, with a tools model).
        self.churn_model = args.tools_model if hearth and self.wanted("models") else None
        self.max_loads = 0
        self.log_text, self.churn_file = None, None  # main() sets them when it starts hearthd
        self.up = None  # the upstream's UpstreamLoad (soak_upstream.py): main() sets it with --hearthd
        # The kinds of soak_kinds.py (tools, schemas, Ollama, Anthropic), hearth only, at the
        # largest greedy length: each one's solo answer costs a request before the load.
        self.kind_cases = kind_cases(args.model, args.tools_model, args.greedy_max_tokens[-1:],
                                     args.schema_tokens) if hearth else []
        self.lock = threading.Lock()
        self.outcomes = collections.Counter()  # (action, outcome) -> n
        self.errors = collections.Counter()  # kind -> n
        self.examples = {}  # kind -> first detail
        self.health = []  # (t, seconds or None)
        self.lag = []  # the monitor's oversleep, seconds
        self.samples = []  # dicts
        self.violations = []
        self.stop = threading.Event()
        # The checkpoint halfway: quiet set, clients wait for resume.
        self.quiet, self.resume = threading.Event(), threading.Event()
        self.n_waiting = 0
        self.t0 = None
        self.prefix = long_prefix()

    # --- bookkeeping ---
    def count(self, action, outcome):
        with self.lock:
            self.outcomes[(action, outcome)] += 1

    def error(self, action, kind, detail):
        with self.lock:
            self.outcomes[(action, "error")] += 1
            self.errors[kind] += 1
            self.examples.setdefault(kind, "%s: %s" % (action, detail))

    # --- the solo answers ---
    def precompute(self):
        t = time.monotonic()
        for c in self.cases:
            c.solo = whole(self.target, c.endpoint, c.body, self.args.timeout)
        for on, off in self.spec_pairs:
            on.solo = whole(self.target, on.endpoint, on.body, self.args.timeout)
            off.solo = whole(self.target, off.endpoint, off.body, self.args.timeout)
            if on.solo != off.solo:
                self.violate("%s alone: with drafts %r, without %r" % (on.label, on.solo, off.solo))
        for c in self.kind_cases:
            try:
                c.solo = c.run(self.target.connection, False, self.args.timeout)
            except Invalid as e:
                raise Failure(e.kind, "%s alone: %s" % (c.label, e))
        t_up = time.monotonic()
        if self.up:
            self.up.precompute()
        print("solo answers: %d greedy requests, %d of the other kinds and %d for the upstream's model (%.1f s of "
              "it), one at a time, in %.1f s" % (len(self.cases), len(self.kind_cases),
                                                len(self.up.cases) if self.up else 0, time.monotonic() - t_up,
                                                time.monotonic() - t))
        if self.hearth and not self.args.no_rss:
            self.fill_pool()
            if self.args.tools_model and not self.churn_model:  # a churned model is unloaded at rest
                self.fill_pool_of(self.args.tools_model)
            # The load starts with an empty prompt cache, like the solo answers.
            request(self.target, "DELETE", "/api/cache", timeout=self.args.timeout)

    def metrics(self):
        status, data = request(self.target, "GET", "/metrics", None, self.args.timeout)
        if status != 200:
            raise Failure("status_%d" % status, "GET /metrics")
        return parse_metrics(data.decode())

    def fill_pool(self):
        """Warms distinct prompts until every KV block of the pool holds a cached prefix, so every
        block has been written once before the load. hearthd allocates the pool at start but the
        kernel backs its pages only when first written, so without this RSS would grow through
        the soak by up to the pool's size (SmolLM2 at the default ctx: 1,024 blocks, 360 MiB) as
        the load reaches blocks never used before: a bounded warm-up, not a leak, that would hide
        one."""
        t = time.monotonic()
        status, data = request(self.target, "GET", "/v1/models", None, self.args.timeout)
        n_ctx = json.loads(data)["data"][0]["meta"]["n_ctx"]
        total = self.metrics()["hearth_kv_blocks_total"]
        request(self.target, "DELETE", "/api/cache", timeout=self.args.timeout)
        tokens = 0
        for i in range(4 * int(total * 16 / max(256, n_ctx // 2)) + 8):
            words = ["Filler %d, line %d: %s." % (i, j, " ".join("w%d" % ((i * 7919 + j * 31 + k) % 997) for k in range(8)))
                     for j in range(n_ctx // 16)]
            n = len(json.loads(request(self.target, "POST", "/api/tokenize", {"content": " ".join(words)},
                                       self.args.timeout)[1])["tokens"])
            text = " ".join(words[:len(words) * (n_ctx * 3 // 4) // n])  # about 3/4 of the context
            status, data = request(self.target, "POST", "/api/cache/warm", {"prompt": text}, self.args.timeout)
            if status != 200:
                raise Failure("status_%d" % status, "filling the KV pool: " + data[:300].decode("utf-8", "replace"))
            tokens += json.loads(data)["tokens"]
            if self.metrics()["hearth_kv_blocks_cached"] >= total:
                break
        cached = self.metrics()["hearth_kv_blocks_cached"]
        print("KV pool: %d blocks, %d of them written by %d warmed tokens in %.1f s" % (
            total, cached, tokens, time.monotonic() - t))
        if cached < total:
            self.violate("could not fill the KV pool before the load: %d of %d blocks cached" % (cached, total))
        # The writer persists what was warmed; the load starts once it is done.
        deadline = time.monotonic() + self.args.timeout
        while time.monotonic() < deadline:
            status, data = request(self.target, "GET", "/api/cache", None, self.args.timeout)
            if json.loads(data)["disk"]["queue_depth"] == 0:
                break
            time.sleep(0.5)

    def fill_pool_of(self, model):
        """fill_pool() for a second model, whose pool /metrics does not count: distinct warms of
        about 2/3 of the context until they add up to the pool's tokens (--parallel x n_ctx) and
        one context more (free blocks are taken before cached ones are evicted)."""
        t = time.monotonic()
        status, data = request(self.target, "GET", "/v1/models", None, self.args.timeout)
        n_ctx = [m for m in json.loads(data)["data"] if m["id"] == model][0]["meta"]["n_ctx"]
        tokens, i = 0, 0
        while tokens < (self.args.parallel + 1) * n_ctx:
            words = " ".join("Note %d.%d: w%d w%d." % (i, j, (i * 7919 + j) % 997, j % 13) for j in range(n_ctx // 20))  # ~2/3 of n_ctx tokens
            status, data = request(self.target, "POST", "/api/cache/warm", {"model": model, "prompt": words},
                                   self.args.timeout)
            if status != 200:
                raise Failure("status_%d" % status, "filling %s's KV pool: %s" % (model, data[:300]))
            tokens, i = tokens + json.loads(data)["tokens"], i + 1
        print("KV pool of %s: %d warmed tokens in %.1f s" % (model, tokens, time.monotonic() - t))
        request(self.target, "DELETE", "/api/cache", timeout=self.args.timeout)

    # --- the actions ---
    def act_greedy(self, rng):
        c = rng.choice(self.cases)
        stream = rng.random() < 0.5
        name = "greedy_" + ("stream" if stream else "whole")
        text = (streamed if stream else whole)(self.target, c.endpoint, c.body, self.args.timeout)
        if text != c.solo:
            if self.args.greedy == "strict":
                raise Failure("greedy_mismatch", "%s %s max_tokens %d: %r, alone %r" % (
                    name, c.label, c.body["max_tokens"], text, c.solo))
            self.error(name, "greedy_mismatch(reported)", "%s max_tokens %d: %r, alone %r" % (
                c.label, c.body["max_tokens"], text, c.solo))
            return None
        return name

    def act_speculative(self, rng):
        """A greedy request with drafts or without, equal to its answer alone; its drafts counted."""
        c = rng.choice(rng.choice(self.spec_pairs))
        stream = rng.random() < 0.5
        timings = {}
        text = (streamed if stream else whole)(self.target, c.endpoint, c.body, self.args.timeout, timings)
        off = c.body.get("speculative") is False
        if text != c.solo:
            raise Failure("greedy_mismatch", "%s %s: %r, alone %r" % ("stream" if stream else "whole", c.label,
                                                                      text, c.solo))
        if off and timings.get("draft_tokens", 0) != 0:
            raise Failure("drafts_when_off", "%s: %r" % (c.label, timings))
        with self.lock:
            self.drafts["requests_" + ("off" if off else "on")] += 1
            for k in ("draft_tokens", "accepted_tokens"):
                self.drafts[k] += timings.get(k, 0)
        return "%s_%s" % ("plain" if off else "drafts", "stream" if stream else "whole")

    def act_models(self, rng):
        """Unloads the tools model (hearth's /api/unload, or Ollama's keep_alive 0) or loads it, while
        others ask it: their answers must still come whole (the model goes when they end)."""
        m, r = self.churn_model, rng.random()
        if r < 0.35:
            status, data = request(self.target, "POST", "/api/unload", {"model": m}, self.args.timeout)
            outcome, ok = "unload", status == 200 and "was_loaded" in json.loads(data)
        elif r < 0.6:
            status, data = request(self.target, "POST", "/api/generate", {"model": m, "keep_alive": 0},
                                   self.args.timeout)
            outcome, ok = "unload_ollama", status == 200 and json.loads(data).get("done_reason") == "unload"
        else:
            status, data = request(self.target, "POST", "/api/load", {"model": m}, self.args.timeout)
            outcome, ok = "load", status == 200 and json.loads(data).get("loaded") is True
        if not ok:
            raise Failure("%s_status_%d" % (outcome, status), data[:300].decode("utf-8", "replace"))
        status, data = request(self.target, "GET", "/api/ps", None, self.args.timeout)
        if status != 200:
            raise Failure("ps_status_%d" % status, data[:300].decode("utf-8", "replace"))
        loads = [x.get("loads", 0) for x in json.loads(data)["models"] if x.get("id") == m]
        with self.lock:
            self.max_loads = max([self.max_loads] + loads)
        return outcome

    def rest_models(self):
        """Unloads the churned model before each rest, so every rest holds the same models, and
        waits (up to --settle-s) until /api/ps no longer lists it. hearthd lists an unloading model
        ("state": "unloading") until its queued chunks are written and its weights and KV pool
        freed, so a rest sampled after that holds none of its memory; when the soak started
        hearthd, its log must then already have an "unloaded" line for each load (a violation
        otherwise)."""
        if not self.churn_model:
            return
        request(self.target, "POST", "/api/unload", {"model": self.churn_model}, self.args.timeout)
        deadline = time.monotonic() + self.args.settle_s
        while time.monotonic() < deadline:
            status, data = request(self.target, "GET", "/api/ps", None, self.args.timeout)
            listed = status != 200 or any(x.get("id") == self.churn_model for x in json.loads(data)["models"])
            if not listed:
                if not self.unloads_logged():
                    self.violate("%s left /api/ps before hearthd logged the end of its unload" % self.churn_model)
                return
            time.sleep(0.2)
        self.violate("%s still loaded %.0f s after /api/unload" % (self.churn_model, self.args.settle_s))

    def unloads_logged(self):
        """Whether hearthd's log has as many unloads of the churned model as loads (True when the
        soak has no log: a daemon it did not start)."""
        if self.log_text is None:
            return True
        log = self.log_text()
        loads = sum(1 for line in log.splitlines() if "model loaded in " in line and self.churn_file in line)
        return loads == log.count("unloaded %s (" % self.churn_model)

    def act_kind(self, rng):
        """A greedy request of another kind: valid (soak_kinds.py), and equal to its answer alone."""
        c = rng.choice(self.kind_cases)
        stream = rng.random() < 0.5
        answer = c.run(self.target.connection, stream, self.args.timeout)
        if answer != c.solo:
            raise Failure("greedy_mismatch", "%s %s max_tokens %d: %s, alone %s" % (
                "stream" if stream else "whole", c.label, c.max_tokens(), answer[:300], c.solo[:300]))
        return "%s_%s" % (c.label.rstrip("0123456789"), "stream" if stream else "whole")

    def act_kind_sampled(self, rng):
        """A sampled request of another kind (temperature 1, a random seed): valid, whatever it says."""
        c = rng.choice(self.kind_cases)
        body = copy.deepcopy(c.body)
        seed = rng.randrange(1 << 30)
        if c.surface == "ollama":
            body["options"].update(temperature=1.0, seed=seed)
        elif c.surface == "openai":
            body.update(temperature=1.0, seed=seed)
        else:
            body.update(temperature=1.0)
        stream = rng.random() < 0.5
        KindCase(c.label, c.surface, body, c.schema, c.tools).run(self.target.connection, stream, self.args.timeout)
        return "%s_sampled_%s" % (c.label.rstrip("0123456789"), "stream" if stream else "whole")

    def sampled_body(self, rng):
        p = rng.choice(SHORT_PROMPTS + LONG_QUESTIONS)
        body = {"max_tokens": rng.randint(1, 64), "temperature": 0.9, "top_p": 0.95}
        endpoint = rng.choice(["/v1/completions", "/v1/chat/completions"])
        if endpoint == "/v1/completions":
            body["prompt"] = p
        else:
            body["messages"] = [{"role": "user", "content": p}]
        return endpoint, body

    def act_sampled(self, rng):
        endpoint, body = self.sampled_body(rng)
        stream = rng.random() < 0.5
        (streamed if stream else whole)(self.target, endpoint, body, self.args.timeout)
        return "sampled_" + ("stream" if stream else "whole")

    def act_disconnect(self, rng):
        """A stream dropped after a few events."""
        endpoint, body = self.sampled_body(rng)
        body["max_tokens"] = 64
        c = self.target.connection(self.args.timeout)
        try:
            _, complete = read_stream(open_stream(c, endpoint, body), endpoint, stop_after=rng.randint(1, 8))
            if complete is False:
                raise Failure("stream_truncated", "the stream ended before [DONE]")
            return "disconnect_midstream" if complete is None else "disconnect_midstream(finished first)"
        finally:
            c.close()

    def act_cancel(self, rng):
        """A whole request abandoned before its answer (often while it still waits in the queue)."""
        endpoint, body = self.sampled_body(rng)
        body["max_tokens"] = 64
        wait = rng.uniform(0.05, 3.0)
        c = self.target.connection(self.args.timeout)
        try:
            c.request("POST", endpoint, body=json.dumps(body), headers={"Content-Type": "application/json"})
            c.sock.settimeout(wait)  # sent: now give up on the answer after `wait`
            try:
                r = c.getresponse()
                data = r.read()
            except socket.timeout:
                return "cancel"
            if r.status != 200:
                raise Failure("status_%d" % r.status, data[:300].decode("utf-8", "replace"))
            json.loads(data)["choices"][0]
            return "cancel(answered first)"
        finally:
            c.close()

    def act_half_open(self, rng):
        """Part of a request, then gone."""
        kind = rng.randrange(3)
        s = self.target.raw_socket(10)
        try:
            if kind == 0:  # part of a header
                head = b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/js"
                s.sendall(head[:rng.randint(1, len(head))])
            elif kind == 1:  # the headers and part of the body
                body = json.dumps({"prompt": "half a body", "max_tokens": 8}).encode()
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body[:rng.randint(0, len(body) - 1)])
            # kind 2: connects and says nothing
            time.sleep(rng.uniform(0, 2.0))
        finally:
            s.close()
        return "half_open"

    def act_warm(self, rng):
        body = ({"prompt": self.prefix} if rng.random() < 0.5 else
                {"messages": [{"role": "system", "content": self.prefix}]})
        status, data = request(self.target, "POST", "/api/cache/warm", body, self.args.timeout)
        if status != 200:
            raise Failure("status_%d" % status, data[:300].decode("utf-8", "replace"))
        if json.loads(data).get("object") != "cache.warm":
            raise Failure("bad_body", data[:300].decode("utf-8", "replace"))
        return "cache_warm"

    def act_clear(self, rng):
        status, data = request(self.target, "DELETE", "/api/cache", None, self.args.timeout)
        if status != 200:
            raise Failure("status_%d" % status, data[:300].decode("utf-8", "replace"))
        return "cache_clear"

    def act_info(self, rng):
        path = rng.choice(["/v1/models", "/api/cache", "/metrics"] if self.hearth else ["/v1/models"])
        status, data = request(self.target, "GET", path, None, self.args.timeout)
        if status != 200:
            raise Failure("status_%d" % status, data[:300].decode("utf-8", "replace"))
        return "info"

    def actions(self):
        a = [(35, self.act_greedy), (25, self.act_sampled), (10, self.act_disconnect), (8, self.act_cancel),
             (8, self.act_half_open), (3, self.act_info)]
        if self.hearth:
            a += [(3, self.act_warm), (1, self.act_clear)]
        if self.kind_cases:
            a += [(14, self.act_kind), (6, self.act_kind_sampled)]
        if self.spec_pairs:
            a += [(10, self.act_speculative)]
        if self.churn_model:
            a += [(2, self.act_models)]
        if self.up:
            a += [(8, self.act_upstream), (3, self.act_upstream_sampled), (3, self.act_upstream_surfaces)]
        return [(w, f) for w, f in a if self.wanted(f.__name__[4:])]

    def act_upstream(self, rng):
        """A greedy chat for the upstream's model on OpenAI's route (soak_upstream.py)."""
        return self.up.act_greedy(rng)

    def act_upstream_sampled(self, rng):
        return self.up.act_sampled(rng)

    def act_upstream_surfaces(self, rng):
        """A greedy chat for the upstream's model on Ollama's or Anthropic's route."""
        return self.up.act_surfaces(rng)

    def wanted(self, action):
        """Whether --only and --skip leave this action in."""
        return (not self.args.only or action in self.args.only) and action not in (self.args.skip or [])

    # --- the threads ---
    def client(self, i):
        rng = random.Random(self.args.seed * 1000 + i)
        acts = self.actions()
        funcs = [f for _, f in acts]
        weights = [w for w, _ in acts]
        while not self.stop.is_set():
            if self.quiet.is_set():  # the checkpoint: wait, doing nothing, until the load resumes
                with self.lock:
                    self.n_waiting += 1
                self.resume.wait()
                with self.lock:
                    self.n_waiting -= 1
                continue
            f = rng.choices(funcs, weights)[0]
            name = f.__name__[4:]
            try:
                outcome = f(rng)
                if outcome:
                    self.count(name, outcome)
            except (Failure, Invalid) as e:
                self.error(name, e.kind, str(e))
            except socket.timeout as e:
                self.error(name, "timeout", "no answer within %d s (%r)" % (self.args.timeout, e))
            except (OSError, http.client.HTTPException) as e:
                self.error(name, type(e).__name__, repr(e))
            self.stop.wait(rng.uniform(0, 0.2))

    def monitor(self):
        while not self.stop.is_set():
            if not self.quiet.is_set():
                t = time.monotonic()
                try:
                    status, _ = request(self.target, "GET", "/health", None, 60)
                    dt = time.monotonic() - t
                    self.health.append((t - self.t0, dt if status == 200 else None))
                except OSError:
                    self.health.append((t - self.t0, None))
            # How late this (equally niced) process wakes from a 0.5 s sleep: CPU starvation by
            # other processes, which delays /health's answer as much without being the daemon's.
            t = time.monotonic()
            self.stop.wait(0.5)
            self.lag.append(time.monotonic() - t - 0.5)

    def sample(self, phase):
        s = {"t": time.monotonic() - (self.t0 or time.monotonic()), "phase": phase}
        p = proc_sample(self.pid)
        if p:
            s["rss_kib"], s["rss_anon_kib"], s["fds"], s["threads"] = p
            if self.up:
                s["kept"] = connections_to(self.pid, self.up.upstream.port)
        if self.hearth:
            try:
                status, data = request(self.target, "GET", "/metrics", None, 60)
                if status == 200:
                    m = parse_metrics(data.decode())
                    for k in ("hearth_running_sequences", "hearth_queue_depth", "hearth_open_connections",
                              "hearth_kv_blocks_used", "hearth_kv_blocks_free", "hearth_kv_blocks_cached",
                              "hearth_kv_blocks_total", "hearth_cancelled_total", "hearth_generated_tokens_total",
                              "hearth_heap_in_use_bytes", "hearth_heap_free_bytes"):
                        if k in m:
                            s[k[len("hearth_"):]] = m[k]
                    s["responses_200"] = m.get('hearth_requests_total{status="200"}', 0)
                status, data = request(self.target, "GET", "/api/cache", None, 60)
                if status == 200:
                    s["disk_queue"] = json.loads(data)["disk"]["queue_depth"]
            except (OSError, ValueError, KeyError):
                pass
        return s

    def sampler(self):
        while not self.stop.wait(self.args.sample_s):
            if not self.quiet.is_set():
                self.samples.append(self.sample("load"))

    def checkpoint(self):
        """Stops the clients (each finishes what it is doing) and waits for the daemon to go idle."""
        self.resume.clear()
        self.quiet.set()
        t_quiet = time.monotonic()
        deadline = time.monotonic() + self.args.timeout + 30
        while self.n_waiting < self.args.clients and time.monotonic() < deadline:
            time.sleep(0.1)
        self.rest_models()
        s = self.settle("idle middle")
        self.pause_s = time.monotonic() - t_quiet
        self.quiet.clear()
        self.resume.set()
        return s

    def run(self):
        self.precompute()
        self.t0 = time.monotonic()
        self.rest_models()
        self.idle_before = self.settle("idle before")
        self.samples.append(dict(self.idle_before, phase="load"))
        threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(self.args.clients)]
        threads += [threading.Thread(target=self.monitor, daemon=True), threading.Thread(target=self.sampler, daemon=True)]
        for t in threads:
            t.start()
        t_load = time.monotonic()
        if self.up and self.args.upstream_fault:
            self.up.start_fault(t_load, self.args.duration * 0.15, self.args.upstream_down_s, self.stop,
                                lambda: json.loads(request(self.target, "GET", "/health", None, 60)[1]))
        self.stop.wait(self.args.duration / 2)
        if self.up:  # the fault ends in the first half, so both rests hold the same upstream
            self.up.wait_fault(self.args.timeout)
        t_mid = time.monotonic()
        self.idle_middle = self.checkpoint()
        self.t_middle = self.idle_middle["t"]
        t_resumed = time.monotonic()
        self.stop.wait(self.args.duration / 2)
        self.stop.set()
        self.resume.set()
        self.load_s = (t_mid - t_load) + (time.monotonic() - t_resumed)
        for t in threads:
            t.join(self.args.timeout + 30)
        self.stuck_clients = sum(t.is_alive() for t in threads)
        self.rest_models()
        self.idle_after = self.settle("idle after")

    def settle(self, phase):
        """Waits up to --settle-s for the daemon to go idle: nothing running or queued, one
        connection (the one asking), no KV block used, the disk writer's queue empty, and (after
        the load) the descriptors of the idle daemon before it. Returns the last sample."""
        deadline = time.monotonic() + self.args.settle_s
        prev = None
        while True:
            s = self.sample(phase)
            if self.hearth:
                idle = (s.get("running_sequences") == 0 and s.get("queue_depth") == 0 and
                        s.get("open_connections") == 1 and s.get("kv_blocks_used") == 0 and s.get("disk_queue") == 0)
            else:
                idle = True
            if phase == "idle before":  # the daemon has closed the solo requests' connections
                idle = idle and prev is not None and s.get("fds") == prev.get("fds")
            else:
                idle = idle and fds_at_rest(s) == fds_at_rest(self.idle_before)
            if idle or time.monotonic() > deadline:
                return s
            prev = s
            time.sleep(0.5)

    # --- the verdict ---
    def violate(self, text):
        self.violations.append(text)

    def verdict(self):
        a = self.args
        served = sum(n for (act, out), n in self.outcomes.items() if out != "error")
        if served == 0:
            self.violate("no request was served")
        strict_errors = {k: n for k, n in self.errors.items() if k != "greedy_mismatch(reported)"}
        if strict_errors:
            self.violate("requests failed: %s" % ", ".join("%s %d" % kv for kv in sorted(strict_errors.items())))
        if self.up:
            for v in self.up.violations():
                self.violate(v)
        if self.stuck_clients:
            self.violate("%d client threads still waiting after the hang guard" % self.stuck_clients)
        lat = [d for _, d in self.health if d is not None]
        bad = [(t, d) for t, d in self.health if d is None or d > HEALTH_LIMIT_S]
        if bad:
            self.violate("/health over %.1f s or failed %d times of %d (first at %.0f s: %s)" % (
                HEALTH_LIMIT_S, len(bad), len(self.health), bad[0][0], bad[0][1]))
        if not self.health:
            self.violate("/health was never asked")
        fd0 = self.idle_before.get("fds")
        for name, e in (("at the checkpoint", self.idle_middle), ("after the load", self.idle_after)):
            if self.hearth:
                for k, want in (("running_sequences", 0), ("queue_depth", 0), ("open_connections", 1),
                                ("kv_blocks_used", 0), ("disk_queue", 0)):
                    if e.get(k) != want:
                        self.violate("%s %s = %s, not %s" % (name, k, e.get(k), want))
                if "kv_blocks_total" not in e:
                    self.violate("no hearth_kv_blocks_total in /metrics (an older hearthd?)")
                elif e.get("kv_blocks_free") != e.get("kv_blocks_total"):
                    self.violate("%s %s of %s KV blocks free" % (name, e.get("kv_blocks_free"), e.get("kv_blocks_total")))
            if fd0 is not None and fds_at_rest(e) != fds_at_rest(self.idle_before):
                self.violate("descriptors: %s %s with %s kept upstream connections, %d before the load with %s" % (
                    e.get("fds"), name, e.get("kept"), fd0, self.idle_before.get("kept")))
            if self.up and (e.get("kept") or 0) > max(1, self.up.max_inflight):
                self.violate("%s kept upstream connections %s, more than the %d requests ever in flight at once" % (
                    name, e.get("kept"), self.up.max_inflight))
        load = [s for s in self.samples if "rss_kib" in s]
        if fd0 is not None:
            over = [s for s in load if s["fds"] > fd0 + self.fds_in_flight() + FD_SLACK]
            if over:
                self.violate("descriptors: %d during the load at %.0f s, over %d (idle) + %d (requests in flight) "
                             "+ %d" % (over[0]["fds"], over[0]["t"], fd0, self.fds_in_flight(), FD_SLACK))
        self.rss_rules = []
        if a.no_rss:
            pass
        elif "rss_kib" in self.idle_middle and "rss_kib" in self.idle_after:
            for name, (m, e) in self.memory_figures():
                limit = m + max(RSS_TOL_MIB * 1024, RSS_TOL_FRACTION * m)
                self.rss_rules.append((name, m, e, limit))
                if e > limit:
                    self.violate("%s not flat: %.1f MiB at rest after the load > %.1f MiB at rest at the checkpoint "
                                 "+ tolerance (limit %.1f MiB)" % (name, e / 1024, m / 1024, limit / 1024))
        elif self.pid is not None:
            self.violate("no RSS at the checkpoint or after the load")
        self.health_max = max(lat) if lat else None

    def fds_in_flight(self):
        """Descriptors the clients' requests in flight may hold in the daemon: one connection per
        client, and 4 per upstream request in flight at once (the most the clients had): the
        daemon's connection to the upstream and the io_context it runs on (an epoll, an eventfd
        and a timerfd; measured: 15 descriptors in a front with one upstream stream, 10 idle).
        A connection kept idle between requests was one of those in flight: fetch opens a new
        one only when none is idle, so the kept ones never exceed the most in flight at once."""
        return self.args.clients + (4 * self.up.max_inflight if self.up else 0)

    def memory_figures(self):
        """The figures judged flat, as (name, (KiB at the checkpoint, KiB after the load)): the heap
        in use and RSS less the heap's free bytes when both rests have hearthd's heap gauges,
        else RSS."""
        m, e = self.idle_middle, self.idle_after
        if all(k in s for s in (m, e) for k in ("heap_in_use_bytes", "heap_free_bytes")):
            return [("heap in use", (m["heap_in_use_bytes"] / 1024, e["heap_in_use_bytes"] / 1024)),
                    ("RSS less free heap", (m["rss_kib"] - m["heap_free_bytes"] / 1024,
                                            e["rss_kib"] - e["heap_free_bytes"] / 1024))]
        return [("RSS", (m["rss_kib"], e["rss_kib"]))]

    def slope_mib_per_min(self, t_from):
        """Least-squares slope of RSS over the load samples after t_from, MiB per minute."""
        pts = [(s["t"], s["rss_kib"] / 1024) for s in self.samples if "rss_kib" in s and s["t"] > t_from]
        if len(pts) < 3:
            return None
        mt = sum(t for t, _ in pts) / len(pts)
        mv = sum(v for _, v in pts) / len(pts)
        den = sum((t - mt) ** 2 for t, _ in pts)
        return 60 * sum((t - mt) * (v - mv) for t, v in pts) / den if den else None

    def report(self):
        a = self.args
        print("\n== soak: %d clients, %.0f s of load (and a %.0f s checkpoint halfway), %s ==" % (
            a.clients, self.load_s, self.pause_s, a.target_desc))
        print("requests by kind and outcome:")
        by_action = collections.defaultdict(dict)
        for (act, out), n in sorted(self.outcomes.items()):
            by_action[act][out] = n
        for act, outs in sorted(by_action.items()):
            print("  %-12s %s" % (act, ", ".join("%s %d" % kv for kv in sorted(outs.items()))))
        served = sum(n for (act, out), n in self.outcomes.items() if out != "error")
        print("served (not errors): %d, %.1f/s" % (served, served / self.load_s))
        if self.spec_pairs:
            d = self.drafts
            print("speculative: %d requests with drafts (%d draft tokens, %d accepted, %.0f%%), %d without" % (
                d["requests_on"], d["draft_tokens"], d["accepted_tokens"],
                100 * d["accepted_tokens"] / max(1, d["draft_tokens"]), d["requests_off"]))
        if self.churn_model:
            print("%s: loaded %d times (its /api/ps loads, most seen)" % (self.churn_model, self.max_loads))
        print("errors by kind: %s" % (", ".join("%s %d" % kv for kv in sorted(self.errors.items())) or "none"))
        for k, ex in sorted(self.examples.items()):
            print("  first %s: %s" % (k, ex[:400]))
        lat = sorted(d for _, d in self.health if d is not None)
        if lat:
            print("/health: %d asks, max %.3f s, p99 %.3f s, median %.3f s (limit %.1f s)" % (
                len(self.health), lat[-1], lat[int(0.99 * (len(lat) - 1))], lat[len(lat) // 2], HEALTH_LIMIT_S))
        if self.lag:
            print("the monitor's own wake-up lag from a 0.5 s sleep (CPU starvation on this machine): max %.3f s, "
                  "median %.3f s" % (max(self.lag), sorted(self.lag)[len(self.lag) // 2]))
        load = [s for s in self.samples if "rss_kib" in s]
        if load:
            first = [s for s in load if s["t"] < self.t_middle]
            second = [s for s in load if s["t"] > self.t_middle]
            rows = [("idle before", self.idle_before), ("load start", load[0]),
                    ("before checkpt", first[-1] if first else {}), ("checkpoint", self.idle_middle),
                    ("load end", load[-1]), ("idle after", self.idle_after)]
            print("daemon: %-14s %7s %8s %9s %9s %9s %5s %s" % ("when", "t s", "RSS MiB", "anon MiB", "heap use",
                                                               "heap free", "fds", "gauges"))
            for name, s in rows:
                g = ", ".join("%s %g" % (k, s[k]) for k in ("running_sequences", "queue_depth", "open_connections",
                                                           "kv_blocks_used", "kv_blocks_cached", "kv_blocks_free",
                                                           "kv_blocks_total", "disk_queue") if k in s)
                print("        %-14s %7.1f %8.1f %9.1f %9.1f %9.1f %5s %s" % (
                    name, s.get("t", 0), s.get("rss_kib", 0) / 1024, s.get("rss_anon_kib", 0) / 1024,
                    s.get("heap_in_use_bytes", 0) / 2**20, s.get("heap_free_bytes", 0) / 2**20, s.get("fds"), g))
            print("RSS MiB and fds over time (t s: RSS/fds):")
            step = max(1, len(load) // 30)
            print("  " + "  ".join("%.0f:%.1f/%d" % (s["t"], s["rss_kib"] / 1024, s["fds"]) for s in load[::step]))
            for name, part in (("first half", first), ("second half", second)):
                if part:
                    slope = self.slope_mib_per_min(part[0]["t"] - 0.001) if part is second else None
                    print("  %s under load: RSS min %.1f max %.1f MiB, fds max %d%s" % (
                        name, min(s["rss_kib"] for s in part) / 1024, max(s["rss_kib"] for s in part) / 1024,
                        max(s["fds"] for s in part), "" if slope is None else ", slope %.2f MiB/min" % slope))
            for name, m, e, lim in self.rss_rules:
                print("%s flatness (at rest after the load <= at rest at the checkpoint + max(%.0f MiB, %.0f%%)): "
                      "%.1f <= %.1f MiB: %s" % (name, RSS_TOL_MIB, 100 * RSS_TOL_FRACTION, e / 1024, lim / 1024,
                                                "flat" if e <= lim else "NOT FLAT"))
            if a.no_rss:
                print("RSS flatness: not judged (--no-rss)")
            fd0 = self.idle_before.get("fds")
            print("fds: idle before %s, at the checkpoint %s, max during load %d (bound %d), idle after %s" % (
                fd0, self.idle_middle.get("fds"), max(s["fds"] for s in load),
                fd0 + self.fds_in_flight() + FD_SLACK, self.idle_after.get("fds")))
            if self.up:
                print("kept upstream connections (4 fds each): idle before %s, at the checkpoint %s, idle after %s; "
                      "at most %d upstream requests in flight at once" % (
                          self.idle_before.get("kept"), self.idle_middle.get("kept"), self.idle_after.get("kept"),
                          self.up.max_inflight))
        if self.up:
            self.up.report()
        if a.greedy == "report":
            print("greedy check: REPORT ONLY (--greedy report): mismatches are counted, not failed")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"outcomes": {"%s/%s" % k: n for k, n in self.outcomes.items()}, "errors": self.errors,
                           "health": self.health, "samples": self.samples, "idle_before": self.idle_before,
                           "idle_middle": self.idle_middle, "idle_after": self.idle_after, "violations": self.violations}, f, indent=1)
        if self.violations:
            print("\nFAILED:")
            for v in self.violations:
                print("  " + v)
        else:
            print("\nall invariants held")


def start_upstream(args, extra):
    """The upstream hearthd (soak_upstream.Upstream) for --hearthd, or None: --no-upstream, or a
    --model that is not a catalog name (the fallback is named by it)."""
    if args.no_upstream or not args.wanted_upstream:
        return None
    if args.model not in MODEL_FILES:
        print("upstream: none (--model %s is not one of %s, which the fallback needs)" % (
            args.model, sorted(MODEL_FILES)))
        return None
    path = os.path.join(models_dir(), MODEL_FILES[args.upstream_model])
    if not os.path.exists(path):
        print("upstream: none (%s is not installed: %s)" % (args.upstream_model, path))
        return None
    flags = ["--parallel", str(args.parallel), *(["--ctx", str(args.ctx)] if args.ctx else []), *args.hearthd_arg]
    up = Upstream(args.hearthd, path, args.upstream_model, args.model, flags, args.clients)
    print("upstream: hearthd %s on 127.0.0.1:%d (%s), the front's fallback %s" % (
        args.upstream_model, up.port, " ".join(up.args), args.model))
    return up


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--hearthd", help="start this hearthd (socket and cache in a temporary folder)")
    where.add_argument("--socket", help="a running hearthd's socket")
    where.add_argument("--url", help="another OpenAI-compatible server, http://HOST:PORT")
    ap.add_argument("--pid", type=int, help="the server's pid for RSS and descriptors (--url; --socket finds it)")
    ap.add_argument("--model", default="smollm2:135m", help="hearthd's --model (default smollm2:135m)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, help="hearthd's --ctx (the KV pool is --parallel x --ctx tokens)")
    ap.add_argument("--queue-max", type=int, default=0,
                    help="hearthd's --queue-max (default 2 x clients: every client's request plus the ones "
                         "it abandoned and the daemon has not yet dropped fit, so a 429 is a failure)")
    ap.add_argument("--hearthd-arg", action="append", default=[], help="one more hearthd argument (repeatable)")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--duration", type=float, default=600, help="seconds of load (default 600)")
    ap.add_argument("--sample-s", type=float, default=5, help="seconds between RSS/fd/gauge samples")
    ap.add_argument("--settle-s", type=float, default=60, help="seconds the daemon gets to go idle after the load")
    ap.add_argument("--timeout", type=float, default=600, help="hang guard of one request, seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--greedy", choices=["strict", "report"], help="greedy mismatch: fail (default for hearth) "
                    "or only count (default for --url)")
    ap.add_argument("--greedy-max-tokens", default="1,6,24", type=lambda v: [int(x) for x in v.split(",")],
                    help="the max_tokens of the greedy requests, comma-separated (default 1,6,24; each value "
                    "adds 14 solo requests before the load)")
    ap.add_argument("--only", type=lambda v: v.split(","), help="only these actions, comma-separated (greedy, "
                    "sampled, disconnect, cancel, half_open, info, warm, clear, kind, kind_sampled, speculative, "
                    "models, upstream, upstream_sampled, upstream_surfaces): to find which one a problem needs")
    ap.add_argument("--spec-tokens", type=int, default=24,
                    help="max_tokens of the speculative requests, with drafts and without (default 24)")
    ap.add_argument("--skip", type=lambda v: v.split(","), help="leave out these actions, comma-separated")
    ap.add_argument("--schema-tokens", type=int, default=32,
                    help="max_tokens of the schema-constrained requests (default 32: whole objects, validated; "
                    "fewer: cut ones, compared only)")
    ap.add_argument("--tools-model", default="qwen2.5-coder:0.5b",
                    help="a second model, with tool-call syntax, loaded beside --model for the tool-call requests "
                    "(default qwen2.5-coder:0.5b; 'none': no tool calls, one model); skipped when not installed")
    ap.add_argument("--no-rss", action="store_true",
                    help="report RSS but do not judge it, and do not fill the KV pool first: for a daemon built "
                    "with AddressSanitizer, whose quarantine keeps freed memory (256 MiB by default) and so grows "
                    "RSS through any run that frees memory")
    ap.add_argument("--no-upstream", action="store_true",
                    help="no upstream: by default (--hearthd) a second hearthd on a loopback TCP port serves "
                    "--upstream-model, and the soak's hearthd forwards to it (soak_upstream.py)")
    ap.add_argument("--upstream-model", default="smollm2:135m", choices=sorted(MODEL_FILES),
                    help="the upstream's model (default smollm2:135m; the front's --model is its fallback)")
    ap.add_argument("--upstream-down-s", type=float, default=3,
                    help="seconds the upstream stays killed before it is started again (default 3)")
    ap.add_argument("--no-upstream-fault", dest="upstream_fault", action="store_false",
                    help="do not kill the upstream during the load")
    ap.add_argument("--json", help="write every sample and count to this file")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress lines show up in a log as they happen
    args.greedy = args.greedy or ("report" if args.url else "strict")
    if args.tools_model == "none" or args.url:
        args.tools_model = None
    args.wanted_upstream = any((not args.only or x in args.only) and x not in (args.skip or [])
                               for x in ("upstream", "upstream_sampled", "upstream_surfaces"))

    d = up = None
    if args.hearthd:
        extra = ["--parallel", str(args.parallel), "--queue-max", str(args.queue_max or 2 * args.clients),
                 *(["--ctx", str(args.ctx)] if args.ctx else []), *args.hearthd_arg]
        model = model_or_skip(args.model, MODEL_FILES[args.model]) if args.model in MODEL_FILES else args.model
        tools_file = os.path.join(models_dir(), MODEL_FILES.get(args.tools_model or "", "-"))
        if args.tools_model and not os.path.exists(tools_file):
            print("tool calls: not sent (%s is not installed: %s)" % (args.tools_model, tools_file))
        args.tools_model = args.tools_model if os.path.exists(tools_file) else None
        if args.tools_model:
            extra += ["--model", tools_file]
        up = start_upstream(args, extra)
        if up:
            extra += ["--config", up.config]
        try:
            d = Hearthd(args.hearthd, model, *extra, threads=args.threads)
        except BaseException:
            if up:
                up.close()
            raise
        target, pid = Target(unix_path=d.socket), d.proc.pid
        args.target_desc = "hearthd %s --threads %d %s" % (args.model, args.threads, " ".join(extra))
    elif args.socket:
        target = Target(unix_path=args.socket)
        pid = args.pid or target.server_pid()
        served = [m["id"] for m in json.loads(request(target, "GET", "/v1/models")[1])["data"]]
        if args.tools_model not in served:
            print("tool calls: not sent (the daemon does not serve %s)" % args.tools_model)
            args.tools_model = None
        args.target_desc = "hearthd at " + args.socket
    else:
        u = urllib.parse.urlparse(args.url)
        target, pid = Target(host=u.hostname, port=u.port or 80), args.pid
        args.target_desc = args.url
    soak = Soak(args, target, pid, hearth=not args.url)
    if up:
        soak.up = UpstreamLoad(up, target.connection, args.greedy_max_tokens, long_prefix(), args.timeout,
                               same_model=args.upstream_model == args.model)
    if d is not None and args.tools_model:
        soak.log_text, soak.churn_file = d.log_text, os.path.basename(tools_file)
    ok = False
    try:
        soak.run()
        soak.verdict()
        ok = True
    finally:
        if d is not None:
            if not ok or soak.violations:
                print("hearthd log (last 4000 characters):\n" + d.log_text()[-4000:])
            rc = d.close()
            if rc != 0:
                soak.violate("hearthd exited with %s after SIGTERM" % rc)
        if up is not None:
            if (not ok or soak.violations) and os.path.exists(up.daemon.log_path):
                print("upstream hearthd log (last 2000 characters):\n" + up.daemon.log_text()[-2000:])
            rc = up.close()
            if rc != 0:
                soak.violate("the upstream hearthd exited with %s after SIGTERM" % rc)
    soak.report()
    return 1 if soak.violations else 0

if __name__ == "__main__":
    sys.exit(main())

"""The soak's upstream (issue 45's Tests line, issue 47 item 3): a second hearthd serving a
model on a loopback TCP port, the soak's hearthd in front of it with one [[upstream]] (and the
front's own model as its `fallback`), the requests the soak sends for the upstream's model,
and the fault it injects once mid-run.

  Upstream     the upstream hearthd (bench/soak.py --hearthd starts it before the front, with
               --threads 1, the front's --ctx, --parallel and --hearthd-arg flags) and the
               front's config file naming it; kill() (SIGKILL) and restart() on the same port.
  UpstreamLoad the cases (greedy chats on OpenAI's route at each greedy length, one with the
               soak's ~700-token prefix; Ollama /api/chat and Anthropic /v1/messages chats),
               their solo answers (asked once alone through the front before the load), the
               three actions, and the fault thread: at 15% of the load (once an upstream request
               has been in flight 0.3 s, waiting up to 10 s for one) the upstream is killed,
               --upstream-down-s later started again on its port (meanwhile the fault thread
               itself asks a greedy chat on each route, so the window holds answers whatever
               the clients send); the fault window closes once
               every upstream request begun before the restart has ended and the front's
               /health says the upstream's circuit is closed again; then the fault thread
               asks one greedy chat more, which the upstream itself must answer.

Every upstream answer is judged (judge()): a complete answer whose timings say `upstream`
(and, for greedy ones, equal to the solo answer); or, inside the fault window only, the
fallback's complete answer (timings say `fallback_from`; greedy ones equal to the solo
answer when the fallback is the same model file), a 502/503/504 whose error names the
upstream, or a stream that ends with an error event and no finish (never a cut answer that
looks complete). Anything else fails the soak. Standard library only.
"""
import collections
import http.client
import json
import os
import shutil
import signal
import tempfile
import threading
import time

from hearthd_process import Hearthd, free_port  # tests/e2e, on sys.path through bench/soak.py
from soak_kinds import Invalid, chat_body

NAME, PREFIX = "up", "up/"
QUESTIONS = ["Name three colours of the rainbow.", "What is 17 plus 25?", "Write one sentence about a lighthouse."]
ENDPOINTS = {"openai": "/v1/chat/completions", "ollama": "/api/chat", "anthropic": "/v1/messages"}
# What each surface says when an answer ends complete.
FINISHED = {"openai": ("stop", "length"), "ollama": ("stop", "length"),
            "anthropic": ("end_turn", "max_tokens", "stop_sequence")}


class Upstream:
    """The upstream hearthd on 127.0.0.1:port and the front's config file (in its own
    temporary folder) naming it, with model_id (the front's own model) as its fallback."""

    def __init__(self, hearthd, model_path, model_id, fallback_id, args, clients):
        self.hearthd, self.model_path, self.model_id = hearthd, model_path, model_id
        self.port = free_port()
        self.args = ["--listen-tcp", "127.0.0.1:%d" % self.port, "--queue-max", str(4 * clients), *args]
        self.dir = tempfile.mkdtemp(prefix="hearth-soak-upstream-")
        self.config = os.path.join(self.dir, "front.toml")
        # Timeouts far past a loaded machine's (a 504 outside the fault is a failure); a
        # concurrency limit no client count reaches (a 503 outside the fault is one too).
        with open(self.config, "w") as f:
            f.write('[[upstream]]\nname = "%s"\nurl = "http://127.0.0.1:%d"\nmodels = ["%s"]\nmodel_prefix = "%s"\n'
                    'fallback = "%s"\nconnect_timeout = 10\nfirst_byte_timeout = 600\nidle_timeout = 300\n'
                    'max_concurrency = %d\n' % (NAME, self.port, model_id, PREFIX, fallback_id, 8 * clients))
        self.daemon = self.start()

    def start(self):
        return Hearthd(self.hearthd, self.model_path, *self.args, threads=1)

    def kill(self):
        self.daemon.proc.send_signal(signal.SIGKILL)
        self.daemon.proc.wait()
        self.daemon.close()  # its log and folder

    def restart(self):
        self.daemon = self.start()

    def close(self):
        """SIGTERM; hearthd's exit code (0: no sanitizer report either)."""
        rc = self.daemon.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


class Case:
    def __init__(self, surface, body, label):
        self.surface, self.body, self.label = surface, body, label
        self.solo = None


def upstream_cases(model, max_tokens, prefix):
    """Greedy chats for the upstream's model: OpenAI's route at each greedy length (two short
    ones and one with the long prefix as its system prompt), Ollama's and Anthropic's at the
    longest (one each). Few: each costs a solo answer before the load (about 3 s on a loaded
    2-core machine, where the upstream has one thread)."""
    cases = []
    for mt in max_tokens:
        for i, q in enumerate(QUESTIONS[:2]):
            cases.append(Case("openai", chat_body("openai", model, [{"role": "user", "content": q}], mt, 0),
                              "openai%d" % i))
        msgs = [{"role": "system", "content": prefix},
                {"role": "user", "content": "Summarise the list in one sentence."}]
        cases.append(Case("openai", chat_body("openai", model, msgs, mt, 0), "openai-long"))
    for surface in ("ollama", "anthropic"):
        for i, q in enumerate(QUESTIONS[:1]):
            cases.append(Case(surface, chat_body(surface, model, [{"role": "user", "content": q}], max_tokens[-1], 0),
                              "%s%d" % (surface, i)))
    return cases


class Answer:
    """What came back: status, and for a 200 the text, the finish, the timings, and whether
    a stream ended with an error event (broken) instead of a finish."""

    def __init__(self, status, text="", finish=None, timings=None, broken=None, error=""):
        self.status, self.text, self.finish, self.timings = status, text, finish, timings or {}
        self.broken, self.error = broken, error


def read_whole(surface, data):
    j = json.loads(data)
    if surface == "openai":
        ch = j["choices"][0]
        return Answer(200, ch["message"].get("content") or "", ch["finish_reason"], j.get("timings"))
    if surface == "ollama":
        return Answer(200, j["message"].get("content") or "", j.get("done_reason") if j.get("done") else None,
                      j.get("timings"))
    text = "".join(b.get("text", "") for b in j["content"] if b["type"] == "text")
    return Answer(200, text, j["stop_reason"], j.get("timings"))


def events(surface, r):
    """The parsed events of a streamed answer (SSE data, or Ollama's NDJSON lines); '[DONE]'
    as the string; None when the connection ended."""
    while True:
        line = r.readline()
        if not line:
            yield None
            return
        line = line.strip()
        if surface != "ollama":
            if not line.startswith(b"data: "):
                continue
            line = line[6:]
            if line == b"[DONE]":
                yield "[DONE]"
                continue
        if line:
            try:
                yield json.loads(line)
            except ValueError:
                raise Invalid("bad_event", line[:300].decode("utf-8", "replace"))


def read_stream(surface, r):
    """A streamed answer read to its end. Complete: a finish (OpenAI: then [DONE]; Ollama: the
    done line; Anthropic: then message_stop). Broken: an error event and no finish. Anything
    else is Invalid: a cut stream, or a finish followed by an error."""
    text, finish, timings, error, ended = [], None, {}, None, False
    for ev in events(surface, r):
        if ev is None or ev == "[DONE]":  # OpenAI's end; the others close the connection
            ended = ev == "[DONE]" or surface == "ollama" and bool(finish) or surface != "openai" and bool(error)
            break
        if ev.get("error") or ev.get("type") == "error":
            error = json.dumps(ev)[:300]
            continue
        if isinstance(ev.get("timings"), dict):
            timings.update(ev["timings"])
        if surface == "openai":
            for ch in ev.get("choices") or []:
                text.append((ch.get("delta") or {}).get("content") or "")
                finish = ch.get("finish_reason") or finish
        elif surface == "ollama":
            text.append((ev.get("message") or {}).get("content") or "")
            finish = ev.get("done_reason") if ev.get("done") else finish
        elif ev.get("type") == "content_block_delta":
            text.append(ev["delta"].get("text") or "")
        elif ev.get("type") == "message_delta":
            finish = ev["delta"].get("stop_reason")
        elif ev.get("type") == "message_stop":
            ended = True
            break
    if error and finish:
        raise Invalid("upstream_finished_then_error", "a finish (%r), then %s" % (finish, error))
    if not ended or not (error or finish):
        raise Invalid("stream_truncated", "the %s stream ended with no finish and no error event: %r" % (
            surface, "".join(text)[-80:]))
    return Answer(200, "".join(text), finish, timings, broken=error)


def ask(connect, surface, body, stream, timeout):
    """One request for the upstream's model through the front; its Answer."""
    c = connect(timeout)
    try:
        c.request("POST", ENDPOINTS[surface], body=json.dumps(dict(body, stream=stream)),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return Answer(r.status, error=r.read()[:300].decode("utf-8", "replace"))
        try:
            return read_stream(surface, r) if stream else read_whole(surface, r.read())
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise Invalid("bad_body", "%s: %r" % (surface, e))
    finally:
        c.close()


def judge(answer, surface, in_fault):
    """The answer's outcome ("upstream", "fallback", "status_502", "error_event"), or Invalid.
    Outside the fault window only "upstream" is right."""
    if answer.status != 200:
        if not in_fault or answer.status not in (502, 503, 504) or "'%s'" % NAME not in answer.error:
            raise Invalid("upstream_status_%d" % answer.status, answer.error)
        return "status_%d" % answer.status
    if answer.broken:
        if not in_fault:
            raise Invalid("upstream_error_event", answer.broken)
        return "error_event"
    if answer.finish not in FINISHED[surface]:
        raise Invalid("bad_finish_reason", "%s: %r" % (surface, answer.finish))
    t = answer.timings
    if t.get("upstream") == NAME and "fallback_from" not in t:
        return "upstream"
    if t.get("fallback_from") == NAME and "upstream" not in t:
        if not in_fault:
            raise Invalid("upstream_fallback_outside_fault", "%s: %r" % (surface, t.get("fallback_reason")))
        return "fallback"
    raise Invalid("upstream_no_marker", "%s: timings %s" % (surface, json.dumps(t)[:300]))


class UpstreamLoad:
    """The upstream requests of the soak, their fault window and its counts. same_model: the
    fallback serves the upstream's model file, so its greedy answers equal the solo ones."""

    def __init__(self, upstream, connect, max_tokens, prefix, timeout, same_model):
        self.upstream, self.connect, self.timeout, self.same_model = upstream, connect, timeout, same_model
        self.model = PREFIX + upstream.model_id
        self.cases = upstream_cases(self.model, max_tokens, prefix)
        self.lock = threading.Lock()
        self.fault = {}  # "killed", "restarted", "closed": seconds into the load
        self.t_kill = self.t_restart = self.t_closed = None  # monotonic
        self.inflight = {}  # request id -> monotonic start
        self.max_inflight = 0  # the most upstream requests the clients had in flight at once
        self.next_id = 0
        self.outcomes = collections.Counter()  # (in the fault window?, outcome) -> n
        self.after_fault = 0  # upstream answers begun after the window closed
        self.thread = None
        self.down_asked = collections.Counter()  # (surface, outcome) of ask_while_down's requests
        self.fault_errors = []

    def precompute(self):
        for c in self.cases:
            a = ask(self.connect, c.surface, c.body, False, self.timeout)
            if judge(a, c.surface, False) != "upstream":
                raise Invalid("upstream_solo", "%s alone: %s" % (c.label, a.error))
            c.solo = a.text

    # --- one request ---
    def run(self, surface, body, stream, solo=None, label=""):
        """Sends one request and judges it; returns its outcome. solo: the greedy answer alone."""
        with self.lock:
            rid, self.next_id = self.next_id, self.next_id + 1
            self.inflight[rid] = t0 = time.monotonic()
            self.max_inflight = max(self.max_inflight, len(self.inflight))
        try:
            answer = ask(self.connect, surface, body, stream, self.timeout)
        finally:
            with self.lock:
                del self.inflight[rid]
        t1 = time.monotonic()
        with self.lock:  # begun before the window closed, ended after it opened
            in_fault = self.t_kill is not None and t1 >= self.t_kill and (self.t_closed is None or t0 < self.t_closed)
            after = self.t_closed is not None and t0 >= self.t_closed
        outcome = judge(answer, surface, in_fault)
        compare = outcome == "upstream" or outcome == "fallback" and self.same_model
        if solo is not None and compare and answer.text != solo:
            raise Invalid("greedy_mismatch", "upstream %s %s (%s): %r, alone %r" % (
                label, "stream" if stream else "whole", outcome, answer.text, solo))
        with self.lock:
            self.outcomes[(in_fault, outcome)] += 1
            self.after_fault += after and outcome == "upstream"
        return outcome

    def act_greedy(self, rng):
        c = rng.choice([c for c in self.cases if c.surface == "openai"])
        return self.named(c.surface, c.body, rng, c.solo, c.label)

    def act_surfaces(self, rng):
        c = rng.choice([c for c in self.cases if c.surface != "openai"])
        return self.named(c.surface, c.body, rng, c.solo, c.label)

    def act_sampled(self, rng):
        q = rng.choice(QUESTIONS)
        body = dict(chat_body("openai", self.model, [{"role": "user", "content": q}], rng.randint(1, 32), 0.9),
                    seed=rng.randrange(1 << 30))
        return self.named("openai", body, rng, None, "sampled")

    def named(self, surface, body, rng, solo, label):
        stream = rng.random() < 0.5
        outcome = self.run(surface, body, stream, solo, label)
        return "%s_%s%s" % (surface, "stream" if stream else "whole", "" if outcome == "upstream" else ":" + outcome)

    # --- the fault ---
    def start_fault(self, t_load, at_s, down_s, stop, health):
        """Kills the upstream at_s into the load, restarts it down_s later, and closes the
        window (see the module's docstring). health() gives the front's /health object."""
        self.thread = threading.Thread(target=self.fault_thread, args=(t_load, at_s, down_s, stop, health), daemon=True)
        self.thread.start()

    def fault_thread(self, t_load, at_s, down_s, stop, health):
        if stop.wait(max(0.0, t_load + at_s - time.monotonic())):
            return
        # Up to 10 s more for a request that has been in flight a while (likely answering), so
        # the kill cuts an answer mid-way as well as refusing the ones after it.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not stop.is_set():
            with self.lock:
                if any(time.monotonic() - t0 > 0.3 for t0 in self.inflight.values()):
                    break
            time.sleep(0.02)
        with self.lock:
            self.t_kill = time.monotonic()
        self.upstream.kill()
        asks = self.ask_while_down(self.t_kill, down_s)
        self.upstream.restart()
        for t in asks:
            t.join(self.timeout)
        self.t_restart = time.monotonic()
        deadline = self.t_restart + self.timeout
        while time.monotonic() < deadline:
            with self.lock:
                waiting = any(t0 < self.t_restart for t0 in self.inflight.values())
            states = [u.get("state") for u in health().get("upstreams", []) if u.get("name") == NAME]
            if not waiting and states == ["closed"]:
                with self.lock:
                    self.t_closed = time.monotonic()
                break
            time.sleep(0.2)
        self.fault = {k: v - t_load for k, v in (("killed", self.t_kill), ("restarted", self.t_restart),
                                                 ("closed", self.t_closed)) if v is not None}
        if self.t_closed is not None:
            self.ask_after_close()

    def ask_after_close(self):
        """Once the circuit has closed: one greedy chat of the fault thread's own, which the
        upstream must answer (equal to its solo answer). The clients draw upstream requests at
        random, and on a slow machine (ASan) none may fall after the window; this one always
        does, so "no answer after the restart" means the upstream or the front failed."""
        c = next(c for c in self.cases if c.surface == "openai")
        try:
            outcome = self.run(c.surface, c.body, False, c.solo, c.label)
            with self.lock:
                self.down_asked[("after restart " + c.surface, outcome)] += 1
        except (Invalid, OSError, http.client.HTTPException) as e:
            with self.lock:
                self.fault_errors.append("upstream after its restart, %s: %r" % (c.label, e))

    def ask_while_down(self, t_kill, down_s):
        """While the upstream is down: a greedy chat on each route (OpenAI's whole and
        streamed), all at once, so the window holds answers whatever the clients happen to send
        (the fallback's, or 502s). Returns their threads after down_s: the front gives up on
        the upstream within milliseconds of a request (connection refused), then the fallback
        answers it from the local queue, however long that takes."""
        def one(c, stream):
            try:
                outcome = self.run(c.surface, c.body, stream, c.solo, c.label)
                with self.lock:
                    self.down_asked[(c.surface, outcome)] += 1
            except (Invalid, OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.fault_errors.append("upstream down, %s %s: %r" % (c.label, stream, e))

        first = {}
        for c in self.cases:
            first.setdefault(c.surface, c)
        asks = [(first["openai"], False)] + [(c, True) for c in first.values()]
        threads = [threading.Thread(target=one, args=a, daemon=True) for a in asks]
        for t in threads:
            t.start()
        time.sleep(max(0.0, t_kill + down_s - time.monotonic()))
        return threads

    def wait_fault(self, limit_s):
        if self.thread is not None:
            self.thread.join(limit_s)

    def violations(self):
        out = []
        if self.thread is not None and self.t_kill is not None:
            if self.t_closed is None:
                out.append("upstream: the circuit did not close again after the restart (%r)" % self.fault)
            elif self.after_fault == 0:
                out.append("upstream: no answer from the upstream after its restart")
        out += self.fault_errors
        return out

    def report(self):
        by = collections.defaultdict(list)
        for (in_fault, outcome), n in sorted(self.outcomes.items()):
            by[in_fault].append("%s %d" % (outcome, n))
        print("upstream (%s, fallback %s): outside the fault window %s; inside it %s" % (
            self.model, self.upstream.model_id if self.same_model else "another model",
            ", ".join(by[False]) or "none", ", ".join(by[True]) or "none"))
        if self.down_asked:
            print("asked by the fault thread (while down, and after the restart): %s" % ", ".join(
                "%s %s %d" % (s, o, n) for (s, o), n in sorted(self.down_asked.items())))
        if self.fault:
            print("upstream fault: killed at %.1f s, restarted at %.1f s, circuit closed at %s s; %d upstream answers "
                  "begun after it" % (self.fault["killed"], self.fault.get("restarted", float("nan")),
                                      "%.1f" % self.fault["closed"] if "closed" in self.fault else "never",
                                      self.after_fault))

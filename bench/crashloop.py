#!/usr/bin/env python3
"""The prompt cache's crash loop: hearthd is killed with SIGKILL again and again, aimed at the
moments its cache on disk is most exposed, and after each kill the index must pass sqlite's
PRAGMA integrity_check and the restarted daemon must answer exactly as a cold one does.

  bench/crashloop.py --hearthd build/daemon/hearthd [--model FILE|NAME] [--rounds 1000]
                     [--seed 1] [--max-seconds S] [--keep-failures DIR] [--json FILE]

Once, a reference hearthd (--no-disk-cache) computes the cold greedy answer of every prompt
in the set, each with a cache_salt of its own so that nothing, not even a shared prefix in
memory, is reused (the response's timings must say 0 cached tokens). Then each round:

  1. start hearthd on the same cache directory, with a small disk budget (drawn each round
     between --budget-min and --budget-max, so a restart with a smaller one evicts at open)
     and a small KV pool (--ctx x --parallel), so that memory and disk both evict;
  2. after /health: the index and the chunk files must agree exactly (every row has its
     file with its size, every file its row, no temp file; open() reconciles them);
     the reconcile line of the log tells what the previous kill cut in half;
  3. one request must give the cold answer; its timings say how much came from disk;
  4. two clients send a random mix of work: completions (streamed) of prompts that share
     prefixes and of long ones, /api/cache/warm, and DELETE /api/cache when the round aims
     at it; the set holds far more KV than the budget, so writes evict;
  5. SIGKILL, aimed at one of these phases, watched through /proc/PID/task/*/syscall
     (the syscall each daemon thread is in) and the clients' own state:
       prefill  a completion is in flight and its first token has not arrived
                (killed at a random point of its expected prefill time);
       write    a thread is in fsync or rename: the chunk write's steps 2-4
                (storage/store_writer.cpp);
       evict    a thread unlinks a chunk file while no DELETE is in flight: eviction;
       delete   a DELETE /api/cache is in flight (killed when a thread is seen unlinking
                or writing the index for it, else at a random point of its expected time);
       start    during the daemon's start (reconciliation, eviction down to the budget).
     The phase counted is what was observed when the signal was sent, not what was aimed at;
     a kill whose aim was not seen in time is made anyway and counted by what was going on;
  6. PRAGMA integrity_check on a copy of index.sqlite and its WAL (what the next start
     opens; the -shm is left out, sqlite rebuilds it from the WAL) must say "ok";
  7. every tenth round damages the cache before the restart: one byte flipped in a random
     chunk file, a chunk file truncated, or the index's WAL truncated at a random length
     (integrity_check again after that: a torn WAL loses its last transactions, nothing more).

Beside that (bench/crashloop_pull.py, --pull-bytes): each round downloads a model through
POST /api/pull from a local imitation of the Hugging Face Hub, cut by the kill: after the
restart the model is whole in the models folder or absent and unlisted (never served in part),
its .part a prefix of the file that the next pull resumes from its end; and GET /api/cache
(root) equals the index: the directory's entries and bytes and each owner's bytes, the figures
the fair shares and --cache-user-max-bytes (one round in three) evict by.

Across the kills (issue 47, item 4): grammar caches are not persisted (docs/prompt_cache.md),
so one in seven of the clients' requests is schema-constrained (response_format json_schema)
and one check after each restart too: each must equal its cold answer and fit its schema.
Run as root, about one in seven more is sent as another uid (OTHER_UIDS, through the socket's
group), so the per-owner figures checked after each start cover several owners.

Counted: wrong answers, inconsistent indexes (integrity_check not ok, the index and the files
disagreeing after a start, or a start that had to rebuild an index no one damaged), failed
starts, daemon errors (5xx answers, "error:" lines, sanitizer reports) and kills per phase.
Exit status 1 when any of these is not zero, 77 when the model is not installed.
--rounds 20 runs in CI (tests/e2e/CMakeLists.txt, e2e_crashloop).
"""
import argparse
import json
import os
import platform
import random
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from hearthd_process import (OTHER_UIDS, SKIP, CacheDaemon, cache_dir_problems, cached, chunk_files,  # noqa: E402
                             gemma_model_or_skip, long_prompt, model_or_skip, open_to_other_users, other_users_args,
                             post_as_user, sse_events, text_of)
from crashloop_pull import Pulls  # noqa: E402
from soak_kinds import SCHEMA_QUESTIONS, schema_errors  # noqa: E402

# Syscall numbers by machine: the ones that say what a daemon thread is doing to the cache.
# write: the chunk write's fsync (file, directory) and rename; unlink: eviction, DELETE,
# a damaged chunk's deletion; pwrite: sqlite writing the index or its WAL.
SYSCALLS = {
    "x86_64": {74: "write", 75: "write", 82: "write", 264: "write", 316: "write", 87: "unlink", 263: "unlink",
               18: "pwrite"},
    "aarch64": {82: "write", 83: "write", 38: "write", 276: "write", 35: "unlink", 68: "pwrite"},
}.get(platform.machine(), {})

PHASES = ["prefill", "write", "evict", "delete", "start"]
AIM_WEIGHTS = [4, 4, 4, 4, 1]  # a kill at start costs a start and exercises only open()
MAX_TOKENS = 8

# Schema-constrained answers (response_format json_schema): room for a whole object.
SCHEMA_MAX_TOKENS = 48


def schema_body(i, **extra):
    question, schema = SCHEMA_QUESTIONS[i]
    return {"messages": [{"role": "user", "content": question}], "max_tokens": SCHEMA_MAX_TOKENS, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}, **extra}


def schema_problem(r, i, cold):
    """What is wrong with a greedy schema-constrained answer r to question i: not its cold
    answer, or (when it ended by stop) not JSON that fits the schema; None when nothing."""
    choice = r["choices"][0]
    text = choice["message"]["content"]
    if cold is not None and text != cold:
        return "schema%d answered %r, cold %r" % (i, text, cold)
    if choice["finish_reason"] != "stop":
        return None
    try:
        errs = schema_errors(json.loads(text), SCHEMA_QUESTIONS[i][1])
    except ValueError as e:
        errs = ["not JSON: %s" % e]
    return "schema%d answered %r: %s" % (i, text, "; ".join(errs)) if errs else None


# The start's reconcile line (storage/store_check.cpp).
RECONCILED = re.compile(r"reconciled .*: (\d+) rows without files dropped, (\d+) files re-indexed, "
                        r"(\d+) invalid files and (\d+) temp files deleted")


def prompt_set(n_families, n_tails, n_long):
    """Prompts sharing prefixes (a ~250-token family head + a ~130-token tail each) and
    standalone long ones (~600 tokens): [(name, text)]."""
    out = []
    for f in range(n_families):
        head = "System notes %d. " % f + long_prompt(1000 + f, 11)
        for t in range(n_tails):
            out.append(("f%d.t%d" % (f, t), head + " Question %d: " % t + long_prompt(2000 + 10 * f + t, 6)))
    for i in range(n_long):
        out.append(("long%d" % i, long_prompt(3000 + i, 27)))
    return out


def thread_syscalls(pid):
    """What the threads of `pid` are doing to the cache now: a set of SYSCALLS labels; None
    when /proc does not say (another system, or ptrace not allowed)."""
    labels = set()
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/syscall" % (pid, tid)) as f:
                first = f.read().split(" ", 1)[0]
        except OSError:
            continue
        if first.lstrip("-").isdigit():
            label = SYSCALLS.get(int(first))
            if label:
                labels.add(label)
    return labels


def syscalls_readable():
    try:
        with open("/proc/self/task/%d/syscall" % threading.get_native_id()) as f:
            return bool(f.read()) and bool(SYSCALLS)
    except OSError:
        return False


class Clients:
    """Two clients sending work to one daemon until it dies; their state is read by the
    killer: which completions are in flight and whether their first token came, whether a
    DELETE is in flight."""

    def __init__(self, daemon, prompts, rng, ms_per_token, with_delete, schema_cold):
        self.d = daemon
        self.schema_cold = schema_cold  # the cold answer of each SCHEMA_QUESTIONS entry
        self.wrong = []  # schema answers that were not their cold answers or not valid
        self.other_users = os.geteuid() == 0  # some requests as OTHER_UIDS
        self.as_user_sent = 0
        self.prompts = prompts
        self.rng = random.Random(rng.random())
        self.ms_per_token = ms_per_token
        self.with_delete = with_delete
        self.lock = threading.Lock()
        self.inflight = {}  # client -> dict(name, sent, expected_ms, first_at)
        self.delete_sent = None  # monotonic time a DELETE was sent, None when none in flight
        self.delete_ms = []  # durations of the DELETEs that finished
        self.last_prompt = None
        self.errors = []  # 5xx answers
        self.done = 0
        self.stop = False
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(2)]
        for t in self.threads:
            t.start()

    def run(self, client):
        rng = random.Random(self.rng.random())
        try:
            while not self.stop:
                kind = rng.random()
                name, prompt, n = rng.choice(self.prompts)
                with self.lock:
                    self.inflight[client] = {"name": name, "sent": time.monotonic(),
                                             "expected_ms": n * self.ms_per_token, "first_at": None}
                    self.last_prompt = name
                if kind < 0.1:  # a warm request is a prefill without an answer
                    status, body = self.d.request("POST", "/api/cache/warm", {"prompt": prompt})
                    self.note(status, body, "warm")
                elif kind < 0.25:  # decoded under a grammar
                    self.schema(rng.randrange(len(SCHEMA_QUESTIONS)))
                elif kind < 0.4 and self.other_users:
                    self.as_other_user(rng, prompt)
                else:
                    self.stream(client, prompt)
                with self.lock:
                    self.inflight.pop(client, None)
                    self.done += 1
        except Exception:  # pylint: disable=broad-except
            pass  # the daemon was killed under this client
        finally:
            with self.lock:
                self.inflight.pop(client, None)

    def as_other_user(self, rng, prompt):
        """A completion or a warm, as another user: cached under that owner."""
        path, body = rng.choice([("/v1/completions", {"prompt": prompt, "max_tokens": rng.randint(1, MAX_TOKENS),
                                                       "temperature": 0}),
                                 ("/api/cache/warm", {"prompt": prompt})])
        status, _ = post_as_user(rng.choice(OTHER_UIDS), self.d.socket, path, body)
        with self.lock:
            self.as_user_sent += 1
        if status is not None:
            self.note(status, b"", "%s as another user" % path)

    def schema(self, i):
        status, body = self.d.request("POST", "/v1/chat/completions", schema_body(i))
        self.note(status, body, "schema")
        if status == 200:
            problem = schema_problem(json.loads(body), i, self.schema_cold[i])
            if problem:
                with self.lock:
                    self.wrong.append(problem)

    def stream(self, client, prompt):
        c = self.d.connection()
        try:
            c.request("POST", "/v1/completions",
                      body=json.dumps({"prompt": prompt, "max_tokens": self.rng.randint(1, MAX_TOKENS),
                                       "temperature": 0, "stream": True}),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                self.note(r.status, r.read(), "completion")
                return
            for event in sse_events(r):
                if event == "[DONE]":
                    break
                with self.lock:
                    if self.inflight[client]["first_at"] is None:
                        self.inflight[client]["first_at"] = time.monotonic()
        finally:
            c.close()

    def delete(self):
        """DELETE /api/cache from a thread of its own; returns at once."""
        def send():
            with self.lock:
                self.delete_sent = time.monotonic()
            try:
                status, body = self.d.request("DELETE", "/api/cache")
                self.note(status, body, "DELETE")
                with self.lock:
                    self.delete_ms.append((time.monotonic() - self.delete_sent) * 1000)
            except Exception:  # pylint: disable=broad-except
                pass
            finally:
                with self.lock:
                    self.delete_sent = None
        threading.Thread(target=send, daemon=True).start()

    def note(self, status, body, what):
        if status >= 500:
            self.errors.append("%s -> %d %s" % (what, status, body[:200]))

    def state(self):
        """(prefilling, decoding, delete_in_flight) now."""
        with self.lock:
            pre = any(v["first_at"] is None for v in self.inflight.values())
            dec = any(v["first_at"] is not None for v in self.inflight.values())
            return pre, dec, self.delete_sent is not None


def observe(d, clients, use_proc):
    """The phases going on now, the most telling first: delete (a DELETE in flight), evict
    (a thread unlinking, no DELETE in flight), write (a thread in fsync or rename), index
    (a thread writing sqlite's files), prefill (a completion or warm request before its first
    token), decode, or idle."""
    calls = thread_syscalls(d.proc.pid) if use_proc else None
    pre, dec, deleting = clients.state() if clients else (False, False, False)
    out = []
    if deleting:
        out.append("delete")
    if calls:
        if "unlink" in calls and not deleting:
            out.append("evict")
        if "write" in calls:
            out.append("write")
        if "pwrite" in calls:
            out.append("index")
    if pre:
        out.append("prefill")
    if dec:
        out.append("decode")
    return out or ["idle"], calls or set()


class Loop:
    def __init__(self, args, model):
        self.args = args
        self.model = model
        self.rng = random.Random(args.seed)
        self.use_proc = syscalls_readable()
        self.cache_dir = tempfile.mkdtemp(prefix="hearth-crashloop-")
        self.scratch = tempfile.mkdtemp(prefix="hearth-crashloop-check-")
        self.stats = {
            "rounds": 0, "wrong_answers": 0, "inconsistent_indexes": 0, "failed_starts": 0, "daemon_errors": 0,
            "kills": {}, "aimed": {}, "missed_aims": 0, "damage": {}, "split": {"temp_files": 0, "reindexed": 0,
                                                                               "rows_without_files": 0},
            "verify_prompt_tokens": 0, "verify_disk_tokens": 0, "verify_memory_tokens": 0,
            "verify_with_disk_hit": 0, "schema_checks": 0, "as_other_users": 0, "start_s": [], "round_s": [], "problems": [], "warnings": {},
        }
        self.damaged_last = None  # what the previous round damaged, if anything
        self.quota = None  # the round's --cache-user-max-bytes, if any
        # A download cut by each kill, and the cache's accounting checked at each start.
        self.models_dir = tempfile.mkdtemp(prefix="hearth-crashloop-models-")
        self.pulls = Pulls(self.models_dir, args.pull_bytes, random.Random(args.seed + 1)) if args.pull_bytes else None

    # -- the reference ------------------------------------------------------------------

    def reference(self):
        prompts = prompt_set(self.args.families, self.args.tails, self.args.long)
        ref_dir = tempfile.mkdtemp(prefix="hearth-crashloop-ref-")
        d = CacheDaemon(self.args.hearthd, self.model, ref_dir, "--no-disk-cache", *self.daemon_args())
        self.cold = {}
        self.prompts = []
        ms = []
        try:
            for i, (name, text) in enumerate(prompts):
                r = d.complete(text, max_tokens=MAX_TOKENS, cache_salt="crashloop-cold-%d" % i)
                n = r["usage"]["prompt_tokens"]
                assert cached(r) == (0, 0, n), (name, cached(r))
                self.cold[name] = text_of(r)
                self.prompts.append((name, text, n))
                ms.append(r["timings"]["prefill_ms"] / n)
            self.schema_cold = [self.schema_reference(d, i) for i in range(len(SCHEMA_QUESTIONS))]
        finally:
            d.stop()
            shutil.rmtree(ref_dir, ignore_errors=True)
        self.ms_per_token = sorted(ms)[len(ms) // 2]
        self.by_name = {name: (text, n) for name, text, n in self.prompts}
        tokens = sum(n for _, _, n in self.prompts)
        print("reference: %d prompts, %d tokens, %.2f ms a prompt token cold; budget %d-%d bytes" %
              (len(self.prompts), tokens, self.ms_per_token, self.args.budget_min, self.args.budget_max), flush=True)

    def schema_reference(self, d, i):
        """The cold answer of schema question i, which must itself be valid."""
        status, r = d.post_json("/v1/chat/completions", schema_body(i, cache_salt="crashloop-schema-%d" % i))
        assert status == 200, r
        problem = schema_problem(r, i, None)
        assert problem is None, problem
        return r["choices"][0]["message"]["content"]

    def daemon_args(self, budget=None):
        out = ["--ctx", str(self.args.ctx), "--parallel", "2"]
        out += other_users_args()
        if budget:
            out += ["--cache-max-bytes", str(budget)]
        return out

    # -- one round ------------------------------------------------------------------------

    def start(self, aim_start):
        """Starts hearthd; with aim_start, kills it during its start instead (returns None).
        A start that fails is counted and retried once."""
        budget = self.rng.randint(self.args.budget_min, self.args.budget_max)
        # One round in three with a per-user quota under the budget: the start evicts to it.
        self.quota = self.rng.randint(budget // 3, budget) if self.rng.random() < 1 / 3 else None
        quota_args = ["--cache-user-max-bytes", str(self.quota)] if self.quota else []
        for attempt in range(2):
            t0 = time.monotonic()
            d = CacheDaemon(self.args.hearthd, self.model, self.cache_dir, *self.daemon_args(budget), *quota_args,
                            wait=False)
            open_to_other_users(d)
            if aim_start:
                self.kill_during_start(d)
                return None
            try:
                d.wait_ready()
                self.stats["start_s"].append(time.monotonic() - t0)
                return d
            except AssertionError as e:
                self.stats["failed_starts"] += 1
                self.problem("failed start (attempt %d): %s" % (attempt + 1, str(e)[-3000:]))
                if d.proc.poll() is None:
                    d.kill()
        raise SystemExit("hearthd failed to start twice in a row; stopping")

    def kill_during_start(self, d):
        """SIGKILL at a random point of a start (the median start so far), or earlier when a
        thread is seen deleting or writing files (open()'s reconciliation and eviction)."""
        typical = sorted(self.stats["start_s"])[len(self.stats["start_s"]) // 2] if self.stats["start_s"] else 1.0
        kill_at = time.monotonic() + self.rng.uniform(0.0, typical)
        label = "start"
        while time.monotonic() < kill_at:
            calls = thread_syscalls(d.proc.pid) if self.use_proc else None
            if calls and ("unlink" in calls or "pwrite" in calls):
                label = "start"
                break
            time.sleep(0.0005)
        self.count_kill("start", [label])
        d.kill()

    def check_start(self, d, round_no):
        """After /health: the reconcile line, no unexplained index rebuild, rows == files."""
        log = d.log_text()
        m = RECONCILED.search(log)
        if m and not self.damaged_last:
            rows, reindexed, _invalid, temps = (int(x) for x in m.groups())
            self.stats["split"]["rows_without_files"] += rows
            self.stats["split"]["reindexed"] += reindexed
            self.stats["split"]["temp_files"] += temps
        if "was unreadable; rebuilt it" in log and self.damaged_last != "wal":
            self.stats["inconsistent_indexes"] += 1
            self.problem("round %d: the index was rebuilt at start though nothing damaged it:\n%s" % (round_no, log))
        try:
            _, problems = cache_dir_problems(self.cache_dir)
        except sqlite3.Error as e:
            problems = ["cannot read the index: %s" % e]
        if problems:
            self.stats["inconsistent_indexes"] += 1
            self.problem("round %d: the index and the files disagree after a start: %s" % (round_no, problems[:10]))

    def verify(self, d, round_no, name):
        text, n = self.by_name[name]
        status, r = d.post_json("/v1/completions", {"prompt": text, "max_tokens": MAX_TOKENS, "temperature": 0})
        if status != 200:
            self.stats["daemon_errors"] += 1
            self.problem("round %d: the check request got %d: %s" % (round_no, status, r))
            return
        mem, disk, _ = cached(r)
        self.stats["verify_prompt_tokens"] += n
        self.stats["verify_disk_tokens"] += disk
        self.stats["verify_memory_tokens"] += mem
        self.stats["verify_with_disk_hit"] += disk > 0
        if text_of(r) != self.cold[name]:
            self.stats["wrong_answers"] += 1
            self.problem("round %d: %s answered %r, cold %r (cached %s)" %
                         (round_no, name, text_of(r), self.cold[name], cached(r)))
            self.keep_failure(round_no)
        self.verify_schema(d, round_no)

    def verify_schema(self, d, round_no):
        """A schema-constrained request after the restart: its cold answer, valid."""
        i = self.rng.randrange(len(SCHEMA_QUESTIONS))
        status, r = d.post_json("/v1/chat/completions", schema_body(i))
        self.stats["schema_checks"] += 1
        problem = schema_problem(r, i, self.schema_cold[i]) if status == 200 else "status %d: %s" % (status, r)
        if problem:
            self.stats["wrong_answers"] += 1
            self.problem("round %d: after the restart %s" % (round_no, problem))

    def work_and_kill(self, d, aim):
        clients = Clients(d, self.prompts, self.rng, self.ms_per_token, aim == "delete", self.schema_cold)
        # At least three prefills of the longest prompt: a sanitizer build reads ~20x slower.
        longest_s = max(n for _, _, n in self.prompts) * self.ms_per_token / 1000
        deadline = time.monotonic() + max(self.args.aim_seconds, 3 * longest_s)
        hit = None
        # How many sightings of the aim to let pass first, so kills spread over a round's
        # writes and evictions instead of always landing on the first.
        skip = self.rng.randint(0, 3)
        prefill_kill = {}  # client's request start -> the point of its prefill to kill at
        next_delete = time.monotonic() + self.rng.uniform(0.3, 1.5)
        delete_kill_at = None
        while time.monotonic() < deadline:
            now = time.monotonic()
            phases, calls = observe(d, clients, self.use_proc)
            if aim == "prefill":
                with clients.lock:
                    for v in clients.inflight.values():
                        if v["first_at"] is None:
                            at = prefill_kill.setdefault(v["sent"], v["sent"] + self.rng.uniform(0.05, 0.95) *
                                                         v["expected_ms"] / 1000)
                            if now >= at:
                                hit = phases
                if hit:
                    break
            elif aim in ("write", "evict"):
                if aim in phases:
                    if skip == 0:
                        hit = phases
                        break
                    skip -= 1
                    time.sleep(0.002)  # past this sighting
            elif aim == "delete":
                if "delete" in phases:
                    # Killed when a thread is seen deleting files or writing the index for the
                    # DELETE, else at a random point of its expected duration.
                    if delete_kill_at is None:
                        took = sorted(clients.delete_ms)
                        delete_kill_at = now + self.rng.uniform(0.0, took[len(took) // 2] / 1000 if took else 0.01)
                    if calls & {"unlink", "pwrite"} or now >= delete_kill_at:
                        hit = phases
                        break
                else:
                    delete_kill_at = None
                    if now >= next_delete and chunk_files(self.cache_dir):
                        clients.delete()
                        next_delete = now + self.rng.uniform(0.3, 1.5)
            if d.proc.poll() is not None:
                break
            time.sleep(0.0003)
        if hit is None:
            hit = observe(d, clients, self.use_proc)[0]
            self.stats["missed_aims"] += 1
        exited = d.proc.poll()
        log = d.kill()
        clients.stop = True
        if exited is not None:
            self.stats["daemon_errors"] += 1
            self.problem("hearthd exited by itself with %s before the kill:\n%s" % (exited, log[-3000:]))
        self.count_kill(aim, hit)
        self.scan_log(log)
        for e in clients.errors:
            self.stats["daemon_errors"] += 1
            self.problem("5xx answer: " + e)
        with clients.lock:
            self.stats["as_other_users"] += clients.as_user_sent
            for w in clients.wrong:
                self.stats["wrong_answers"] += 1
                self.problem("before the kill: " + w)
        with clients.lock:
            return clients.last_prompt

    def count_kill(self, aim, hit):
        self.stats["aimed"][aim] = self.stats["aimed"].get(aim, 0) + 1
        phase = hit[0] if hit else "idle"
        self.stats["kills"][phase] = self.stats["kills"].get(phase, 0) + 1

    def scan_log(self, log):
        """Error lines and sanitizer reports are daemon errors; warnings are tallied by their
        words (hex names and numbers taken out) for the summary."""
        for line in log.splitlines():
            if " error:" in line[:20] or "AddressSanitizer" in line or "runtime error:" in line:
                self.stats["daemon_errors"] += 1
                self.problem("daemon error line: " + line)
            elif line.startswith("hearth warn:"):
                key = re.sub(r"[0-9a-f]{16}\.kv|/\S+|\d+", "#", line[len("hearth warn: "):])[:100]
                self.stats["warnings"][key] = self.stats["warnings"].get(key, 0) + 1

    def integrity_check(self, round_no, when):
        """PRAGMA integrity_check on a copy of the index and its WAL: what the next start sees."""
        src = os.path.join(self.cache_dir, "index.sqlite")
        if not os.path.exists(src):
            return
        dst = os.path.join(self.scratch, "index.sqlite")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(dst + suffix):
                os.remove(dst + suffix)
        shutil.copyfile(src, dst)
        if os.path.exists(src + "-wal"):
            shutil.copyfile(src + "-wal", dst + "-wal")
        try:
            db = sqlite3.connect(dst)
            try:
                result = [row[0] for row in db.execute("PRAGMA integrity_check")]
            finally:
                db.close()
        except sqlite3.Error as e:
            result = ["%s: %s" % (type(e).__name__, e)]
        if result != ["ok"]:
            self.stats["inconsistent_indexes"] += 1
            self.problem("round %d: integrity_check %s: %s" % (round_no, when, result[:10]))
            self.keep_failure(round_no)

    def damage(self, round_no):
        """Every tenth round: one chunk file flipped or truncated, or the WAL truncated."""
        files = chunk_files(self.cache_dir)
        wal = os.path.join(self.cache_dir, "index.sqlite-wal")
        kinds = ["flip", "truncate"] if files else []
        if os.path.exists(wal) and os.path.getsize(wal) > 0:
            kinds.append("wal")
        if not kinds:
            return None
        kind = self.rng.choice(kinds)
        if kind == "wal":
            size = os.path.getsize(wal)
            os.truncate(wal, self.rng.randrange(size))
        else:
            path = self.rng.choice(files)
            size = os.path.getsize(path)
            if kind == "flip":
                at = self.rng.randrange(size)
                with open(path, "r+b") as f:
                    f.seek(at)
                    b = f.read(1)
                    f.seek(at)
                    f.write(bytes([b[0] ^ (1 << self.rng.randrange(8))]))
            else:
                os.truncate(path, self.rng.randrange(size))
        self.stats["damage"][kind] = self.stats["damage"].get(kind, 0) + 1
        if kind == "wal":
            self.integrity_check(round_no, "after the WAL was truncated")
        return kind

    def problem(self, text):
        self.stats["problems"].append(text)
        print("PROBLEM: " + text, flush=True)

    def keep_failure(self, round_no):
        if self.args.keep_failures:
            dst = os.path.join(self.args.keep_failures, "round%d" % round_no)
            shutil.copytree(self.cache_dir, dst, dirs_exist_ok=True)

    def run(self):
        self.reference()
        t_begin = time.monotonic()
        last_prompt = None
        d = self.start(False)
        round_no = 0
        while round_no < self.args.rounds:
            if self.args.max_seconds and time.monotonic() - t_begin > self.args.max_seconds:
                print("stopping after %d rounds: --max-seconds %d passed" % (round_no, self.args.max_seconds))
                break
            t0 = time.monotonic()
            self.check_start(d, round_no)
            if self.pulls:
                self.pulls.check_accounting(d, self.cache_dir, self.quota, round_no, self.problem)
                self.pulls.after_start(d, round_no, self.problem)
            name = last_prompt if last_prompt and self.rng.random() < 0.7 else self.rng.choice(self.prompts)[0]
            self.verify(d, round_no, name)
            aim = self.rng.choices(PHASES, AIM_WEIGHTS)[0]
            if aim == "start":
                # The running daemon is killed as it is (its writer may still be persisting the
                # check request's chunks), then the next one during its start.
                self.count_kill("after-check", observe(d, None, self.use_proc)[0])
                self.scan_log(d.kill())
                self.integrity_check(round_no, "after the kill before a start")
                self.start(True)
            else:
                last_prompt = self.work_and_kill(d, aim)
            if self.pulls:
                self.pulls.after_kill()
            self.integrity_check(round_no, "after the kill")
            self.damaged_last = self.damage(round_no) if round_no % 10 == 9 else None
            d = self.start(False)
            round_no += 1
            self.stats["rounds"] = round_no
            self.stats["round_s"].append(time.monotonic() - t0)
            if round_no % self.args.report_every == 0 or round_no == self.args.rounds:
                self.progress()
        self.check_start(d, round_no)
        if self.pulls:
            self.pulls.check_accounting(d, self.cache_dir, self.quota, round_no, self.problem)
            self.pulls.after_start(d, round_no, self.problem)
        self.scan_log(d.kill())
        if self.pulls:
            self.pulls.after_kill()
        return self.summary()

    def progress(self):
        s = self.stats
        print("round %d: kills %s; wrong %d, inconsistent %d, failed starts %d, errors %d; %.2f s a round" %
              (s["rounds"], dict(sorted(s["kills"].items())), s["wrong_answers"], s["inconsistent_indexes"],
               s["failed_starts"], s["daemon_errors"], sum(s["round_s"]) / len(s["round_s"])), flush=True)

    def summary(self):
        s = self.stats
        n = max(s["rounds"], 1)
        starts = sorted(s["start_s"]) or [0.0]
        rounds = sorted(s["round_s"]) or [0.0]
        print()
        print("crash loop: %d rounds, %.0f s (%.2f s a round, median %.2f, max %.2f); model %s" %
              (s["rounds"], sum(rounds), sum(rounds) / n, rounds[len(rounds) // 2], rounds[-1],
               os.path.basename(self.model)))
        print("kills by phase observed at the signal: %s" % dict(sorted(s["kills"].items())))
        print("kills by aim: %s; aims not seen in time (killed anyway): %d; /proc syscalls %s" %
              (dict(sorted(s["aimed"].items())), s["missed_aims"], "used" if self.use_proc else "unreadable"))
        print("operations the kills cut in half (found at the next start): %d temp files, %d files without "
              "rows re-indexed, %d rows without files dropped" %
              (s["split"]["temp_files"], s["split"]["reindexed"], s["split"]["rows_without_files"]))
        print("damage: %s" % dict(sorted(s["damage"].items())))
        share = s["verify_disk_tokens"] / max(s["verify_prompt_tokens"], 1)
        print("check requests after restarts: %d of %d restored from disk; %.1f%% of their prompt tokens from "
              "disk, %.1f%% from memory" % (s["verify_with_disk_hit"], s["rounds"] + 1, 100 * share,
                                            100 * s["verify_memory_tokens"] / max(s["verify_prompt_tokens"], 1)))
        print("schema-constrained answers checked after restarts: %d (and the clients' ones before each kill)" %
              s["schema_checks"])
        print("requests as other users (uids %s): %d%s" % (OTHER_UIDS, s["as_other_users"],
                                                          "" if os.geteuid() == 0 else " (not root: none sent)"))
        for key, n_lines in sorted(s["warnings"].items(), key=lambda kv: -kv[1]):
            print("warnings logged: %d x %s" % (n_lines, key))
        print("starts: median %.2f s, max %.2f s" % (starts[len(starts) // 2], starts[-1]))
        print("wrong answers %d, inconsistent indexes %d, failed starts %d, daemon errors %d" %
              (s["wrong_answers"], s["inconsistent_indexes"], s["failed_starts"], s["daemon_errors"]))
        if self.pulls:
            self.pulls.summary()
            s["pull"] = self.pulls.stats
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump(s, f, indent=1)
        failed = s["wrong_answers"] or s["inconsistent_indexes"] or s["failed_starts"] or s["daemon_errors"]
        failed = failed or (self.pulls and self.pulls.failed())
        return 1 if failed else 0

    def close(self):
        if self.pulls:
            self.pulls.close()
        shutil.rmtree(self.models_dir, ignore_errors=True)
        shutil.rmtree(self.cache_dir, ignore_errors=True)
        shutil.rmtree(self.scratch, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--model", help="a file in the models folder or a path (default: Gemma 3 270M)")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-seconds", type=int, default=0, help="stop starting rounds after this long (0: no limit)")
    ap.add_argument("--budget-min", type=int, default=6 << 20, help="disk budget, bytes: drawn each round from here")
    ap.add_argument("--budget-max", type=int, default=16 << 20, help="to here")
    ap.add_argument("--ctx", type=int, default=1024, help="tokens a sequence; the KV pool holds 2 of them")
    ap.add_argument("--families", type=int, default=3, help="prompt families sharing a head")
    ap.add_argument("--tails", type=int, default=4, help="prompts a family")
    ap.add_argument("--long", type=int, default=4, help="standalone long prompts")
    ap.add_argument("--aim-seconds", type=float, default=6.0,
                    help="how long to wait for the aimed phase (at least three prefills of the longest prompt)")
    ap.add_argument("--report-every", type=int, default=10)
    ap.add_argument("--pull-bytes", type=int, default=16 << 20,
                    help="size of the model file a pull downloads each round, cut by the kill (0: no pulls)")
    ap.add_argument("--keep-failures", help="copy the cache directory here when a round fails")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if args.model is None:
        model = gemma_model_or_skip()
    elif os.path.sep in args.model:
        model = args.model
    else:
        model = model_or_skip(args.model, args.model)
    if not os.path.exists(model):
        print("SKIP: %s is not there" % model)
        return SKIP
    loop = Loop(args, model)
    try:
        return loop.run()
    finally:
        loop.close()


if __name__ == "__main__":
    sys.exit(main())

"""Starts a real hearthd on a temporary Unix socket for the end-to-end tests, and speaks
plain HTTP/1.1 to it over that socket (standard library only)."""
import glob
import http.client
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time

SKIP = 77  # CTest's SKIP_RETURN_CODE for these tests

# How long any wait in these tests lasts before it is called a hang and fails, saying what it
# waited for: a hang guard, not a performance bound. Minutes, far past what a slow machine
# needs (CI: 2 cores, tests in parallel, ASan builds 3-10x slower, other processes beside
# them); the same as kHangGuard in tests/test_util.h. No test asserts how long anything took.
HANG_GUARD_S = 600

# Extra hearthd arguments for every daemon a test starts, space-separated: ctest runs the
# daemon test a second time with HEARTH_E2E_HEARTHD_ARGS="--backend vulkan".
EXTRA_ARGS_ENV = "HEARTH_E2E_HEARTHD_ARGS"


def extra_args_or_skip(hearthd):
    """The extra arguments from the environment; with --backend vulkan, skips the test when
    hearthd --list-devices shows no Vulkan device it can use."""
    args = os.environ.get(EXTRA_ARGS_ENV, "").split()
    if "vulkan" in args:
        out = subprocess.run([hearthd, "--list-devices"], capture_output=True, text=True,
                             timeout=HANG_GUARD_S).stdout
        if not any(line.startswith("vulkan ") and "; usable" in line for line in out.splitlines()):
            print("SKIP: no usable Vulkan device:\n" + out)
            raise SystemExit(SKIP)
    return args


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=HANG_GUARD_S):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


# Requests as other users, when the tests run as root: hearthd is started with
# other_users_args() (its socket in group SOCKET_GID, mode 0660), its socket's folder is
# opened with open_to_other_users(), and a child python running as the user sends the
# request, so hearthd learns the uid from the kernel (SO_PEERCRED).
SOCKET_GID = 40000
OTHER_UIDS = [65534, 40001]
AS_USER = r"""
import http.client, socket, sys
class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(sys.argv[1])
c = Conn("hearth", timeout=float(sys.argv[4]))
try:
    c.request("POST", sys.argv[2], sys.argv[3], {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
except (OSError, http.client.HTTPException):
    sys.exit(0)  # no whole answer (the daemon was killed)
sys.stdout.write("%d\n" % r.status)
sys.stdout.flush()
sys.stdout.buffer.write(data)
"""


def other_users_args():
    """hearthd's arguments letting OTHER_UIDS reach its socket (as root), else none."""
    return ["--socket-group", str(SOCKET_GID)] if os.geteuid() == 0 else []


def open_to_other_users(daemon):
    """Lets other users pass through the daemon's socket folder to the socket itself."""
    os.chmod(os.path.dirname(daemon.socket), 0o711)


def post_as_user(uid, socket_path, path, body, timeout=HANG_GUARD_S):
    """POSTs body as uid (root only) from a child process: (status, body bytes), or
    (None, b"") when no whole answer came (the daemon was killed)."""
    r = subprocess.run(["/usr/bin/python3", "-c", AS_USER, socket_path, path, json.dumps(body), str(timeout)],
                       cwd="/", user=uid, group=SOCKET_GID if uid != 65534 else 65534, extra_groups=[SOCKET_GID],
                       capture_output=True, timeout=timeout + 60, check=False)
    status, _, data = r.stdout.partition(b"\n")
    return (int(status), data) if status.isdigit() else (None, b"")


def free_port():
    """A loopback TCP port free now (for a daemon's --listen-tcp)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def models_dir():
    return os.environ.get("HEARTH_MODELS") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "hearth", "models")


def model_or_skip(name, file_name):
    """The path of a catalog model's file; exits with SKIP when it is not installed."""
    path = os.path.join(models_dir(), file_name)
    if not os.path.exists(path):
        print("SKIP: %s is not installed (%s missing; scripts/fetch-model %s)" % (name, path, name))
        raise SystemExit(SKIP)
    return path


def gemma_model_or_skip():
    """Gemma 3 270M, the model the daemon and cache tests are written against."""
    return model_or_skip("gemma3:270m", "gemma-3-270m-q4_k_m.gguf")


def default_chat_model_or_skip():
    """Qwen2.5-Coder 0.5B Instruct, the default model (hearthd with no --model)."""
    return model_or_skip("qwen2.5-coder:0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")


class Hearthd:
    """hearthd on <tmp>/hearth.sock; stopped (SIGTERM) by close(). model: a path or name, or None for the default."""

    def __init__(self, hearthd, model, *args, threads=2):
        extra = extra_args_or_skip(hearthd)
        self.dir = tempfile.mkdtemp(prefix="hearth-e2e-")
        self.socket = os.path.join(self.dir, "hearth.sock")
        self.log_path = os.path.join(self.dir, "hearthd.log")
        self.log = open(self.log_path, "wb")
        # model None: no --model, so hearthd loads its default model.
        model_args = [] if model is None else ["--model", model]
        cmd = [hearthd, *model_args, "--socket", self.socket, "--threads", str(threads),
               "--cache-dir", os.path.join(self.dir, "cache"), *args, *extra]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def wait_ready(self, limit_s=HANG_GUARD_S):
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("hearthd exited with %d:\n%s" % (self.proc.returncode, self.log_text()))
            try:
                status, _ = self.request("GET", "/health")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("hang guard: hearthd did not answer GET /health with 200 within %d s:\n%s" %
                             (limit_s, self.log_text()))

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def connection(self, timeout=HANG_GUARD_S):
        return UnixHTTPConnection(self.socket, timeout)

    def request(self, method, path, body=None, headers=None):
        c = self.connection()
        try:
            data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            h = {"Content-Type": "application/json"} if data is not None else {}
            h.update(headers or {})
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def post_json(self, path, body):
        status, data = self.request("POST", path, body)
        return status, json.loads(data)

    def metrics(self):
        """Prometheus text -> {'name{labels}': value}."""
        status, data = self.request("GET", "/metrics")
        assert status == 200, status
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def close(self, grace_s=HANG_GUARD_S, keep_dir=False):
        """SIGTERM; returns hearthd's exit code. grace_s is a hang guard; keep_dir leaves the
        log for the caller to read (and remove)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("hang guard: hearthd did not exit within %d s of SIGTERM:\n%s" %
                                     (grace_s, self.log_text()))
        self.log.close()
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


def sse_events(response):
    """Yields the JSON payloads of a server-sent event stream, then the string '[DONE]'."""
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        payload = line[len("data: "):]
        yield payload if payload == "[DONE]" else json.loads(payload)


class CacheDaemon(Hearthd):
    """hearthd with a prompt cache directory that outlives it (the cache tests, the crash loop).
    wait=False returns as soon as the process runs (wait_ready() then waits for /health); env,
    when given, is its whole environment."""

    def __init__(self, hearthd, model, cache_dir, *args, wait=True, env=None):  # pylint: disable=super-init-not-called
        self.dir = tempfile.mkdtemp(prefix="hearth-cache-e2e-")
        self.socket = os.path.join(self.dir, "hearth.sock")
        self.log_path = os.path.join(self.dir, "hearthd.log")
        self.log = open(self.log_path, "wb")
        cmd = [hearthd, "--model", model, "--socket", self.socket, "--threads", "2", "--cache-dir", cache_dir, *args]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        if wait:
            self.wait_ready()

    def kill(self):
        """SIGKILL; returns what hearthd logged."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()
        text = self.log_text()
        shutil.rmtree(self.dir, ignore_errors=True)
        return text

    def stop(self):
        """SIGTERM; returns everything hearthd logged, its shutdown included."""
        self.log.flush()
        rc = self.close(keep_dir=True)
        log = self.log_text()
        shutil.rmtree(self.dir, ignore_errors=True)
        assert rc == 0, "hearthd exited with %d:\n%s" % (rc, log)
        return log

    def complete(self, prompt, max_tokens=6, **extra):
        status, r = self.post_json("/v1/completions",
                                   {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra})
        assert status == 200, r
        return r

    def chat(self, messages, max_tokens=8):
        status, r = self.post_json("/v1/chat/completions",
                                   {"messages": messages, "max_tokens": max_tokens, "temperature": 0})
        assert status == 200, r
        return r

    def cache(self):
        status, data = self.request("GET", "/api/cache")
        assert status == 200, data
        return json.loads(data)


def cached(r):
    """(memory, disk, prefilled) tokens of a response."""
    c = r["timings"]["cached_tokens"]
    return c["memory"], c["disk"], r["usage"]["prompt_tokens"] - c["memory"] - c["disk"]


def text_of(r):
    return r["choices"][0].get("text", r["choices"][0].get("message", {}).get("content"))


def long_prompt(seed, n_items):
    """~22 tokens an item on Gemma 3, different for each seed."""
    rng = random.Random(seed)
    colours, animals, places = ["red", "green", "blue", "grey"], ["fox", "owl", "cat", "bear", "eel"], ["river", "hill"]
    return " ".join("Item %d: the %s %s walks to the %s and counts %d stones." %
                    (i, rng.choice(colours), rng.choice(animals), rng.choice(places), rng.randrange(1000))
                    for i in range(n_items))


def chunk_files(cache_dir):
    return sorted(glob.glob(os.path.join(cache_dir, "chunks", "*", "*.kv")))


def cache_dir_problems(cache_dir):
    """(rows, problems): whether the index and the chunk files agree exactly, for a cache no
    hearthd is writing to (exited, or started and not yet asked anything): every index row
    has its file with the row's size, every chunk file has a row, no temp file is left. The
    index is opened read-only beside a running hearthd (sqlite's locking keeps that safe)."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(cache_dir, "index.sqlite"), uri=True)
    try:
        rows = {}
        for h, size in db.execute("SELECT hash, bytes FROM chunks"):
            name = "%016x" % (h & 0xFFFFFFFFFFFFFFFF)
            rows[os.path.join(cache_dir, "chunks", name[:2], name + ".kv")] = size
    finally:
        db.close()
    files = set(chunk_files(cache_dir))
    problems = ["row without file: " + p for p in rows if p not in files]
    problems += ["file without row: " + p for p in files if p not in rows]
    problems += ["size differs from its row: " + p for p, s in rows.items() if p in files and os.path.getsize(p) != s]
    problems += ["temp file left: " + p for p in glob.glob(os.path.join(cache_dir, "chunks", "*", ".*"))]
    return len(rows), problems


def check_consistency(cache_dir):
    """cache_dir_problems() must find none; returns the number of chunks indexed."""
    n, problems = cache_dir_problems(cache_dir)
    assert not problems, problems
    return n

"""POST /api/pull on a real hearthd, against the Hub imitation of pull_test.py (CI has no
internet). hearthd serves a models folder holding a synthetic model; HF_ENDPOINT points it
at the imitation. Checks Ollama's NDJSON progress, "stream": false, errors as Ollama gives
them (a line {"error"} in a stream, a 500 without), that a pulled model is served by name at
once, that the daemon answers other requests while a pull runs, and that a client hanging up
cancels the download: nothing in the models folder, the .part left unlocked for the next pull,
which resumes it. With the official ollama library (when this Python has it), the same pull
through its client.

usage: api_pull_test.py HEARTHD MAKE_SYNTHETIC
"""
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from pull_test import World, check, make_handler, serve  # noqa: E402
from hearthd_process import UnixHTTPConnection  # noqa: E402

HANG_GUARD_S = 120  # a hang guard, not a time bound


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon_command(hearthd, tmp, models, hub_port, *args):
    env = dict(os.environ, HEARTH_MODELS=models, HF_ENDPOINT="http://127.0.0.1:%d" % hub_port)
    env.pop("HF_TOKEN", None)
    cmd = [hearthd, "--socket", os.path.join(tmp, "hearth.sock"), "--threads", "1", "--ctx", "256",
           "--chat-template", "chatml", "--cache-dir", os.path.join(tmp, "cache"), *args]
    return cmd, env


class Daemon:
    def __init__(self, hearthd, tmp, models, hub_port, *args):
        self.socket = os.path.join(tmp, "hearth.sock")
        self.log_path = os.path.join(tmp, "hearthd.log")
        cmd, env = daemon_command(hearthd, tmp, models, hub_port, *args)
        self.proc = subprocess.Popen(cmd, env=env, stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + HANG_GUARD_S
        while time.monotonic() < deadline:
            check_alive = self.proc.poll()
            if check_alive is not None:
                sys.exit("FAIL: hearthd exited:\n" + self.log())
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        sys.exit("FAIL: hang guard: hearthd never became healthy\n" + self.log())

    def log(self):
        return open(self.log_path, "rb").read().decode("utf-8", "replace")

    def request(self, method, path, body=None):
        c = UnixHTTPConnection(self.socket, HANG_GUARD_S)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = c.getresponse()
            return r.status, r.read(), r.getheader("Content-Type")
        finally:
            c.close()

    def pull_lines(self, name, **extra):
        status, body, ctype = self.request("POST", "/api/pull", {"model": name, **extra})
        return status, [json.loads(line) for line in body.decode().splitlines() if line.strip()], ctype

    def tags(self):
        status, body, _ = self.request("GET", "/api/tags")
        check(status == 200, "GET /api/tags answers")
        return sorted(m["name"] for m in json.loads(body)["models"])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(HANG_GUARD_S)
        check(rc == 0, "hearthd stops cleanly (rc %d)" % rc)


def model_files(models):
    return sorted(f for f in os.listdir(models) if not f.startswith("."))


def part_locked(part):
    with open(part, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def wait_for(cond, what):
    deadline = time.monotonic() + HANG_GUARD_S
    while not cond():
        if time.monotonic() > deadline:
            sys.exit("FAIL: hang guard: " + what)
        time.sleep(0.05)
    check(True, what)


def check_progress(lines, good, what):
    """Ollama's order: manifest, the file's bytes (first and last always), verifying, success."""
    import hashlib
    sha = hashlib.sha256(good).hexdigest()
    check(lines[0] == {"status": "pulling manifest"}, what + ": opens with pulling manifest: %s" % lines[:1])
    down = [l for l in lines if "digest" in l]
    check(down and all(l == {"status": "pulling " + sha[:12], "digest": "sha256:" + sha, "total": len(good),
                             "completed": l["completed"]} for l in down), what + ": download lines in Ollama's shape")
    done = [l["completed"] for l in down]
    check(done == sorted(done) and done[-1] == len(good), what + ": completed grows to the total")
    check({"status": "verifying sha256 digest"} in lines, what + ": verifying sha256 digest")
    check(lines[-1] == {"status": "success"}, what + ": ends with success: %s" % lines[-1:])


def cancel_on_hang_up(d, world, models, good):
    """A client that hangs up mid-download cancels it; the next pull resumes the part."""
    c = UnixHTTPConnection(d.socket, HANG_GUARD_S)
    c.request("POST", "/api/pull", body=json.dumps({"model": "hf.co/org/slow:Q4_K_M"}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    check(r.status == 200 and r.getheader("Content-Type") == "application/x-ndjson", "a streamed pull starts at once")
    while "digest" not in json.loads(r.readline()):
        pass
    # While it downloads (5 s), the daemon answers other requests.
    check("synthetic" in d.tags() and not world.slow_ended, "GET /api/tags is answered while a pull downloads")
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    wait_for(lambda: world.slow_ended, "the download stops after the client hangs up")
    check(world.slow_ended == [("broken", "org/slow")], "it stopped before the file was all sent: %s" % world.slow_ended)
    part = os.path.join(models, ".downloads", "model-Q4_K_M.gguf.part")
    wait_for(lambda: os.path.exists(part) and not part_locked(part), "the cancelled pull lets go of its .part")
    kept = os.path.getsize(part)
    check(0 < kept < len(good) and "model-Q4_K_M.gguf" not in model_files(models),
          "a cancelled pull keeps its .part (%d bytes) and puts nothing in the models folder" % kept)
    world.mode["org/slow"] = set()
    n = len(world.ranges)
    status, lines, _ = d.pull_lines("hf.co/org/slow:Q4_K_M")
    check(status == 200 and lines[-1] == {"status": "success"}, "the next pull finishes it: %s" % lines[-1:])
    check(world.ranges[n] == ("org/slow", "bytes=%d-" % kept), "and resumes from the .part: %s" % world.ranges[n:])
    check(open(os.path.join(models, "model-Q4_K_M.gguf"), "rb").read() == good, "the resumed file equals the served one")


def with_ollama_library(port, models):
    try:
        import ollama
    except ImportError:
        print("note: this Python has no ollama library; its client checks skipped")
        return
    client = ollama.Client(host="http://127.0.0.1:%d" % port)
    statuses = [p.status for p in client.pull("hf.co/org/split:Q4_K_M", stream=True)]
    check(statuses[0] == "pulling manifest" and statuses[-1] == "success", "ollama library: a streamed pull: %s" % statuses)
    check("s-Q4_K_M.gguf" in model_files(models), "ollama library: the split model is joined into the folder")
    check(client.pull("hf.co/org/good:Q4_K_M").status == "success", "ollama library: a pull of an installed model")
    try:
        client.pull("hf.co/org/badsum:Q4_K_M", stream=False)
        check(False, "ollama library: a wrong checksum raises")
    except ollama.ResponseError as e:
        check("SHA-256" in str(e) and e.status_code == 500, "ollama library: a failed pull raises ResponseError (%s)" % e)


def model_by_hub_name(hearthd, tmp, models, hub_port):
    """hearthd --model takes the Hub names of pulled models, offline; one not pulled is an
    error that says how to pull it."""
    os.makedirs(tmp)
    d = Daemon(hearthd, tmp, models, hub_port, "--model", "hf.co/org/good:Q4_K_M")
    try:
        status, body, _ = d.request("GET", "/v1/models")
        ids = [m["id"] for m in json.loads(body)["data"]]
        check(ids == ["model-Q4_K_M"], "--model hf.co/org/good:Q4_K_M serves the file its pull chose: %s" % ids)
        status, _, _ = d.request("POST", "/api/show", {"model": "hf.co/org/good:Q4_K_M"})
        check(status == 200, "and requests may name it so (/api/show %d)" % status)
    finally:
        d.stop()
    for name in ("hf.co/org/never:Q4_K_M", "qwen3:8b"):
        cmd, env = daemon_command(hearthd, tmp, models, hub_port, "--model", name)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
        out = p.stdout + p.stderr
        check(p.returncode != 0 and "not installed" in out and "hearth pull " + name in out,
              "--model %s, not pulled, names hearth pull %s (rc %d): %s" % (name, name, p.returncode, out[-300:]))


def main():
    hearthd, make_synthetic = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        models = os.path.join(tmp, "models")
        os.makedirs(models)
        synthetic = os.path.join(models, "synthetic.gguf")
        subprocess.run([make_synthetic, "--out", synthetic], check=True, capture_output=True, timeout=HANG_GUARD_S)
        good = open(synthetic, "rb").read()
        world = World(good, b"GGUF")
        world.files[("org/slow", "model-Q4_K_M.gguf")] = good
        world.mode["org/slow"] = {"slow"}
        cdn = serve(make_handler(world, 0, False))
        hub = serve(make_handler(world, cdn.server_address[1], True))
        port = free_port()
        d = Daemon(hearthd, tmp, models, hub.server_address[1], "--listen-ollama", "127.0.0.1:%d" % port)
        try:
            status, lines, ctype = d.pull_lines("hf.co/org/good:Q4_K_M")
            check(status == 200 and ctype == "application/x-ndjson", "a pull streams NDJSON (%d %s)" % (status, ctype))
            check_progress(lines, good, "streamed pull")
            check(model_files(models) == ["model-Q4_K_M.gguf", "synthetic.gguf"], "the file is in the models folder")
            check(open(os.path.join(models, "model-Q4_K_M.gguf"), "rb").read() == good, "and equals the served one")
            check("model-Q4_K_M" in d.tags(), "the pulled model is listed at once")
            for name in ("model-Q4_K_M", "hf.co/org/good:Q4_K_M"):
                status, body, _ = d.request("POST", "/api/show", {"model": name})
                check(status == 200, "and served by name: %s (/api/show %d)" % (name, status))

            status, body, _ = d.request("POST", "/api/pull", {"model": "hf.co/org/good/sub/model-Q8_0.gguf",
                                                              "stream": False})
            check(status == 200 and json.loads(body) == {"status": "success"}, "stream false: one object (%s)" % body)

            status, lines, _ = d.pull_lines("hf.co/gated/secret:Q4_K_M")
            check(status == 200 and "error" in lines[-1] and "HF_TOKEN" in lines[-1]["error"],
                  "a refused pull ends its stream with an error line: %s" % lines[-1:])
            status, body, _ = d.request("POST", "/api/pull", {"model": "hf.co/org/badsum:Q4_K_M", "stream": False})
            err = json.loads(body)
            check(status == 500 and list(err) == ["error"] and "SHA-256" in err["error"],
                  "stream false: a failed pull is a 500 {\"error\"} (%d %s)" % (status, body))
            status, body, _ = d.request("POST", "/api/pull", {"model": "no-such-model"})
            check("unknown model" in body.decode(), "an unknown name says what names are taken: %s" % body[:200])
            status, body, _ = d.request("POST", "/api/pull", {"model": "x", "stream": "yes"})
            check(status == 400 and "stream" in json.loads(body)["error"], "a stream that is not a boolean is a 400")
            check("model-Q4_K_M.gguf" in model_files(models) and "secret" not in "".join(model_files(models)),
                  "failed pulls left nothing in the models folder")

            os.remove(os.path.join(models, "model-Q4_K_M.gguf"))
            cancel_on_hang_up(d, world, models, good)
            with_ollama_library(port, models)
        finally:
            d.stop()
            if "Sanitizer" in d.log() or "runtime error:" in d.log():
                sys.exit("FAIL: a sanitizer reported in hearthd:\n" + d.log())
        model_by_hub_name(hearthd, os.path.join(tmp, "d2"), models, hub.server_address[1])
    print("all /api/pull checks passed")


if __name__ == "__main__":
    main()

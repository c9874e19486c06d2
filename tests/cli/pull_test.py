"""hearth pull against a local imitation of the Hugging Face Hub (CI has no internet).

Two HTTP servers on localhost: the "Hub" answers the tree API and `resolve` (a 302 to the
second, the "CDN", on another port, as the real Hub sends LFS files to its CDN); the CDN
serves the bytes with Range requests. Repos play the faults: a gated repo (401 without
HF_TOKEN), a connection that breaks mid-file (once: resumed within the pull; always: the
pull fails and the next one resumes), a server that ignores Range, a wrong SHA-256, a file
whose header names an architecture hearth cannot run, a split model, an ambiguous
quantization. After every failure the models folder holds no model file.

usage: pull_test.py HEARTH MAKE_SYNTHETIC FETCH_MODEL_SCRIPT
"""
import fcntl
import hashlib
import http.server
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

HANG_GUARD_S = 60
TOKEN = "secret-token"


def gguf_with_arch(arch, pad_bytes):
    """A GGUF header naming arch (no tensors), then pad_bytes of filler."""
    def string(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 2)
    head += string("general.name") + struct.pack("<I", 8) + string("alien")
    head += string("general.architecture") + struct.pack("<I", 8) + string(arch)
    return head + bytes(pad_bytes)


def gguf_file(kvs, tensors):
    """A GGUF file: kvs as (key, type, payload) and 1-D F32 tensors as (name, floats)."""
    def string(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, kind, payload in kvs:
        out += string(key) + struct.pack("<I", kind) + payload
    offset, data = 0, b""
    for name, values in tensors:
        out += string(name) + struct.pack("<IQIQ", 1, len(values), 0, offset)
        blob = struct.pack("<%df" % len(values), *values)
        data += blob + bytes(-len(blob) % 32)
        offset = len(data)
    return out + bytes(-len(out) % 32) + data


def split_parts():
    """A model in two parts as llama.cpp's gguf-split writes them."""
    def split_kvs(no):
        return [("split.no", 2, struct.pack("<H", no)), ("split.count", 2, struct.pack("<H", 2)),
                ("split.tensors.count", 5, struct.pack("<i", 3))]
    arch = ("general.architecture", 8, struct.pack("<Q", 5) + b"llama")
    one = gguf_file([arch] + split_kvs(0), [("a", [1.0, 2.0, 3.0]), ("b", [4.0] * 40)])
    two = gguf_file(split_kvs(1), [("c", [5.0, 6.0])])
    return one, two


class World:
    """What the servers serve and what they saw."""

    def __init__(self, good, alien):
        self.lock = threading.Lock()
        self.files = {}  # (repo, path) -> bytes
        self.sha_override = {}  # (repo, path) -> a wrong sha256
        self.mode = {}  # repo -> set of "drop-once", "drop-always", "no-range"
        self.dropped = set()
        self.ranges = []  # Range headers the CDN received
        self.cdn_auth = []  # Authorization headers the CDN received
        self.alien_sent_whole = False
        self.slow_sent = {}  # repo -> bytes a "slow" repo's answers sent, summed
        self.slow_ended = []  # repos whose slow answer ended: ("whole" | "broken", repo)
        for repo in ("org/good", "org/resume", "org/norange", "org/flaky", "org/badsum", "gated/secret"):
            self.files[(repo, "model-Q4_K_M.gguf")] = good
        self.files[("org/good", "sub/model-Q8_0.gguf")] = good[:-7] + b"\x01" * 7
        self.files[("org/good", "mmproj-model-Q4_K_M.gguf")] = b"GGUF-not-chosen"
        self.files[("org/ambig", "a-Q4_K_M.gguf")] = good
        self.files[("org/ambig", "a-UD-Q4_K_M.gguf")] = good
        one, two = split_parts()
        self.files[("org/split", "s-Q4_K_M-00001-of-00002.gguf")] = one
        self.files[("org/split", "s-Q4_K_M-00002-of-00002.gguf")] = two
        self.files[("org/alien", "alien-Q4_K_M.gguf")] = alien
        self.files[("org/paged", "a-Q8_0.gguf")] = good
        self.files[("org/paged", "z-Q4_K_M.gguf")] = good  # on the listing's second page
        self.sha_override[("org/badsum", "model-Q4_K_M.gguf")] = "0" * 64
        self.mode = {"org/resume": {"drop-once"}, "org/norange": {"drop-once", "no-range"},
                     "org/flaky": {"drop-always"}}

    def listing(self, repo):
        out = [{"type": "file", "oid": "1" * 40, "size": 12, "path": ".gitattributes"},
               {"type": "directory", "oid": "2" * 40, "size": 0, "path": "sub"}]
        for (r, path), data in sorted(self.files.items()):
            if r != repo:
                continue
            sha = self.sha_override.get((r, path), hashlib.sha256(data).hexdigest())
            out.append({"type": "file", "oid": "3" * 40, "size": len(data), "path": path,
                        "lfs": {"oid": sha, "size": len(data), "pointerSize": 134}})
        return out


def make_handler(world, cdn_port, is_hub):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status, body=b"", headers=()):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            parts = self.path.split("?")[0].strip("/").split("/")
            if is_hub:
                self.hub(parts)
            else:
                self.cdn(parts)

        def hub(self, parts):
            repo = "/".join(parts[2:4]) if parts[:2] == ["api", "models"] else "/".join(parts[0:2])
            if repo.startswith("gated/") and self.headers.get("Authorization") != "Bearer " + TOKEN:
                return self.reply(401, b'{"error":"Access to model gated/secret is restricted."}')
            if parts[:2] == ["api", "models"] and parts[4:6] == ["tree", "main"]:
                if not any(r == repo for r, _ in world.files):
                    return self.reply(404, b'{"error":"Repository not found"}')
                listing, headers = world.listing(repo), [("Content-Type", "application/json")]
                if repo == "org/paged":  # one file a page, as the Hub pages long listings
                    page = 1 if "cursor=" not in self.path else int(self.path.split("cursor=")[1])
                    if page < len(listing):
                        nxt = "http://127.0.0.1:%d/api/models/%s/tree/main?recursive=true&cursor=%d" % (
                            self.server.server_address[1], repo, page + 1)
                        headers.append(("Link", '<%s>; rel="next"' % nxt))
                    listing = listing[page - 1:page]
                return self.reply(200, json.dumps(listing).encode(), headers)
            if len(parts) >= 5 and parts[2:4] == ["resolve", "main"]:
                path = "/".join(parts[4:])
                location = "http://127.0.0.1:%d/cdn/%s/%s" % (cdn_port, repo, path)
                return self.reply(302, b"", [("Location", location)])
            self.reply(404)

        def cdn(self, parts):
            repo, path = "/".join(parts[1:3]), "/".join(parts[3:])
            data = world.files.get((repo, path))
            if data is None:
                return self.reply(404)
            with world.lock:
                world.cdn_auth.append(self.headers.get("Authorization"))
                rng = self.headers.get("Range")
                world.ranges.append((repo, rng))
                mode = world.mode.get(repo, set())
                drop = "drop-always" in mode or ("drop-once" in mode and repo not in world.dropped)
                world.dropped.add(repo)
            if "error-503" in mode:
                return self.reply(503, b"busy")
            start = 0
            if rng and "no-range" not in mode:
                start = int(rng.split("=")[1].split("-")[0])
            if start:
                self.send_response(206)
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            body = data[start:]
            try:
                if "slow" in mode:  # 100 pieces, 50 ms apart: a download that takes 5 s
                    return self.send_slowly(world, repo, body)
                if drop:  # half of what is left, then the connection breaks
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.wfile.write(body)
                if repo == "org/alien":
                    world.alien_sent_whole = True
            except (BrokenPipeError, ConnectionResetError):
                pass

        def send_slowly(self, world, repo, body):
            step = max(1, len(body) // 100)
            try:
                for i in range(0, len(body), step):
                    self.wfile.write(body[i:i + step])
                    self.wfile.flush()
                    with world.lock:
                        world.slow_sent[repo] = world.slow_sent.get(repo, 0) + len(body[i:i + step])
                    time.sleep(0.05)
                world.slow_ended.append(("whole", repo))
            except (BrokenPipeError, ConnectionResetError):
                world.slow_ended.append(("broken", repo))
                self.close_connection = True

    return Handler


def serve(handler, tls=None):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls:  # (certificate, key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Runner:
    def __init__(self, hearth, models, hub_port, endpoint=None):
        self.hearth, self.models, self.hub_port = hearth, models, hub_port
        self.endpoint = endpoint or "http://127.0.0.1:%d" % hub_port
        self.env = {}

    def run(self, *args, token=None, program=None):
        env = dict(os.environ, HF_ENDPOINT=self.endpoint, HEARTH_MODELS=self.models, HEARTH_CLI=self.hearth)
        env.pop("SSL_CERT_FILE", None)
        env.update(self.env)
        env.pop("HF_TOKEN", None)
        if token:
            env["HF_TOKEN"] = token
        cmd = [program or self.hearth, *args]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
        # A failure the test expects must not hide a sanitizer's report (the ASan build).
        if "Sanitizer" in p.stderr or "runtime error:" in p.stderr:
            check(False, "a sanitizer reported on: " + " ".join(args), p)
        return p

    def model_files(self):
        if not os.path.isdir(self.models):
            return []
        return sorted(f for f in os.listdir(self.models) if not f.startswith("."))

    def parts(self):
        d = os.path.join(self.models, ".downloads")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []


def check(cond, what, proc=None):
    sys.stdout.flush()
    if not cond:
        detail = "" if proc is None else "\nrc=%d\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr)
        sys.exit("FAIL: " + what + detail)
    print("ok:", what)


def expect_failure(r, name, words, what):
    p = r.run("pull", name)
    check(p.returncode != 0 and all(w in p.stderr for w in words), what + " (says " + ", ".join(words) + ")", p)
    check(r.model_files() == [], what + ": nothing in the models folder", p)
    return p


def main():
    hearth, make_synthetic, fetch_model = sys.argv[1:4]
    tls_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "tls")
    cert, key = os.path.join(tls_dir, "localhost.crt"), os.path.join(tls_dir, "localhost.key")
    with tempfile.TemporaryDirectory() as tmp:
        good_path = os.path.join(tmp, "synthetic.gguf")
        subprocess.run([make_synthetic, "--out", good_path], check=True, capture_output=True, timeout=HANG_GUARD_S)
        good = open(good_path, "rb").read()
        world = World(good, gguf_with_arch("bogusarch", 32 << 20))
        cdn = serve(make_handler(world, 0, False))
        hub = serve(make_handler(world, cdn.server_address[1], True))
        models = os.path.join(tmp, "models")
        r = Runner(hearth, models, hub.server_address[1])

        # Errors before any download.
        expect_failure(r, "hf.co/gated/secret:Q4_K_M", ["gated/secret", "HF_TOKEN", "401"], "a gated repo without a token")
        expect_failure(r, "hf.co/org/good:Q5_K_S", ["Q5_K_S", "Q4_K_M", "Q8_0"], "a quantization the repo lacks lists those it has")
        expect_failure(r, "hf.co/org/ambig:q4_k_m", ["a-Q4_K_M.gguf", "a-UD-Q4_K_M.gguf"], "an ambiguous quantization names the candidates")
        expect_failure(r, "hf.co/org/missing:Q4_K_M", ["404"], "a repo that does not exist")
        check(world.ranges == [], "none of them downloaded a byte")

        # A wrong checksum: the part is deleted.
        expect_failure(r, "hf.co/org/badsum:Q4_K_M", ["SHA-256", "deleted"], "a wrong checksum")
        check(r.parts() == [], "a wrong checksum leaves no .part")

        # An architecture hearth cannot run: stopped after the header, long before the end.
        p = expect_failure(r, "hf.co/org/alien:Q4_K_M", ["bogusarch", "cannot run"], "an unsupported architecture")
        check(not world.alien_sent_whole, "the unsupported file was refused before it was all sent")
        check(r.parts() == [], "a refused architecture leaves no .part")

        # The good file, by quantization in any case; the token never reaches the CDN.
        p = r.run("pull", "hf.co/org/good:q4_k_m", token=TOKEN)
        check(p.returncode == 0, "pull by quantization", p)
        check(r.model_files() == ["model-Q4_K_M.gguf"], "the file is in the models folder under its own name")
        check(open(os.path.join(models, "model-Q4_K_M.gguf"), "rb").read() == good, "the pulled file equals the served one")
        check(all(a is None for a in world.cdn_auth), "Authorization is dropped on the redirect to the CDN")
        check(r.parts() == [], "a finished pull leaves no .part")
        p = r.run("pull", "hf.co/org/good:Q4_K_M")
        check(p.returncode == 0 and "already installed" in p.stdout, "pulling it again only verifies it", p)
        p = r.run("show", "hf.co/org/good:Q4_K_M")
        check(p.returncode == 0 and "llama" in p.stdout, "hearth show takes the name it was pulled by, offline", p)
        p = r.run("show", "hf.co/org/good:Q8_0")
        check(p.returncode != 0 and "hearth pull hf.co/org/good:Q8_0" in p.stderr, "a name not pulled says how to pull it", p)

        # The gated repo with the token.
        os.makedirs(os.path.join(tmp, "m2"))
        r2 = Runner(hearth, os.path.join(tmp, "m2"), hub.server_address[1])
        p = r2.run("pull", "hf.co/gated/secret:Q4_K_M", token=TOKEN)
        check(p.returncode == 0, "a gated repo with HF_TOKEN", p)

        # A file by path (in a folder of the repo), and a resolve URL.
        p = r.run("pull", "hf.co/org/good/sub/model-Q8_0.gguf")
        check(p.returncode == 0 and "model-Q8_0.gguf" in r.model_files(), "pull by file path", p)
        p = r.run("rm", "model-Q8_0")
        check(p.returncode == 0 and "model-Q8_0.gguf" not in r.model_files(), "hearth rm deletes it", p)
        p = r.run("rm", good_path)
        check(p.returncode != 0 and "not in the models folder" in p.stderr and os.path.exists(good_path),
              "hearth rm refuses a file outside the models folder", p)
        url = "http://127.0.0.1:%d/org/good/resolve/main/sub/model-Q8_0.gguf" % hub.server_address[1]
        p = r.run("pull", url)
        check(p.returncode == 0 and "model-Q8_0.gguf" in r.model_files(), "pull by resolve URL", p)

        # A split model: both parts verified, then joined into one file.
        r8 = Runner(hearth, os.path.join(tmp, "m8"), hub.server_address[1])
        p = r8.run("pull", "hf.co/org/split:Q4_K_M")
        check(p.returncode == 0 and r8.model_files() == ["s-Q4_K_M.gguf"] and "joining 2 parts" in p.stderr,
              "a split model is joined into one file", p)
        check(r8.parts() == [], "its parts are deleted after the join")
        joined = open(os.path.join(r8.models, "s-Q4_K_M.gguf"), "rb").read()
        check(struct.unpack("<QQ", joined[8:24]) == (3, 1), "the joined file has the 3 tensors and the metadata without split.*")
        check(struct.pack("<2f", 5.0, 6.0) in joined and struct.pack("<3f", 1.0, 2.0, 3.0) in joined, "with every part's data")
        p = r8.run("show", "s-Q4_K_M")
        check("llama" in p.stdout, "hearth show reads the joined file", p)

        # HTTPS: the Hub's certificate is verified (trusted here through SSL_CERT_FILE), its
        # name too; an untrusted or misnamed one is refused before anything is sent.
        tls_hub = serve(make_handler(world, cdn.server_address[1], True), tls=(cert, key))
        port = tls_hub.server_address[1]
        r9 = Runner(hearth, os.path.join(tmp, "m9"), port, "https://localhost:%d" % port)
        p = r9.run("pull", "hf.co/org/good:Q4_K_M")
        check(p.returncode != 0 and "certificate" in p.stderr and r9.model_files() == [],
              "https: a certificate the system does not trust is refused", p)
        r9.env["SSL_CERT_FILE"] = cert
        p = r9.run("pull", "hf.co/org/good:Q4_K_M")
        check(p.returncode == 0 and r9.model_files() == ["model-Q4_K_M.gguf"], "https: a trusted certificate for the name", p)
        r10 = Runner(hearth, os.path.join(tmp, "m10"), port, "https://127.0.0.1:%d" % port)
        r10.env["SSL_CERT_FILE"] = cert
        p = r10.run("pull", "hf.co/org/good:Q4_K_M")
        check(p.returncode != 0 and "certificate" in p.stderr and r10.model_files() == [],
              "https: a trusted certificate for another name is refused", p)

        # A listing in pages (Link: rel="next"): the file on the last page is found.
        r7 = Runner(hearth, os.path.join(tmp, "m7"), hub.server_address[1])
        p = r7.run("pull", "hf.co/org/paged:Q4_K_M")
        check(p.returncode == 0 and r7.model_files() == ["z-Q4_K_M.gguf"], "a paged listing is read to its end", p)

        # hearth-fetch-model hands Hub names to hearth pull.
        r6 = Runner(hearth, os.path.join(tmp, "m6"), hub.server_address[1])
        p = r6.run("hf.co/org/good/sub/model-Q8_0.gguf", program=fetch_model)
        check(p.returncode == 0 and r6.model_files() == ["model-Q8_0.gguf"], "hearth-fetch-model pulls a Hub name", p)

        # hearth show reads the pulled file.
        p = r.run("show", "model-Q4_K_M")
        check(p.returncode == 0 and "llama" in p.stdout and "context" in p.stdout, "hearth show", p)

        # A connection broken mid-file once: resumed with a Range request within the pull.
        r3 = Runner(hearth, os.path.join(tmp, "m3"), hub.server_address[1])
        p = r3.run("pull", "hf.co/org/resume:Q4_K_M")
        check(p.returncode == 0 and "resuming" in p.stderr, "a broken connection is resumed", p)
        resumed = [rng for repo, rng in world.ranges if repo == "org/resume"]
        check(resumed[0] is None and resumed[1] and resumed[1] != "bytes=0-", "the second request asked for the rest: %s" % resumed)
        check(open(os.path.join(r3.models, "model-Q4_K_M.gguf"), "rb").read() == good, "the resumed file equals a straight one byte for byte")

        # A server that ignores Range: the pull starts over and still ends right.
        r5 = Runner(hearth, os.path.join(tmp, "m5"), hub.server_address[1])
        p = r5.run("pull", "hf.co/org/norange:Q4_K_M")
        check(p.returncode == 0 and "starting over" in p.stderr, "a server that ignores Range", p)
        check(open(os.path.join(r5.models, "model-Q4_K_M.gguf"), "rb").read() == good, "and the file is still right")

        # A connection that always breaks: the pull fails, the .part stays, the next pull resumes.
        r4 = Runner(hearth, os.path.join(tmp, "m4"), hub.server_address[1])
        p = r4.run("pull", "hf.co/org/flaky:Q4_K_M")
        check(p.returncode != 0 and "resume" in p.stderr and r4.model_files() == [], "a connection that always breaks fails the pull", p)
        part = os.path.join(r4.models, ".downloads", "model-Q4_K_M.gguf.part")
        kept = os.path.getsize(part)
        check(0 < kept < len(good), "its .part stays in the download area (%d bytes)" % kept)
        with open(part, "rb") as held:  # another pull of the same file holds the part
            fcntl.flock(held, fcntl.LOCK_EX)
            p = r4.run("pull", "hf.co/org/flaky:Q4_K_M")
            check(p.returncode != 0 and "another hearth pull" in p.stderr and os.path.getsize(part) == kept,
                  "a second pull of the same file is refused and leaves the part alone", p)
        world.mode["org/flaky"] = {"error-503"}
        p = r4.run("pull", "hf.co/org/flaky:Q4_K_M")
        check(p.returncode != 0 and "503" in p.stderr and os.path.getsize(part) == kept,
              "a server error (503) fails the pull after its tries and keeps the part", p)
        world.mode["org/flaky"] = set()
        n_before = len(world.ranges)
        p = r4.run("pull", "hf.co/org/flaky:Q4_K_M")
        check(p.returncode == 0, "the next pull finishes it", p)
        check(world.ranges[n_before][1] == "bytes=%d-" % kept, "and it resumed from where the .part ended (%d bytes)" % kept)
        check(open(os.path.join(r4.models, "model-Q4_K_M.gguf"), "rb").read() == good, "the file resumed across pulls equals the original")
        check(r4.parts() == [], "no .part is left after it")
    print("all pull checks passed")


if __name__ == "__main__":
    main()

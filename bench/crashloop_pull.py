"""The crash loop's new state (issue 47, item 4): a model download cut by the kill, and the
per-user accounting of the disk cache.

Downloads: a local imitation of the Hugging Face Hub (tests/cli/pull_test.py's World: the tree
API, `resolve` redirecting to a "CDN" that honours Range) serves one GGUF file slowly (100
pieces, 50 ms apart; in two rounds of five, at once instead, so that kills also land in the
check, the rename and after the end), and HF_ENDPOINT points hearthd at it; HEARTH_MODELS is a folder of the
loop's own. Each round, once the daemon is up, a client POSTs /api/pull for it, so the round's
SIGKILL lands anywhere in the download: before its first byte, mid-file, or in its check and
rename. After the restart:
  * the models folder holds the model only whole (byte for byte the served file), never a
    part of it, and /api/tags and /v1/models list it only then;
  * the .part left in <models>/.downloads is a prefix of the served file (what resumes);
  * the next pull resumes it (its first request to the CDN asks for bytes=<part size>-, or
    none when the part was already whole) or, having verified it, finishes from it; the file
    it installs equals the served one. A finished model is deleted at the start of the next
    round, so every round downloads.

Accounting: right after each start (nothing asked yet), GET /api/cache as root must agree
with the index: the directory's entries and bytes, and each owner's bytes in the directory
(the figures the fair shares and --cache-user-max-bytes evict by), and no owner past the
quota when the round has one.
"""
import json
import os
import sqlite3
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "cli"))
from pull_test import World, gguf_with_arch, make_handler, serve  # noqa: E402

REPO, FILE = "org/slow", "model-Q4_K_M.gguf"
NAME = "hf.co/%s:Q4_K_M" % REPO
LISTED = "model-Q4_K_M"


class Pulls:
    def __init__(self, models_dir, file_bytes, rng):
        self.rng = rng
        self.models = models_dir
        self.data = gguf_with_arch("llama", file_bytes)
        self.world = World(self.data, b"GGUF")
        self.world.files[(REPO, FILE)] = self.data
        self.world.mode[REPO] = {"slow"}
        self.cdn = serve(make_handler(self.world, 0, False))
        self.hub = serve(make_handler(self.world, self.cdn.server_address[1], True))
        for server in (self.cdn, self.hub):  # a client killed mid-answer is the point, not an error
            server.handle_error = lambda request, address: None
        os.environ["HF_ENDPOINT"] = "http://127.0.0.1:%d" % self.hub.server_address[1]
        os.environ["HEARTH_MODELS"] = models_dir
        os.environ.pop("HF_TOKEN", None)
        self.thread = None
        self.result = None
        self.expect_from = None  # (index into world.ranges, part size) for the pull running
        self.stats = {"pulls": 0, "finished": 0, "cut": 0, "parts_after_kill": 0, "resumed": 0,
                      "verified_whole_part": 0, "served_partial": 0, "bad_parts": 0, "bad_resumes": 0,
                      "accounting_checks": 0, "checks_of_several_owners": 0, "accounting_mismatches": 0}

    def part_path(self):
        return os.path.join(self.models, ".downloads", FILE + ".part")

    def final_path(self):
        return os.path.join(self.models, FILE)

    def after_kill(self):
        """The round's daemon is dead: its pull's client ends with it."""
        if self.thread:
            self.thread.join(60)
            self.thread = None
            if self.result != "success":
                self.stats["cut"] += 1

    def after_start(self, d, round_no, problem):
        """Checks what the killed pull left (see the module's doc), then starts the next one."""
        final, part = self.final_path(), self.part_path()
        listed = any(LISTED in m for m in self.listing(d))
        if os.path.exists(final):
            if open(final, "rb").read() != self.data:
                self.stats["served_partial"] += 1
                problem("round %d: %s is in the models folder but is not the served file (%d of %d bytes)" %
                        (round_no, FILE, os.path.getsize(final), len(self.data)))
        elif listed:
            self.stats["served_partial"] += 1
            problem("round %d: %s is listed though no whole file is installed" % (round_no, LISTED))
        self.check_resume(round_no, problem)
        size = os.path.getsize(part) if os.path.exists(part) else 0
        if size:
            self.stats["parts_after_kill"] += 1
            if size > len(self.data) or open(part, "rb").read() != self.data[:size]:
                self.stats["bad_parts"] += 1
                problem("round %d: the .part (%d bytes) is not a prefix of the served file" % (round_no, size))
        if os.path.exists(final):
            os.remove(final)  # so that this round downloads again
        self.world.mode[REPO] = {"slow"} if self.rng.random() < 0.6 else set()
        self.expect_from = (len(self.world.ranges), size)
        self.result = None
        self.stats["pulls"] += 1
        self.thread = threading.Thread(target=self.pull, args=(d,), daemon=True)
        self.thread.start()

    def pull(self, d):
        try:
            status, body = d.request("POST", "/api/pull", json.dumps({"model": NAME, "stream": False}).encode())
            self.result = json.loads(body).get("status") if status == 200 else "status %d" % status
            if self.result == "success":
                self.stats["finished"] += 1
        except (OSError, ValueError) as e:
            self.result = repr(e)

    def check_resume(self, round_no, problem):
        """The previous pull, if it sent anything to the CDN, started where its .part ended."""
        if self.expect_from is None:
            return
        first, size = self.expect_from
        sent = [r for repo, r in self.world.ranges[first:] if repo == REPO]
        if size and sent:
            if sent[0] == "bytes=%d-" % size:
                self.stats["resumed"] += 1
            else:
                self.stats["bad_resumes"] += 1
                problem("round %d: a .part of %d bytes was resumed with Range %r" % (round_no, size, sent[0]))
        elif size and not sent and self.result == "success":
            self.stats["verified_whole_part"] += 1
        elif not size and sent and sent[0] is not None:
            self.stats["bad_resumes"] += 1
            problem("round %d: no .part, yet the pull asked for Range %r" % (round_no, sent[0]))

    @staticmethod
    def listing(d):
        names = []
        for path, key, field in (("/api/tags", "models", "name"), ("/v1/models", "data", "id")):
            status, body = d.request("GET", path)
            if status == 200:
                names += [m.get(field, "") for m in json.loads(body).get(key, [])]
        return names

    def check_accounting(self, d, cache_dir, quota, round_no, problem):
        """/api/cache (root) against the index, right after a start."""
        status, body = d.request("GET", "/api/cache")
        if status != 200:
            return
        api = json.loads(body)
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(cache_dir, "index.sqlite"), uri=True)
        try:
            entries, total = db.execute("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM chunks").fetchone()
            owners = dict(db.execute("SELECT owner, SUM(bytes) FROM chunks GROUP BY owner").fetchall())
        finally:
            db.close()
        self.stats["accounting_checks"] += 1
        self.stats["checks_of_several_owners"] += len(owners) > 1
        disk = api["disk"]
        seen = {o["uid"]: o["disk_directory_bytes"] for o in api.get("owners", []) if o["disk_directory_bytes"]}
        wrong = []
        if (disk["entries"], disk["bytes"]) != (entries, total):
            wrong.append("directory: api %d entries %d bytes, index %d entries %d bytes" %
                         (disk["entries"], disk["bytes"], entries, total))
        if seen != owners:
            wrong.append("owners' bytes: api %s, index %s" % (seen, owners))
        if quota and any(b > quota for b in owners.values()):
            wrong.append("an owner past the quota %d: %s" % (quota, owners))
        if wrong:
            self.stats["accounting_mismatches"] += 1
            problem("round %d: the cache's accounting disagrees with the index: %s" % (round_no, "; ".join(wrong)))

    def failed(self):
        s = self.stats
        return s["served_partial"] + s["bad_parts"] + s["bad_resumes"] + s["accounting_mismatches"]

    def summary(self):
        s = self.stats
        print("downloads: %d pulls started, %d finished, %d cut by the kill; %d .part files left, %d resumed "
              "from their end, %d whole parts verified and installed; served partially %d, bad parts %d, "
              "bad resumes %d" % (s["pulls"], s["finished"], s["cut"], s["parts_after_kill"], s["resumed"],
                                  s["verified_whole_part"], s["served_partial"], s["bad_parts"], s["bad_resumes"]))
        print("accounting: %d checks of /api/cache against the index after a start (%d with more than one "
              "owner in the index), %d mismatches" %
              (s["accounting_checks"], s["checks_of_several_owners"], s["accounting_mismatches"]))

    def close(self):
        self.cdn.shutdown()
        self.hub.shutdown()

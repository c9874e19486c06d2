#!/usr/bin/env python3
"""The README's first command, `scripts/run`, as a newcomer runs it, in a throwaway home.

HOME and every XDG folder are fresh: no socket, no saved chat, no cache, no config (as root,
whose daemon is the system-wide one, its socket and cache are put there too). The
models folder holds only a link to the default model already fetched, and xgrammar, which
scripts/setup builds from source, is the one this machine built (the two things taken from
it: a 470 MB download and a 3-minute build are not what this checks); the build folder is
the one under test (scripts/run builds its two programs there, which ninja finds up to
date). The script must set up, start hearthd on the default socket with no --model, answer
the demo question and the follow-up, and exit 0; the follow-up must find the first turn in
the prompt cache's memory tier. hearthd, which scripts/run leaves running by design, is
stopped with its process group.

  scripts_run_test.py --source DIR --build DIR
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hearthd_process import default_chat_model_or_skip  # noqa: E402

LIMIT_S = 900  # setup (a no-op here), an up-to-date build, two answers of up to 512 tokens


def deps_dir():
    """Where scripts/build-deps put xgrammar for this machine's builds."""
    return os.environ.get("HEARTH_DEPS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hearth", "deps")


def fresh_env(home, build, models):
    deps = deps_dir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "HEARTH_")) and k != "HOME"}
    env["HOME"] = home
    for name in ("DATA", "STATE", "CACHE", "CONFIG", "RUNTIME"):
        path = os.path.join(home, "xdg-" + name.lower())
        os.makedirs(path, mode=0o700)
        env["XDG_%s_HOME" % name if name != "RUNTIME" else "XDG_RUNTIME_DIR"] = path
    os.makedirs(os.path.join(env["XDG_DATA_HOME"], "hearth", "models"))
    for f in models:
        os.symlink(f, os.path.join(env["XDG_DATA_HOME"], "hearth", "models", os.path.basename(f)))
    env["HEARTH_BUILD_DIR"] = build
    if os.path.isdir(deps):
        env["HEARTH_DEPS_DIR"] = deps  # built already (2-3 min): scripts/setup finds it
    if os.geteuid() == 0:
        # root's hearthd is the system-wide one: /run/hearth/hearth.sock and /var/cache/hearth, whatever
        # HOME says. The same daemon, kept off the machine's.
        env["HEARTH_SOCKET"] = os.path.join(home, "hearth.sock")
        env["HEARTH_CACHE_DIR"] = os.path.join(home, "cache")
    return env


def stop_group(pgid):
    """SIGTERM to what scripts/run left running (hearthd), then SIGKILL after 30 s."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def check_output(out):
    problems = []
    if "run: first answer" not in out:
        problems.append("no first answer")
    stats = re.findall(r"prompt tokens\s+(\d+) \(cached (\d+): (\d+) memory", out)
    if len(stats) != 2:
        problems.append("expected the stats of two answers, found %d" % len(stats))
    else:
        first, follow = stats
        if int(first[1]) != 0:
            problems.append("the first answer found a cache in a fresh home: %s" % (first,))
        if int(follow[2]) == 0:
            problems.append("the follow-up found nothing of the first turn in memory: %s" % (follow,))
        elif int(follow[2]) <= int(first[0]):
            problems.append("the follow-up's memory hit (%s) does not go past the first prompt (%s)"
                            % (follow[2], first[0]))
    if len(re.findall(r"generated\s+[1-9]\d* tokens", out)) != 2:
        problems.append("an answer generated no tokens")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    model = default_chat_model_or_skip()
    with tempfile.TemporaryDirectory(prefix="hearth-run-") as home:
        env = fresh_env(home, os.path.abspath(args.build), [model])
        started = time.monotonic()
        proc = subprocess.Popen(["bash", "scripts/run"], cwd=args.source, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            stop_group(proc.pid)
            out, _ = proc.communicate()
            print(out)
            print("FAIL: scripts/run did not finish in %d s" % LIMIT_S)
            return 1
        finally:
            stop_group(proc.pid)
        print(out)
        print("scripts/run: exit %d after %.0f s" % (proc.returncode, time.monotonic() - started))
        problems = check_output(out) if proc.returncode == 0 else ["exit status %d" % proc.returncode]
        for p in problems:
            print("FAIL: " + p)
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

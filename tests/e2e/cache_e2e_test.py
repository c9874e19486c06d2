"""The prompt cache end to end on the default model (hearthd over its Unix socket):

- a 2000+-token prompt gives the same greedy output cold, from memory, and from disk
  after a restart (SIGTERM flushes the writer);
- flipped, truncated and swapped chunk files are detected, deleted and recomputed, and
  the output does not change;
- 20 rounds of SIGKILL at random moments while chunks are written: after each restart
  the index and the files agree exactly and the output equals a cache-less daemon's;
- a small budget keeps the chunk files under it;
- eight clients sending one long system prompt at once prefill it once;
- a chat's second turn prefills only the new message and its template tokens;
- /api/cache/warm persists a system prompt that a later chat then finds.
"""
import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time

from hearthd_process import (CacheDaemon as Daemon, cached, check_consistency, chunk_files, gemma_model_or_skip,
                             long_prompt, text_of)

CHUNK_TOKENS = 16


def check_restart_and_disk_hit(args, model, cache_dir):
    prompt = long_prompt(1, 104)
    d = Daemon(args.hearthd, model, cache_dir)
    cold = d.complete(prompt)
    n = cold["usage"]["prompt_tokens"]
    assert n >= 2000, n
    assert cached(cold) == (0, 0, n), cached(cold)
    mem = d.complete(prompt)
    assert text_of(mem) == text_of(cold), (text_of(mem), text_of(cold))
    assert cached(mem) == (n - 1, 0, 1), cached(mem)
    # Stopped right after the answer, most of its ~130 chunks still queued: SIGTERM writes
    # them all. (Until the writer's drain had a 5 s deadline, a slow disk lost the rest here:
    # the one failure of this test that left no log.)
    log = d.stop()
    n_chunks = check_consistency(cache_dir)
    assert n_chunks >= n // CHUNK_TOKENS and "not written" not in log, (n_chunks, log[-3000:])

    d = Daemon(args.hearthd, model, cache_dir)
    disk = d.complete(prompt)
    assert text_of(disk) == text_of(cold), (text_of(disk), text_of(cold))
    restored = (n - 1) // CHUNK_TOKENS * CHUNK_TOKENS
    assert cached(disk) == (0, restored, n - restored), cached(disk)
    print("%d tokens: cold ttft %.0f ms, memory %.0f ms, disk after restart %.0f ms; %r" %
          (n, cold["timings"]["ttft_ms"], mem["timings"]["ttft_ms"], disk["timings"]["ttft_ms"], text_of(cold)))
    d.stop()
    return prompt, text_of(cold), restored


def check_damaged_chunks(args, model, cache_dir, prompt, expected, restored):
    files = chunk_files(cache_dir)
    rng = random.Random(7)
    picked = rng.sample(files, 4)
    # One payload byte flipped, in the first section (full-attention layers), which every
    # restore reads: the second (sliding-window layers) is read only for chunks in the
    # window of the prompt's end, so damage there may rightly go unread.
    first_payload_byte = 144 + 4 * CHUNK_TOKENS + 100
    with open(picked[0], "r+b") as f:
        f.seek(first_payload_byte)
        b = f.read(1)
        f.seek(first_payload_byte)
        f.write(bytes([b[0] ^ 0x40]))
    with open(picked[1], "r+b") as f:  # truncated
        f.truncate(os.path.getsize(picked[1]) // 2)
    a, b = open(picked[2], "rb").read(), open(picked[3], "rb").read()  # swapped
    open(picked[2], "wb").write(b)
    open(picked[3], "wb").write(a)
    damaged = {p: open(p, "rb").read() for p in picked}

    # Restores stop at the first damaged chunk of the chain; it is deleted, recomputed and
    # written again, so each restart gets one damaged chunk further.
    failures = 0
    for attempt in range(6):
        d = Daemon(args.hearthd, model, cache_dir)
        r = d.complete(prompt)
        failures += d.cache()["disk"]["checksum_failures"]
        d.stop()
        assert text_of(r) == expected, (attempt, text_of(r), expected)
        if cached(r)[1] == restored:
            break
    else:
        raise AssertionError("the damaged chunks were not replaced")
    # The truncated file is caught at start (its size differs from its row's) and deleted
    # there; the others when a request reads them. None of the damaged bytes remain.
    assert failures >= 3, failures
    for p, data in damaged.items():
        assert not os.path.exists(p) or open(p, "rb").read() != data, p
    check_consistency(cache_dir)
    print("damaged chunks: 4 found and replaced over %d restarts (%d on reading); output unchanged" %
          (attempt, failures))

    # A garbage index is rebuilt (the chunk files are indexed again from their headers).
    with open(os.path.join(cache_dir, "index.sqlite"), "wb") as f:
        f.write(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(os.path.join(cache_dir, "index.sqlite" + suffix)):
            os.remove(os.path.join(cache_dir, "index.sqlite" + suffix))
    d = Daemon(args.hearthd, model, cache_dir)
    r = d.complete(prompt)
    d.stop()
    assert text_of(r) == expected, (text_of(r), expected)
    check_consistency(cache_dir)
    print("garbage index: rebuilt; %d tokens from disk; output unchanged" % cached(r)[1])


def check_sigkill_rounds(args, model, rounds):
    cache_dir = tempfile.mkdtemp(prefix="hearth-cache-kill-")
    ref_dir = tempfile.mkdtemp(prefix="hearth-cache-ref-")
    ref = Daemon(args.hearthd, model, ref_dir, "--no-disk-cache")
    rng = random.Random(11)
    base = long_prompt(2, 14)  # ~300 tokens shared by every round
    try:
        for i in range(rounds):
            prompt = base + " " + long_prompt(100 + i, 9)  # + ~200 new tokens each round
            expected = text_of(ref.complete(prompt))
            d = Daemon(args.hearthd, model, cache_dir)
            t = threading.Thread(target=lambda: _ignore_errors(d.complete, prompt), daemon=True)
            t.start()
            time.sleep(rng.uniform(0.0, 1.5))
            d.kill()
            t.join(30)
            d = Daemon(args.hearthd, model, cache_dir)
            r = d.complete(prompt)
            assert text_of(r) == expected, (i, text_of(r), expected)
            d.stop()
            n = check_consistency(cache_dir)
            print("SIGKILL round %d: %d chunks indexed, consistent; cached %s" % (i, n, cached(r)))
    finally:
        ref.stop()
        shutil.rmtree(cache_dir, ignore_errors=True)
        shutil.rmtree(ref_dir, ignore_errors=True)


def _ignore_errors(fn, *a):
    try:
        fn(*a)
    except Exception:  # pylint: disable=broad-except
        pass


def check_budget(args, model):
    cache_dir = tempfile.mkdtemp(prefix="hearth-cache-budget-")
    budget = 5 << 20
    try:
        d = Daemon(args.hearthd, model, cache_dir, "--cache-max-bytes", str(budget))
        for seed in range(3):
            d.complete(long_prompt(200 + seed, 20), max_tokens=1)
        d.stop()
        total = sum(os.path.getsize(p) for p in chunk_files(cache_dir))
        n = check_consistency(cache_dir)
        assert 0 < total <= budget, (total, budget)
        d = Daemon(args.hearthd, model, cache_dir, "--cache-max-bytes", str(budget))
        stats = d.cache()["disk"]
        d.stop()
        assert stats["bytes"] <= budget and stats["budget_bytes"] == budget, stats
        print("budget %d bytes: %d chunks, %d bytes on disk" % (budget, n, total))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def check_shared_system_prompt_and_turns(args, model):
    cache_dir = tempfile.mkdtemp(prefix="hearth-cache-chat-")
    try:
        d = Daemon(args.hearthd, model, cache_dir, "--parallel", "8")
        system = "You are a careful assistant. Facts you know: " + long_prompt(3, 50)
        results = [None] * 8

        def ask(i):
            results[i] = d.chat([{"role": "system", "content": system},
                                 {"role": "user", "content": "Question %d: which item counts the most stones?" % i}],
                                max_tokens=4)
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        prefilled = [cached(r)[2] for r in results]
        n_system = results[0]["usage"]["prompt_tokens"] - 20  # the question and template are ~20
        assert n_system > 900, n_system
        # One client computes the system prompt; the others only their question, template
        # tokens and at most one 16-token block of the system prompt's end.
        assert sum(prefilled) <= max(prefilled) + 7 * (40 + 16), prefilled
        print("8 clients, one %d-token system prompt: prefilled %s tokens" % (n_system, prefilled))

        # A second turn re-sends the first; only the new message is computed (and the
        # answer's last token, which was sampled but never run through the model).
        msgs = [{"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "Tell me about rivers and hills."}]
        t1 = d.chat(msgs, max_tokens=12)
        msgs += [{"role": "assistant", "content": t1["choices"][0]["message"]["content"]},
                 {"role": "user", "content": "And about foxes?"}]
        t2 = d.chat(msgs, max_tokens=4)
        p1, c1, p2 = t1["usage"]["prompt_tokens"], t1["usage"]["completion_tokens"], t2["usage"]["prompt_tokens"]
        assert cached(t2)[2] == p2 - (p1 + c1 - 1), (cached(t2), p1, c1, p2)
        print("second turn: %d of %d prompt tokens computed" % (cached(t2)[2], p2))

        # Warming a system prompt persists it; a chat with it then starts from the cache.
        warm_system = "You are hearth's warm assistant. " + long_prompt(4, 25)
        status, w = d.post_json("/api/cache/warm", {"messages": [{"role": "system", "content": warm_system}]})
        assert status == 200 and w["tokens"] > 450 and w["finish_reason"] == "warmed", (status, w)
        r = d.chat([{"role": "system", "content": warm_system}, {"role": "user", "content": "Hello?"}], max_tokens=2)
        assert cached(r)[0] >= w["tokens"] - 16, (cached(r), w)
        d.stop()
        check_consistency(cache_dir)
        print("warm: %d tokens warmed, the chat then computed %d" % (w["tokens"], cached(r)[2]))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--rounds", type=int, default=20, help="SIGKILL rounds")
    ap.add_argument("--parts", default="restart,budget,chat,kill", help="which checks to run (for debugging)")
    args = ap.parse_args()
    parts = args.parts.split(",")
    model = gemma_model_or_skip()
    if "restart" in parts:
        cache_dir = tempfile.mkdtemp(prefix="hearth-cache-e2e-")
        try:
            prompt, expected, restored = check_restart_and_disk_hit(args, model, cache_dir)
            check_damaged_chunks(args, model, cache_dir, prompt, expected, restored)
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
    if "budget" in parts:
        check_budget(args, model)
    if "chat" in parts:
        check_shared_system_prompt_and_turns(args, model)
    if "kill" in parts:
        check_sigkill_rounds(args, model, args.rounds)
    print("ok")


if __name__ == "__main__":
    sys.exit(main())

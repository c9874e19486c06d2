#!/usr/bin/env python3
"""Tokenizer throughput next to llama.cpp's (not a test).

Makes the ~1 MB benchmark text (README, docs/ and engine/ sources of this repository, in
sorted order, repeated and cut to 1,000,000 bytes at a character boundary), then times
llama.cpp's tokenizer on it from Python (llama-cpp-python, or llama-cpp-py-sync's libllama:
see tests/reference/make_bpe_fixtures.py; special tokens parsed, no BOS; best of N calls,
timed around the call) and, when given, hearth's bench/tokenize_bench.

    /tmp/llvenv/bin/python bench/tokenize_bench.py MODEL.gguf [--text OUT.txt]
        [--hearth build/engine/tokenizer/tokenize_bench] [--runs 5]
"""

import argparse
import glob
import os
import subprocess
import sys
import time


def make_text(path, size=1_000_000):
    files = ["README.md"] + sorted(glob.glob("docs/*.md")) + sorted(
        glob.glob("engine/**/*.cpp", recursive=True) + glob.glob("engine/**/*.h", recursive=True))
    parts = [open(f, "rb").read() for f in files]
    data = b""
    while len(data) < size:
        for p in parts:
            data += p
    data = data[:size]
    while data and (data[-1] & 0xC0) == 0x80:  # do not end inside a character
        data = data[:-1]
    if data and data[-1] >= 0xC0:
        data = data[:-1]
    open(path, "wb").write(data)
    return data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--text", default="/tmp/hearth_tokenize_bench.txt")
    ap.add_argument("--hearth", default="")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    data = make_text(args.text)
    mb = len(data) / 1e6

    # llama-cpp-python, or llama-cpp-py-sync's libllama (see make_bpe_fixtures.py).
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "reference"))
    from make_bpe_fixtures import oracle
    llama = oracle()
    tokenize = llama.load(args.model)
    best = 1e30
    n = 0
    for _ in range(args.runs):
        t0 = time.perf_counter()
        n = len(tokenize(data))
        best = min(best, time.perf_counter() - t0)
    print(f"llama.cpp ({llama.info['binding']} {llama.info['version']}): {mb:.2f} MB -> {n} tokens; "
          f"best of {args.runs}: {best * 1e3:.1f} ms = {mb / best:.2f} MB/s")
    if args.hearth:
        out = subprocess.run([args.hearth, args.model, args.text, "--runs", str(args.runs)],
                             capture_output=True, text=True, check=True).stdout.strip()
        print(f"hearth:    {out}")
        ids = subprocess.run([args.hearth, args.model, args.text, "--ids"],
                             capture_output=True, text=True, check=True).stdout.split()
        ref = tokenize(data)
        print("same ids as llama.cpp:", [int(i) for i in ids] == ref)


if __name__ == "__main__":
    main()

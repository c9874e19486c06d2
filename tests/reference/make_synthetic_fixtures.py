#!/usr/bin/env python3
"""Reference logits for hearth's synthetic models, made by llama.cpp itself.

Runs hearth-make-synthetic (tests/tools/) to write tiny random-weight models, evaluates fixed
token sequences on each with llama-cpp-python, and stores every position's full logit vector
(the vocabulary has 320 entries) plus 16 greedy tokens with their top-2 gaps, the generator's
arguments and the GGUF's XXH3-128 content hash (printed by the tool). tests/model/synthetic_test.cpp regenerates the same files
with the same generator code (checking that hash) and compares hearth's logits.

Needs llama-cpp-python (a test oracle only: never a dependency of hearth or of CI) and numpy:

    ninja -C build hearth-make-synthetic
    /tmp/llvenv/bin/python tests/reference/make_synthetic_fixtures.py build/tests/tools/hearth-make-synthetic

Writes tests/fixtures/synthetic_{llama,gemma3,qwen2}_reference.json (--arch: only those named).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import llama_cpp
from llama_cpp import Llama

N_GEN = 16
MODELS = {
    "llama": [("f32", 1), ("f16", 2), ("q8_0", 3), ("q4_0", 4)],
    "gemma3": [("f32", 1), ("q8_0", 2)],
    "qwen2": [("f32", 1), ("q8_0", 2)],
}
TEXT = "the cat sat on the mat, and it is the end of it. Ünïcode ok?"


def sequences(bos, n_vocab):
    rng = np.random.default_rng(1234)
    return [
        ("bos_only", [bos]),
        ("random_24", [bos] + [int(x) for x in rng.integers(3, n_vocab, 23)]),
        ("random_40_no_bos", [int(x) for x in rng.integers(3, n_vocab, 40)]),
    ]


def r(x):
    return round(float(x), 4)


def run_model(tool, arch, wtype, seed, tmp, threads):
    path = os.path.join(tmp, f"{arch}_{wtype}.gguf")
    args = ["--arch", arch, "--type", wtype, "--seed", str(seed)]
    made = subprocess.run([tool, *args, "--out", path], check=True, capture_output=True, text=True)
    content_hash = made.stdout.split()[1]  # "xxh3_128 <hex>"
    llm = Llama(model_path=path, n_ctx=128, n_batch=128, n_threads=threads, n_threads_batch=threads,
                logits_all=True, verbose=False)
    n_vocab = llm.n_vocab()
    text_ids = llm.tokenize(TEXT.encode("utf-8"), add_bos=True, special=False)
    seqs = [("text", text_ids)] + sequences(llm.token_bos(), n_vocab)
    out_seqs = []
    for name, toks in seqs:
        llm.reset()
        llm.eval(toks)
        logits = np.array(llm.scores[: len(toks)], dtype=np.float32)
        assert np.any(logits != 0)
        entry = {"name": name, "tokens": toks, "logits": [[r(x) for x in row] for row in logits]}
        if name == "text":
            gen, gaps = [], []
            row = logits[-1]
            for _ in range(N_GEN):
                top = np.argsort(-row, kind="stable")[:2]
                gen.append(int(top[0]))
                gaps.append(r(row[top[0]] - row[top[1]]))
                llm.eval([int(top[0])])
                row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            entry["generated"] = gen
            entry["top2_gap"] = gaps
        out_seqs.append(entry)
        print(f"{arch}/{wtype} {name}: {len(toks)} tokens, logit std {logits.std():.3f}", file=sys.stderr)
    return {"args": args, "gguf_xxh3_128": content_hash, "n_vocab": n_vocab, "text": TEXT, "sequences": out_seqs}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tool", help="path of the hearth-make-synthetic executable")
    ap.add_argument("--out-dir", default=os.path.join(here, "..", "fixtures"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--arch", action="append", choices=sorted(MODELS), help="only this architecture (repeatable)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for arch, variants in MODELS.items():
            if args.arch and arch not in args.arch:
                continue
            out = {
                "generator": "tests/reference/make_synthetic_fixtures.py",
                "oracle": f"llama-cpp-python {llama_cpp.__version__}",
                "n_threads": args.threads,
                "models": [run_model(args.tool, arch, t, s, tmp, args.threads) for t, s in variants],
            }
            path = os.path.join(args.out_dir, f"synthetic_{arch}_reference.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
                f.write("\n")
            print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()

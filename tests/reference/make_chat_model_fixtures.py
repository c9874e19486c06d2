#!/usr/bin/env python3
"""Reference data for the chat models (Qwen2.5-Coder-0.5B-Instruct, SmolLM2-135M-Instruct), made by llama.cpp.

Writes tests/fixtures/<name>_reference.json for each model file found, which
tests/model/chat_model_reference_test.cpp compares hearth's forward pass against. The scheme
is the Gemma fixture's (make_fixtures.py): for each prompt, llama.cpp's token ids (special
tokens parsed for the ChatML prompts), its greedy continuation (argmax of its logits,
continuing past end-of-turn), the top-2 logit gap at each generated position, and the logits
at the last prompt position (the 256 largest plus every 97th vocabulary entry, with the mean
and standard deviation of the full vector). hearth's test feeds these token ids itself, so it
needs no tokenizer.

It also records llama.cpp's own spread: the same last-position logits from llama.cpp with
flash attention on (another code path of the same engine), as max |diff| / std and rms / std,
the yardstick the test's tolerance is set against.

Needs llama-cpp-python (a test oracle only: never a dependency of hearth or of CI) and numpy:

    python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install llama-cpp-python numpy
    /tmp/llvenv/bin/python tests/reference/make_chat_model_fixtures.py [--models-dir DIR] [--threads 2]

Made with llama-cpp-python 0.3.36 on x86-64 (AVX2/AVX-512 CPU backend).
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import llama_cpp
from llama_cpp import Llama

N_GEN = 32          # greedy tokens per prompt
N_TOP = 256         # largest logits stored at the last prompt position
STRIDE = 97         # plus every STRIDE-th vocabulary entry (an unbiased sample of the rest)


def chatml(system, turns):
    """ChatML as both models' templates render it: <|im_start|>role\\n...<|im_end|>\\n, then the assistant's header."""
    out = f"<|im_start|>system\n{system}<|im_end|>\n"
    for role, content in turns:
        out += f"<|im_start|>{role}\n{content}<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


# The default system prompts of the models' own templates (used when a chat has none).
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

PYTHON_CODE = ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
               "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\ndef is_prime(n):\n")
ENGLISH = ("The history of the lighthouse is a history of people trying to make the sea a little less "
           "dangerous. The earliest known lighthouse, the Pharos of Alexandria, was built in")


def prompts(system):
    """(name, text, parse_special); none adds a BOS (neither model's file asks for one)."""
    return [
        ("chat_capital", chatml(system, [("user", "What is the capital of France?")]), True),
        ("chat_code", chatml(system, [("user", "Write a Python function that checks whether a string is a palindrome.")]), True),
        ("chat_multi_turn", chatml(system, [("user", "Name three primary colours."),
                                            ("assistant", "Red, yellow and blue."),
                                            ("user", "Which of them is the warmest?")]), True),
        ("python_code", PYTHON_CODE, False),
        ("english", ENGLISH, False),
    ]


MODELS = [
    # (fixture name, file name, default system prompt)
    ("qwen2.5_coder_0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", QWEN_SYSTEM),
    ("smollm2_135m", "SmolLM2-135M-Instruct.Q4_1.gguf", SMOL_SYSTEM),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def r(x):
    return round(float(x), 4)


def top2(row):
    order = np.argsort(-row, kind="stable")[:2]
    return int(order[0]), float(row[order[0]] - row[order[1]])


def last_logits(llm, tokens):
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[len(tokens) - 1], dtype=np.float32)


def run_prompt(llm, name, text, special, n_vocab):
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
    last = last_logits(llm, tokens)
    assert last.shape == (n_vocab,) and np.any(last != 0), "llama.cpp returned no logits"
    generated, gaps = [], []
    row = last
    for _ in range(N_GEN):
        tok, gap = top2(row)
        generated.append(tok)
        gaps.append(r(gap))
        llm.eval([tok])
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    order = np.argsort(-last, kind="stable")[:N_TOP]
    stride_ids = np.arange(0, n_vocab, STRIDE)
    entry = {
        "name": name,
        "text": text,
        "add_bos": False,
        "parse_special": special,
        "tokens": [int(t) for t in tokens],
        "generated": generated,
        "top2_gap": gaps,
        "last_logits": {
            "mean": r(last.mean()),
            "std": r(last.std()),
            "top_ids": [int(i) for i in order],
            "top_values": [r(last[i]) for i in order],
            "stride": STRIDE,
            "stride_values": [r(last[i]) for i in stride_ids],
        },
    }
    piece = llm.detokenize(generated).decode("utf-8", errors="replace")
    print(f"  {name}: {len(tokens)} tokens, std {last.std():.3f}, min gap {min(gaps):.4f} -> {piece!r}",
          file=sys.stderr)
    return entry, last


def make(path, system, threads):
    common = dict(model_path=path, n_ctx=1024, n_batch=512, n_threads=threads, n_threads_batch=threads,
                  logits_all=True, verbose=False, seed=0)
    llm = Llama(**common)
    n_vocab = llm.n_vocab()
    entries, lasts = [], []
    for name, text, special in prompts(system):
        e, last = run_prompt(llm, name, text, special, n_vocab)
        entries.append(e)
        lasts.append(last)
    del llm
    # llama.cpp against itself: flash attention (another kernel path, other rounding).
    fa = Llama(**common, flash_attn=True)
    spread_max, spread_rms = 0.0, 0.0
    for e, last in zip(entries, lasts):
        other = last_logits(fa, e["tokens"])
        d = other.astype(np.float64) - last
        sd = float(last.std())
        e["oracle_spread"] = {"max_std": r(np.abs(d).max() / sd), "rms_std": r(np.sqrt((d * d).mean()) / sd),
                              "argmax_equal": bool(np.argmax(other) == np.argmax(last))}
        spread_max = max(spread_max, e["oracle_spread"]["max_std"])
        spread_rms = max(spread_rms, e["oracle_spread"]["rms_std"])
    print(f"  llama.cpp flash-attn vs default: max|diff|/std <= {spread_max:.4f}, rms/std <= {spread_rms:.4f}",
          file=sys.stderr)
    return {
        "generator": "tests/reference/make_chat_model_fixtures.py",
        "oracle": f"llama-cpp-python {llama_cpp.__version__}",
        "model_file": os.path.basename(path),
        "model_sha256": sha256(path),
        "model_bytes": os.path.getsize(path),
        "n_threads": threads,
        "n_vocab": n_vocab,
        "n_generated": N_GEN,
        "prompts": entries,
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.local/share/hearth/models"))
    ap.add_argument("--out-dir", default=os.path.join(here, "..", "fixtures"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    for name, file_name, system in MODELS:
        path = os.path.join(args.models_dir, file_name)
        if not os.path.exists(path):
            print(f"{file_name}: not installed, skipped", file=sys.stderr)
            continue
        print(f"{file_name}:", file=sys.stderr)
        out = make(path, system, args.threads)
        dst = os.path.join(args.out_dir, f"{name}_reference.json")
        with open(dst, "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"wrote {dst} ({os.path.getsize(dst)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Reference data for the default model, made by llama.cpp itself.

Writes tests/fixtures/gemma3_reference.json, which tests/model/reference_test.cpp compares
hearth against: for each fixed prompt, llama.cpp's token ids, its 64 greedy tokens (argmax of
its logits, continuing past end-of-turn), the top-2 logit gap at each generated position (so
the test can excuse a mismatch at a near-tie only), and the logits at the last prompt
position (the 256 largest plus every 97th vocabulary entry, with the mean and standard
deviation of the full vector).

Needs llama-cpp-python (a test oracle only: never a dependency of hearth or of CI) and numpy:

    python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install llama-cpp-python numpy
    /tmp/llvenv/bin/python tests/reference/make_fixtures.py \
        [--model ~/.local/share/hearth/models/gemma-3-270m-q4_k_m.gguf] \
        [--out tests/fixtures/gemma3_reference.json] [--threads 2]

The output records llama-cpp-python's version, the model's sha256 and the thread count.
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

N_GEN = 64          # greedy tokens per prompt
N_TOP = 256         # largest logits stored at the last prompt position
STRIDE = 97         # plus every STRIDE-th vocabulary entry (an unbiased sample of the rest)

# The chat: system + user + model + user turns, rendered as Gemma 3's template does
# (engine/tokenizer/chat_template.h); hearth renders the messages itself and must get the
# same ids as llama.cpp gets from the text with special tokens parsed.
CHAT_MESSAGES = [
    {"role": "system", "content": "You are a concise assistant. Answer in one sentence."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And what river flows through it?"},
]


def render_gemma(messages, add_generation_prompt=True):
    out = "<bos>"
    prefix = ""
    msgs = messages
    if msgs and msgs[0]["role"] == "system":
        prefix = msgs[0]["content"] + "\n\n"
        msgs = msgs[1:]
    for i, m in enumerate(msgs):
        role = "model" if m["role"] == "assistant" else "user"
        content = (prefix if i == 0 else "") + m["content"].strip()
        out += "<start_of_turn>" + role + "\n" + content + "<end_of_turn>\n"
    if add_generation_prompt:
        out += "<start_of_turn>model\n"
    return out


LONG_PARAGRAPH = (
    "The history of the lighthouse is a history of people trying to make the sea a little "
    "less dangerous. The earliest known lighthouse, the Pharos of Alexandria, was built in "
    "the third century BC on a small island at the entrance to the harbour. It stood for more "
    "than a thousand years, and travellers described a fire burning at its top that could be "
    "seen from far out at sea. For most of the following centuries, lighthouses were simple "
    "towers with open fires of wood or coal, and keeping them lit through a winter storm was "
    "hard, dirty and dangerous work. Everything changed in the early nineteenth century, when "
    "Augustin Fresnel, a French engineer, designed a lens made of concentric rings of glass "
    "prisms. His lens gathered the light of a single lamp into a narrow, powerful beam, and a "
    "clockwork mechanism turned it so that each lighthouse flashed its own pattern. Sailors "
    "could now tell one light from another by counting the seconds between flashes. Later, "
    "oil lamps gave way to gas and then to electricity, and in the twentieth century most "
    "lighthouses were automated; the keepers who had lived in them for generations left, one "
    "by one. Today satellite navigation tells a ship exactly where it is, yet many of the old "
    "towers still shine every night, partly as a backup and partly, perhaps, because coastal "
    "towns would feel strangely dark without them. Some have become museums, some hotels, and "
    "a few are still looked after by volunteers who climb the spiral stairs to polish the "
    "brass and clean the glass."
)

# name -> text; all tokenized with add_bos=True, special=False unless noted below.
PROMPTS = [
    ("english_short", "The quick brown fox jumps over the lazy dog."),
    ("english_question", "Once upon a time, in a small village by the sea, there lived an old fisherman who"),
    ("python_code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
                    "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\nif __name__ == \"__main__\":\n"
                    "    print(fibonacci(10))\n"),
    ("c_code", "#include <stdio.h>\n\nint main(int argc, char **argv) {\n\tfor (int i = 0; i < argc; ++i) {\n"
               "\t\tprintf(\"%d: %s\\n\", i, argv[i]);\n\t}\n\treturn 0;\n}\n"),
    ("chinese", "人工智能是计算机科学的一个分支，它企图了解智能的实质，并生产出一种新的能以人类智能相似的方式做出反应的智能机器。"),
    ("japanese", "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"),
    ("emoji", "I love pizza 🍕🍕! Family: 👨‍👩‍👧‍👦, flags 🇫🇷🇯🇵, skin tones 👍🏽👋🏿, and a rainbow flag 🏳️‍🌈."),
    ("spaces", "a  b   c    d     e          f                                g\u3000h  "),
    ("newlines_tabs", "line one\n\nline two\n\n\n\nline three\t\ttabbed\t\n\r\n  \n\t \t end\n\n"),
    ("mixed_script", "English, Русский, Ελληνικά, العربية, हिन्दी, 한국어 and 中文 in one sentence: café naïve Œuvre ß."),
    ("long_paragraph", LONG_PARAGRAPH),
    ("numbers_punct", "Pi is 3.14159265358979; e = 2.718281828... 1,234,567.89 + (42 * -7) / 0.5 = ? "
                      "[a] {b} <c> \"d\" 'e' `f` @#$%^&*_~|\\ 2024-06-01T12:34:56Z 0xDEADBEEF 1e-9"),
    ("single_token", "Hello"),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def top2_gap(row):
    i = int(np.argmax(row))
    best = float(row[i])
    second = float(np.max(np.delete(row, i)))
    return i, best - second


def r(x):
    return round(float(x), 4)


def run_prompt(llm, name, text, add_bos, special, n_vocab):
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special)
    llm.reset()
    llm.eval(tokens)
    last = np.array(llm.scores[len(tokens) - 1], dtype=np.float32)
    assert last.shape == (n_vocab,) and np.any(last != 0), "llama.cpp returned no logits"

    generated, gaps = [], []
    row = last
    for _ in range(N_GEN):
        tok, gap = top2_gap(row)
        generated.append(tok)
        gaps.append(r(gap))
        llm.eval([tok])
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)

    order = np.argsort(-last, kind="stable")[:N_TOP]
    stride_ids = np.arange(0, n_vocab, STRIDE)
    entry = {
        "name": name,
        "text": text,
        "add_bos": add_bos,
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
    print(f"{name}: {len(tokens)} tokens, std {last.std():.3f}, min gap {min(gaps):.4f} -> {piece!r}",
          file=sys.stderr)
    return entry


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.expanduser("~/.local/share/hearth/models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(here, "..", "fixtures", "gemma3_reference.json"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    llm = Llama(model_path=args.model, n_ctx=1024, n_batch=512, n_threads=args.threads,
                n_threads_batch=args.threads, logits_all=True, verbose=False, seed=0)
    n_vocab = llm.n_vocab()

    entries = []
    for name, text in PROMPTS:
        entries.append(run_prompt(llm, name, text, True, False, n_vocab))
    chat = render_gemma(CHAT_MESSAGES)
    # The rendered template carries its own <bos>.
    e = run_prompt(llm, "chat", chat, False, True, n_vocab)
    e["chat_messages"] = CHAT_MESSAGES
    entries.append(e)
    # The same characters typed by a user: the markers must stay plain text.
    entries.append(run_prompt(llm, "chat_as_user_text", chat, True, False, n_vocab))

    out = {
        "generator": "tests/reference/make_fixtures.py",
        "oracle": f"llama-cpp-python {llama_cpp.__version__}",
        "model_file": os.path.basename(args.model),
        "model_sha256": sha256(args.model),
        "n_threads": args.threads,
        "n_vocab": n_vocab,
        "n_generated": N_GEN,
        "prompts": entries,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()

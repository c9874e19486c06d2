#!/usr/bin/env python3
"""Speculative decoding's speed on a real hearthd (issue 44's benchmark): decode tok/s of the
same greedy request with and without drafts (per-request "speculative": false), alternating
A B A B in one daemon so both see the same machine, for

  (a) rewrite a ~200-line Python file with one function renamed,
  (b) a question about a pasted document,
  (c) free chat,

at each --threads count. Prints the decode tok/s of every run, the median ratio with/without,
the drafted and accepted tokens, and checks that both answers are the same text.

Usage: bench/spec_bench.py --hearthd build/daemon/hearthd [--threads 1,2] [--reps 2]
       [--model qwen2.5-coder:0.5b] [--draft-model PATH] [--prompts rewrite,document,chat]

With --draft-model the daemon drafts with that model too (where the n-gram lookup finds
nothing); "without" is still a request with "speculative": false.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from hearthd_process import Hearthd, default_chat_model_or_skip  # noqa: E402


def python_file():
    """About 200 lines of plausible Python: a small inventory module."""
    out = ['"""Inventory bookkeeping for a small shop."""', "import json", "import math", "", ""]
    names = ["apples", "pears", "plums", "bread", "cheese", "milk", "eggs", "rice", "beans", "soap",
             "tea", "coffee", "sugar", "flour", "salt", "pepper"]
    out += ["class Item:", "    def __init__(self, name, price, count):", "        self.name = name",
            "        self.price = price", "        self.count = count", "",
            "    def value(self):", "        return self.price * self.count", "", ""]
    out += ["def load_inventory(path):", "    with open(path) as f:", "        data = json.load(f)",
            "    return [Item(d['name'], d['price'], d['count']) for d in data]", "", ""]
    for n in names:
        out += [f"def restock_{n}(items, amount):",
                f"    \"\"\"Adds amount {n} to the inventory and returns the new count.\"\"\"",
                "    for item in items:",
                f"        if item.name == '{n}':",
                "            item.count += amount",
                "            return item.count",
                f"    items.append(Item('{n}', 1.0, amount))",
                "    return amount", "", ""]
    out += ["def total_value(items):", "    return sum(item.value() for item in items)", "", "",
            "def most_valuable(items):", "    return max(items, key=lambda item: item.value())", ""]
    return "\n".join(out) + "\n"


def document():
    paras = []
    for i in range(12):
        paras.append(f"Section {i + 1}. The regional water board met on day {3 * i + 2} of the season and "
                     f"reviewed reservoir level {40 + i * 3} percent, pump station {chr(65 + i)} maintenance, "
                     f"and a budget line of {1200 + 75 * i} thousand for pipe renewal in district {i % 4 + 1}. "
                     "The board asked the engineers to report again at the next meeting.")
    return "\n\n".join(paras)


PROMPTS = {
    "rewrite": ("Rewrite this file with the function restock_tea renamed to refill_tea. Output the whole "
                "file and nothing else.\n\n```python\n" + python_file() + "```", 600),
    "document": ("Read this document and list, for every section, the pump station and the budget line, "
                 "quoting the text.\n\n" + document(), 300),
    "chat": ("Tell me a short story about a lighthouse keeper and a storm.", 200),
}


def run(d, prompt, max_tokens, speculative):
    status, body = d.post_json("/v1/chat/completions", {
        "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": max_tokens,
        "speculative": speculative})
    assert status == 200, body
    return body["choices"][0]["message"]["content"], body["timings"], body["usage"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--model", default=None)
    ap.add_argument("--draft-model", default=None)
    ap.add_argument("--prompts", default=",".join(PROMPTS))
    args = ap.parse_args()
    draft = ["--draft-model", args.draft_model] if args.draft_model else []
    default_chat_model_or_skip()
    for threads in [int(t) for t in args.threads.split(",")]:
        d = Hearthd(args.hearthd, args.model, *draft, threads=threads)
        try:
            for name in args.prompts.split(","):
                prompt, max_tokens = PROMPTS[name]
                run(d, prompt, 4, False)  # the prompt's KV in the cache: every run below decodes only
                on, off, texts = [], [], set()
                drafted = accepted = 0
                for _ in range(args.reps):
                    for speculative in (True, False):
                        text, t, u = run(d, prompt, max_tokens, speculative)
                        texts.add(text)
                        (on if speculative else off).append(t["decode_tok_s"])
                        if speculative:
                            drafted += t["draft_tokens"]
                            accepted += t["accepted_tokens"]
                ratios = [a / b for a, b in zip(on, off)]
                print(f"threads {threads} {name:9s}: {u['completion_tokens']} tokens; with drafts "
                      f"{', '.join('%.1f' % x for x in on)} tok/s, without {', '.join('%.1f' % x for x in off)}; "
                      f"ratio median {statistics.median(ratios):.2f} ({', '.join('%.2f' % r for r in ratios)}); "
                      f"accepted {accepted} of {drafted} drafts; same text: {len(texts) == 1}", flush=True)
        finally:
            d.close()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What a draft model adds to n-gram speculation, on a real hearthd: decode tok/s of the same
greedy request (spec_bench.py's prompts) from a daemon with n-gram drafts only and from one
with --draft-model too, and without speculation (a "speculative": false request), run in
turn A B C A B C so all three see the same machine. Prints each run's tok/s, the drafts
kept, and whether all answers are the same text.

Usage: bench/draft_bench.py --hearthd build/daemon/hearthd --model PATH --draft-model PATH
       [--threads 2] [--reps 2] [--prompts chat,document]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from hearthd_process import Hearthd  # noqa: E402
from spec_bench import PROMPTS, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft-model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--prompts", default="chat,document")
    args = ap.parse_args()
    ngram = Hearthd(args.hearthd, args.model, threads=args.threads)
    draft = Hearthd(args.hearthd, args.model, "--draft-model", args.draft_model, threads=args.threads)
    try:
        for name in args.prompts.split(","):
            prompt, max_tokens = PROMPTS[name]
            for d in (ngram, draft):
                run(d, prompt, 4, False)  # the prompt's KV in the cache: every run below decodes only
            runs = {"ngram": [], "ngram+draft": [], "off": []}
            kept = {"ngram": [0, 0], "ngram+draft": [0, 0]}
            texts = set()
            for _ in range(args.reps):
                for label, d, spec in (("ngram", ngram, True), ("ngram+draft", draft, True), ("off", ngram, False)):
                    text, t, _ = run(d, prompt, max_tokens, spec)
                    texts.add(text)
                    runs[label].append(t["decode_tok_s"])
                    if spec:
                        kept[label][0] += t["accepted_tokens"]
                        kept[label][1] += t["draft_tokens"]
            print(f"threads {args.threads} {name}: " + "; ".join(
                f"{k} {', '.join('%.1f' % x for x in v)} tok/s (median {statistics.median(v):.1f})" for k, v in runs.items())
                + "; kept " + ", ".join(f"{k} {a} of {b}" for k, (a, b) in kept.items())
                + f"; same text: {len(texts) == 1}", flush=True)
    finally:
        ngram.close()
        draft.close()


if __name__ == "__main__":
    main()

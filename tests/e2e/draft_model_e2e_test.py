"""hearthd with --draft-model, end to end: a draft model that cannot be loaded, or whose
tokenizer is not the served model's (SmolLM2-135M for Gemma 3 270M), stops hearthd at
startup with an error naming it; SmolLM2-135M drafting for itself gives the answer a
request without speculation gets, with the draft model's drafts counted in its timings and
in /metrics by drafter. (Drafting for itself, each guess costs a pass of the target: its
guard turns it off once that shows, so it drafts little; see docs/scheduler.md.)"""
import argparse
import os
import shutil
import subprocess
import tempfile

from hearthd_process import HANG_GUARD_S, Hearthd, gemma_model_or_skip, model_or_skip

PROMPT = "Tell me a short story about a lighthouse keeper and a storm."


def start_fails(hearthd, *args):
    """Runs hearthd with args; it must exit non-zero before it serves. Returns its output."""
    d = tempfile.mkdtemp(prefix="hearth-e2e-")
    try:
        cmd = [hearthd, "--socket", os.path.join(d, "hearth.sock"), "--cache-dir", os.path.join(d, "cache"),
               "--threads", "2", *args]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=HANG_GUARD_S, check=False)
        out = p.stdout.decode("utf-8", "replace")
        assert p.returncode != 0, out
        return out
    finally:
        shutil.rmtree(d, ignore_errors=True)


def answer(d, speculative):
    status, body = d.post_json("/v1/chat/completions", {
        "messages": [{"role": "user", "content": PROMPT}], "temperature": 0, "max_tokens": 100,
        "speculative": speculative, "logprobs": True})
    assert status == 200, body
    c = body["choices"][0]
    return c["message"]["content"], [t["logprob"] for t in c["logprobs"]["content"]], body["timings"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    args = ap.parse_args()
    gemma = gemma_model_or_skip()
    smol = model_or_skip("SmolLM2-135M", "SmolLM2-135M-Instruct.Q4_1.gguf")

    missing = "/nonexistent/draft.gguf"
    out = start_fails(args.hearthd, "--model", gemma, "--draft-model", missing)
    assert "draft model" in out and missing in out, out

    out = start_fails(args.hearthd, "--model", gemma, "--draft-model", smol)
    assert "does not share the tokenizer" in out, out
    assert smol in out and gemma in out, out

    d = Hearthd(args.hearthd, smol, "--draft-model", smol)
    try:
        assert "drafts for" in d.log_text(), d.log_text()
        text_off, lp_off, t_off = answer(d, False)
        text_on, lp_on, t_on = answer(d, True)
        assert (text_on, lp_on) == (text_off, lp_off), (text_on, text_off)
        assert t_off["draft_tokens"] == 0, t_off
        m = d.metrics()
        by = {k: m['hearth_%s_tokens_by_drafter_total{drafter="%s"}' % (k, who)]
              for k, who in (("draft", "model"), ("accepted", "model"))}
        assert by["draft"] > 0 and 0 <= by["accepted"] <= by["draft"], m
        assert m['hearth_draft_tokens_by_drafter_total{drafter="ngram"}'] + by["draft"] == \
            m["hearth_draft_tokens_total"], m
    finally:
        assert d.close() == 0
    # The same request to a daemon with n-gram drafts only: free text, which the lookup
    # hardly predicts; the draft model's guesses are the target's own, so it keeps more.
    d = Hearthd(args.hearthd, smol)
    try:
        text_ngram, _, t_ngram = answer(d, True)
        assert text_ngram == text_off, (text_ngram, text_off)
    finally:
        assert d.close() == 0
    print("kept: %d of %d drafts with the draft model (its own: %d of %d), %d of %d without" %
          (t_on["accepted_tokens"], t_on["draft_tokens"], by["accepted"], by["draft"], t_ngram["accepted_tokens"],
           t_ngram["draft_tokens"]))
    print("PASS")


if __name__ == "__main__":
    main()

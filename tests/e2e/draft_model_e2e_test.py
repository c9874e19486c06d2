"""hearthd with --draft-model, end to end on Gemma 3 270M: a draft model that cannot be
loaded, or whose tokenizer is not the served model's (SmolLM2-135M), stops hearthd at
startup with an error naming it; Gemma drafting for itself gives the answer a request
without speculation gets, with drafts counted in its timings."""
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
        "messages": [{"role": "user", "content": PROMPT}], "temperature": 0, "max_tokens": 48,
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

    d = Hearthd(args.hearthd, gemma, "--draft-model", gemma)
    try:
        assert "drafts for" in d.log_text(), d.log_text()
        text_off, lp_off, t_off = answer(d, False)
        text_on, lp_on, t_on = answer(d, True)
        assert (text_on, lp_on) == (text_off, lp_off), (text_on, text_off)
        assert t_off["draft_tokens"] == 0, t_off
        # Its own guesses, where sure enough to draft: nearly all kept.
        assert t_on["draft_tokens"] > 0 and t_on["accepted_tokens"] * 10 >= t_on["draft_tokens"] * 8, t_on
        print("draft model: %d of %d drafts kept" % (t_on["accepted_tokens"], t_on["draft_tokens"]))
    finally:
        assert d.close() == 0
    print("PASS")


if __name__ == "__main__":
    main()

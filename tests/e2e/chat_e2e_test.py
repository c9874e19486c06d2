"""A chat with hearthd's default model (Qwen2.5-Coder 0.5B Instruct), greedy: started with no
--model, it loads the catalog's default, renders ChatML with Qwen's own default system prompt,
stops at <|im_end|>, and answers "What is the capital of France?" with Paris -- then a
second turn that needs the first (Berlin), as `hearth chat` sends it; and an answer that
copies its prompt keeps speculative drafts and is the same with `speculative: false`.

Skips (exit 77) when the Qwen file is not installed (scripts/fetch-model installs it)."""
import argparse
import json

from hearthd_process import Hearthd, default_chat_model_or_skip


def ask(d, messages, max_tokens=96, model=None):
    request = {"messages": messages, "temperature": 0, "max_tokens": max_tokens}
    if model is not None:
        request["model"] = model
    status, body = d.post_json("/v1/chat/completions", request)
    assert status == 200, body
    choice = body["choices"][0]
    return choice["message"]["content"], choice["finish_reason"], body


CODE = """import math


def area(width, height):
    return width * height


def perimeter(width, height):
    return 2 * (width + height)


def diagonal(width, height):
    return math.sqrt(width * width + height * height)
"""


def check_speculative(d):
    """An answer that copies its prompt keeps drafted tokens, and is the same text with
    speculative decoding turned off for the request."""
    turn = [{"role": "user", "content": "Rewrite this file with the function area renamed to surface. "
                                        "Output the whole file.\n\n```python\n" + CODE + "```"}]
    answers = []
    for speculative in (True, False):
        request = {"messages": turn, "temperature": 0, "max_tokens": 64, "speculative": speculative}
        status, body = d.post_json("/v1/chat/completions", request)
        assert status == 200, body
        answers.append((body["choices"][0]["message"]["content"], body["timings"]))
    (with_drafts, t_on), (without, t_off) = answers
    print("speculative: %d of %d drafts kept, decode %.1f tok/s against %.1f without" %
          (t_on["accepted_tokens"], t_on["draft_tokens"], t_on["decode_tok_s"], t_off["decode_tok_s"]))
    assert with_drafts == without, (with_drafts, without)
    assert t_on["accepted_tokens"] > 0, t_on
    assert t_off["draft_tokens"] == 0, t_off


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    args = ap.parse_args()
    default_chat_model_or_skip()

    d = Hearthd(args.hearthd, None)  # no --model: the default
    try:
        status, raw = d.request("GET", "/v1/models")
        assert status == 200, raw
        # Without --model every installed model is served by name; the default one is
        # loaded at start.
        listed = json.loads(raw)["data"]
        loaded = [m for m in listed if m["meta"]["loaded"]]
        assert [m["id"] for m in loaded] == ["qwen2.5-coder:0.5b"], listed
        assert loaded[0]["meta"]["chat_template"] == "chatml", listed
        assert loaded[0]["meta"]["arch"] == "qwen2", listed
        # Its id is the catalog name a user passes to --model; the file's name is an alias.
        assert loaded[0]["meta"]["aliases"] == ["qwen2.5-coder-0.5b-instruct-q4_k_m"], listed
        status, raw = d.request("GET", "/v1/models/qwen2.5-coder-0.5b-instruct-q4_k_m")
        assert status == 200 and json.loads(raw)["id"] == loaded[0]["id"], (status, raw)

        turn1 = [{"role": "user", "content": "What is the capital of France?"}]
        answer, finish, body = ask(d, turn1)
        print("answer 1: %r (%s, %d prompt tokens)" % (answer, finish, body["usage"]["prompt_tokens"]))
        assert "Paris" in answer, answer
        # The model ends its turn with <|im_end|>: an end-of-generation token, not the limit.
        assert finish == "stop", (finish, answer)
        # The prompt holds Qwen's default system turn: far more than the question's ~20 tokens.
        assert body["usage"]["prompt_tokens"] > 25, body["usage"]

        turn2 = turn1 + [{"role": "assistant", "content": answer},
                         {"role": "user", "content": "And the capital of Germany?"}]
        answer2, finish2, _ = ask(d, turn2, model="qwen2.5-coder:0.5b")
        print("answer 2: %r (%s)" % (answer2, finish2))
        assert "Berlin" in answer2, answer2

        check_speculative(d)
    except BaseException:
        print(d.log_text())
        raise
    finally:
        rc = d.close()
    assert rc == 0, rc
    print("ok")


if __name__ == "__main__":
    main()

"""The official OpenAI Python SDK talks to a real hearthd over its Unix socket (an httpx
transport): a streamed chat and a non-streamed one give the same greedy text, and the
stream carries usage when asked for it."""
import argparse
import sys

from hearthd_process import HANG_GUARD_S, SKIP, Hearthd, gemma_model_or_skip

try:
    import httpx
    import openai
except ImportError:
    print("SKIP: the openai SDK is not installed (scripts/test installs it into .venv)")
    sys.exit(SKIP)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    args = ap.parse_args()
    model_path = gemma_model_or_skip()
    d = Hearthd(args.hearthd, model_path, "--parallel", "2", "--ctx", "1024")
    try:
        # timeout: a hang guard (the SDK's own default is 10 minutes for reads but 5 s to connect).
        client = openai.OpenAI(base_url="http://localhost/v1", api_key="unused", timeout=HANG_GUARD_S,
                               http_client=httpx.Client(transport=httpx.HTTPTransport(uds=d.socket)))
        models = client.models.list()
        ids = [m.id for m in models.data]
        assert ids == ["gemma3:270m"], ids
        messages = [{"role": "system", "content": "You answer in one short sentence."},
                    {"role": "user", "content": "What is the capital of France?"}]

        stream = client.chat.completions.create(model=ids[0], messages=messages, temperature=0, max_tokens=24,
                                                stream=True, stream_options={"include_usage": True})
        pieces, finish, usage = [], None, None
        for chunk in stream:
            assert chunk.object == "chat.completion.chunk", chunk
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.content:
                    pieces.append(choice.delta.content)
                if choice.finish_reason:
                    finish = choice.finish_reason
        streamed = "".join(pieces)
        assert finish in ("stop", "length"), finish
        assert usage is not None and usage.prompt_tokens > 10 and usage.completion_tokens > 0, usage
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, usage
        assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens >= 0

        full = client.chat.completions.create(model=ids[0], messages=messages, temperature=0, max_tokens=24)
        assert full.object == "chat.completion"
        text = full.choices[0].message.content
        assert text == streamed, (text, streamed)
        assert full.choices[0].finish_reason == finish
        assert full.usage.completion_tokens == usage.completion_tokens

        # hearth's extra timings object rides along.
        extra = full.model_extra or {}
        assert "timings" in extra and extra["timings"]["ttft_ms"] > 0, extra

        # Errors come back as the SDK's typed exceptions.
        try:
            client.chat.completions.create(model="no-such-model", messages=messages, max_tokens=4)
            raise AssertionError("an unknown model was accepted")
        except openai.NotFoundError:
            pass
        try:
            client.chat.completions.create(model=ids[0], messages=messages, max_tokens=4, n=2)
            raise AssertionError("n=2 was accepted")
        except openai.BadRequestError:
            pass
        print("streamed: %r" % streamed)
    finally:
        rc = d.close()
    assert rc == 0, rc
    print("ok")


if __name__ == "__main__":
    main()

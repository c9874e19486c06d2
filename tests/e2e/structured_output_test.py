"""Output that always fits a JSON Schema, and logprobs, on the real default model (Qwen2.5-Coder
0.5B) through the official OpenAI SDK over hearthd's Unix socket.

For each schema this test writes (nested objects, arrays with bounds, enums, anyOf,
$ref/$defs, string patterns and lengths, numbers with bounds), the greedy answer and sampled
answers at temperature 1 with several seeds must parse and validate with python's
jsonschema. response_format json_object gives an object. A schema keyword the grammar cannot
enforce is a 400 naming it. logprobs come in OpenAI's shape, from the distribution sampled:
greedy picks the most likely token, streamed and whole answers carry the same numbers."""
import argparse
import json
import math
import sys

from hearthd_process import HANG_GUARD_S, SKIP, Hearthd, default_chat_model_or_skip

try:
    import httpx
    import jsonschema
    import openai
except ImportError:
    print("SKIP: the openai SDK or jsonschema is not installed (scripts/test installs them into .venv)")
    sys.exit(SKIP)

SEEDS = (11, 22, 33)

SCHEMAS = {
    "nested objects": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 30},
                               "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["city", "zip"],
            },
        },
        "required": ["name", "address"],
    },
    "arrays with bounds": {
        "type": "object",
        "properties": {"primes": {"type": "array", "items": {"type": "integer", "minimum": 2, "maximum": 97},
                                  "minItems": 2, "maxItems": 5}},
        "required": ["primes"],
    },
    "enums": {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue"]},
                       "size": {"type": "string", "enum": ["S", "M", "L"]}},
        "required": ["color", "size"],
    },
    "anyOf": {
        "type": "object",
        "properties": {"value": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9},
                                           {"type": "string", "maxLength": 10},
                                           {"type": "null"}]}},
        "required": ["value"],
    },
    "$ref and $defs": {
        "$defs": {"point": {"type": "object",
                            "properties": {"x": {"type": "number", "minimum": -10, "maximum": 10},
                                           "y": {"type": "number", "minimum": -10, "maximum": 10}},
                            "required": ["x", "y"]}},
        "type": "object",
        "properties": {"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}},
        "required": ["start", "end"],
    },
    "string patterns and lengths": {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                       "note": {"type": "string", "minLength": 3, "maxLength": 20},
                       "when": {"type": "string", "format": "date"}},
        "required": ["code", "note", "when"],
    },
    "numbers with bounds": {
        "type": "object",
        "properties": {"celsius": {"type": "number", "minimum": -50, "maximum": 60},
                       "count": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100},
                       "ok": {"type": "boolean"}},
        "required": ["celsius", "count", "ok"],
    },
}

PROMPTS = {
    "nested objects": "Describe a person who lives in Lyon as JSON.",
    "arrays with bounds": "List a few prime numbers as JSON.",
    "enums": "Pick a t-shirt color and size, as JSON.",
    "anyOf": "Give me a value, as JSON.",
    "$ref and $defs": "Give me a line segment, as JSON.",
    "string patterns and lengths": "Make up a product code, a short note and a date, as JSON.",
    "numbers with bounds": "Report today's weather in Paris as JSON.",
}


def check_schema_answers(client, model, n_seeds):
    for name, schema in SCHEMAS.items():
        fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}
        messages = [{"role": "user", "content": PROMPTS[name]}]
        runs = [dict(temperature=0)] + [dict(temperature=1, seed=s) for s in SEEDS[:n_seeds]]
        for sampling in runs:
            r = client.chat.completions.create(model=model, messages=messages, max_tokens=300,
                                               response_format=fmt, **sampling)
            text = r.choices[0].message.content
            assert r.choices[0].finish_reason == "stop", (name, sampling, r.choices[0].finish_reason, text)
            value = json.loads(text)
            jsonschema.validate(value, schema)
            print("%-28s %-32s %s" % (name, sampling, text.replace("\n", " ")[:90]))


def check_json_object(client, model):
    for sampling in (dict(temperature=0), dict(temperature=1, seed=5)):
        r = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Say hello as JSON."}], max_tokens=120,
            response_format={"type": "json_object"}, **sampling)
        value = json.loads(r.choices[0].message.content)
        assert isinstance(value, dict), value


def check_refusals(client, model):
    messages = [{"role": "user", "content": "hi"}]
    bad = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    try:
        client.chat.completions.create(model=model, messages=messages, max_tokens=5, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": bad}})
        raise AssertionError("uniqueItems was accepted")
    except openai.BadRequestError as e:
        assert "uniqueItems" in str(e) and "/properties/tags" in str(e), e
    for fmt in ({"type": "xml"}, {"type": "json_schema"}, {"type": "json_schema", "json_schema": {"schema": 3}}):
        try:
            client.chat.completions.create(model=model, messages=messages, max_tokens=5, response_format=fmt)
            raise AssertionError("%r was accepted" % fmt)
        except openai.BadRequestError:
            pass
    try:
        client.chat.completions.create(model=model, messages=messages, max_tokens=5, top_logprobs=2)
        raise AssertionError("top_logprobs without logprobs was accepted")
    except openai.BadRequestError:
        pass


def check_logprobs(client, model):
    messages = [{"role": "user", "content": "Name three colors."}]
    whole = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0,
                                           logprobs=True, top_logprobs=3)
    content = whole.choices[0].logprobs.content
    assert "".join(t.token for t in content) == whole.choices[0].message.content, content
    for t in content:
        assert len(t.top_logprobs) == 3, t
        assert t.top_logprobs[0].token == t.token and t.top_logprobs[0].logprob == t.logprob, t  # greedy: the best
        assert t.logprob <= 0 and sum(math.exp(a.logprob) for a in t.top_logprobs) <= 1.0 + 1e-6, t
        assert bytes(t.bytes) == t.token.encode(), t
    streamed = []
    for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0,
                                                logprobs=True, top_logprobs=3, stream=True):
        for choice in chunk.choices:
            if choice.logprobs and choice.logprobs.content:
                streamed.extend(choice.logprobs.content)
    assert [(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in content]
    sampled = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=1,
                                             seed=7, logprobs=True, top_logprobs=20)
    for t in sampled.choices[0].logprobs.content:
        assert t.logprob > -1e4, t  # drawn from the distribution: never a masked or impossible token
        assert t.logprob <= t.top_logprobs[0].logprob + 1e-6, t
    legacy = client.completions.create(model=model, prompt="The capital of France is", max_tokens=4, temperature=0,
                                       logprobs=2)
    lp = legacy.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 4, lp
    assert "".join(lp.tokens) == legacy.choices[0].text, lp
    assert lp.text_offset[0] == 0 and lp.text_offset[1] == len(lp.tokens[0].encode()), lp
    assert all(max(top.values()) == v for top, v in zip(lp.top_logprobs, lp.token_logprobs)), lp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--seeds", type=int, default=len(SEEDS), help="sampled answers per schema (besides greedy)")
    args = ap.parse_args()
    model_path = default_chat_model_or_skip()
    d = Hearthd(args.hearthd, model_path, "--ctx", "2048")
    try:
        client = openai.OpenAI(base_url="http://localhost/v1", api_key="unused", timeout=HANG_GUARD_S,
                               http_client=httpx.Client(transport=httpx.HTTPTransport(uds=d.socket)))
        model = client.models.list().data[0].id
        check_refusals(client, model)
        check_logprobs(client, model)
        check_json_object(client, model)
        check_schema_answers(client, model, args.seeds)
    finally:
        rc = d.close()
    assert rc == 0, rc
    print("ok")


if __name__ == "__main__":
    main()

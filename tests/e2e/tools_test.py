"""Tool calling through the official OpenAI SDK against a real hearthd on the default model
(Qwen2.5-Coder 0.5B Instruct), over the Unix socket.

The calls the model means come back as tool_calls, always well-formed: arguments parse and
validate against the tool's parameters (python's jsonschema), greedy and sampled. The SDK's
stream helper assembles streamed calls into the same calls. tool_choice required and a named
function force calls; parallel calls come with their own indexes and ids, and
parallel_tool_calls false allows one. A call's result goes back as a tool message and the
model answers. Prose stays prose. Bad tools and conversations are 400s, and a model whose
template has no tool syntax says so. With tools in the prompt, a cached prompt gives the cold
answer."""
import argparse
import copy
import json
import sys

from hearthd_process import HANG_GUARD_S, SKIP, Hearthd, default_chat_model_or_skip, model_or_skip
from tool_defs import SCHEMAS, TOOLS

try:
    import httpx
    import jsonschema
    import openai
except ImportError:
    print("SKIP: the openai SDK or jsonschema is not installed (scripts/test installs them into .venv)")
    sys.exit(SKIP)

LYON = [{"role": "user", "content": "What is the weather in Lyon right now, in celsius?"}]
GREEDY = {"temperature": 0, "max_tokens": 120}


def check_call(call):
    """A call is whole: an offered function, JSON arguments that fit its parameters."""
    assert call.type == "function" and call.id.startswith("call_"), call
    assert call.function.name in SCHEMAS, call
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, SCHEMAS[call.function.name])
    return args


def check_auto(client, model, seeds):
    r = client.chat.completions.create(model=model, messages=LYON, tools=TOOLS, **GREEDY)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None, choice.message
    calls = choice.message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "get_weather", calls
    args = check_call(calls[0])
    assert args["city"] == "Lyon" and args["unit"] == "celsius", args
    for seed in seeds:
        sampled = client.chat.completions.create(model=model, messages=LYON, tools=TOOLS, temperature=1, seed=seed,
                                                 max_tokens=150)
        for call in sampled.choices[0].message.tool_calls or []:
            check_call(call)
    return calls[0]


def check_stream(client, model, whole_call):
    with client.chat.completions.stream(model=model, messages=LYON, tools=TOOLS, **GREEDY) as stream:
        final = stream.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert final.choices[0].finish_reason == "tool_calls", final
    assert [(c.function.name, c.function.arguments) for c in calls] == [
        (whole_call.function.name, whole_call.function.arguments)], calls
    check_call(calls[0])


def check_named(client, model):
    named = client.chat.completions.create(model=model, messages=LYON, tools=TOOLS, **GREEDY,
                                           tool_choice={"type": "function", "function": {"name": "get_time"}})
    calls = named.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_time"], calls
    check_call(calls[0])


def check_required(client, model):
    haiku = [{"role": "user", "content": "Write a haiku about autumn."}]
    required = client.chat.completions.create(model=model, messages=haiku, tools=TOOLS, tool_choice="required",
                                              **GREEDY)
    assert required.choices[0].message.tool_calls, required  # the whole answer is calls
    for call in required.choices[0].message.tool_calls:
        check_call(call)
    prose = client.chat.completions.create(model=model, messages=haiku, tools=TOOLS, **GREEDY)
    assert prose.choices[0].message.tool_calls is None and prose.choices[0].message.content, prose
    assert prose.choices[0].finish_reason == "stop", prose


def check_parallel(client, model):
    """One example turn with two calls shows the model the form; asked two things, it calls twice."""
    shown = [{"role": "user", "content": "What is the weather in Oslo and in Madrid?"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "c1", "type": "function",
                  "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "unit": "celsius"}'}},
                 {"id": "c2", "type": "function",
                  "function": {"name": "get_weather", "arguments": '{"city": "Madrid", "unit": "celsius"}'}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "3 C, snow"},
             {"role": "tool", "tool_call_id": "c2", "content": "21 C, sunny"},
             {"role": "assistant", "content": "Oslo: 3 C and snowing. Madrid: 21 C and sunny."},
             {"role": "user", "content": "What is the weather in Paris and in Rome?"}]
    both = client.chat.completions.create(model=model, messages=shown, tools=TOOLS, tool_choice="required", **GREEDY)
    calls = both.choices[0].message.tool_calls
    assert len(calls) == 2, calls
    assert len({c.id for c in calls}) == 2, calls
    assert sorted(check_call(c)["city"] for c in calls) == ["Paris", "Rome"], calls
    one = client.chat.completions.create(model=model, messages=shown, tools=TOOLS, tool_choice="required",
                                         parallel_tool_calls=False, **GREEDY)
    assert len(one.choices[0].message.tool_calls) == 1, one
    streamed = []
    for chunk in client.chat.completions.create(model=model, messages=shown, tools=TOOLS, tool_choice="required",
                                                stream=True, **GREEDY):
        for choice in chunk.choices:
            for d in choice.delta.tool_calls or []:
                streamed.append(d.index)
    assert sorted(set(streamed)) == [0, 1], streamed


def check_round_trip(client, model, call):
    answered = LYON + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 14, "sky": "cloudy"}'}]
    # tool_choice none for the answer: the 0.5B model, left free, calls the tool again.
    final = client.chat.completions.create(model=model, messages=answered, tools=TOOLS, tool_choice="none", **GREEDY)
    assert final.choices[0].message.tool_calls is None and final.choices[0].message.content, final
    assert final.choices[0].finish_reason in ("stop", "length"), final


def expect_400(client, model, what, **kw):
    try:
        client.chat.completions.create(model=model, max_tokens=4, **kw)
    except openai.BadRequestError as e:
        return str(e)
    raise AssertionError("accepted: " + what)


def check_refusals(client, model):
    def tool(name, params):
        return {"type": "function", "function": {"name": name, "parameters": params}}
    obj = {"type": "object", "properties": {}}
    assert "unique" in expect_400(client, model, "duplicate names", messages=LYON, tools=[tool("f", obj), tool("f", obj)])
    expect_400(client, model, "non-object parameters", messages=LYON, tools=[tool("f", {"type": "string"})])
    assert "uniqueItems" in expect_400(client, model, "an unsupported keyword", messages=LYON, tools=[
        tool("f", {"type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}})])
    expect_400(client, model, "a named tool not offered", messages=LYON, tools=TOOLS,
               tool_choice={"type": "function", "function": {"name": "nope"}})
    bad_id = LYON + [{"role": "tool", "tool_call_id": "call_unknown", "content": "x"}]
    assert "tool_call_id" in expect_400(client, model, "an unknown tool_call_id", messages=bad_id, tools=TOOLS)
    expect_400(client, model, "a response format beside callable tools", messages=LYON, tools=TOOLS,
               response_format={"type": "json_object"})
    no_syntax = expect_400(client, "smollm2:135m", "tools for a template without tool syntax", messages=LYON,
                           tools=TOOLS)
    assert "no tool-call syntax" in no_syntax, no_syntax


def check_cached_equals_cold(client, model):
    """The rendered tools sit in the prompt's cached prefix; a cache hit gives the cold answer."""
    first = client.chat.completions.create(model=model, messages=LYON, tools=TOOLS, extra_body={"cache_salt": "a"},
                                           **GREEDY)
    hit = client.chat.completions.create(model=model, messages=LYON, tools=TOOLS, extra_body={"cache_salt": "a"},
                                         **GREEDY)
    cold = client.chat.completions.create(model=model, messages=LYON, tools=TOOLS, extra_body={"cache_salt": "b"},
                                          **GREEDY)
    assert hit.usage.prompt_tokens_details.cached_tokens > 200, hit.usage  # the tools block among them
    assert cold.usage.prompt_tokens_details.cached_tokens == 0, cold.usage
    def key(r):
        return [(c.function.name, c.function.arguments) for c in r.choices[0].message.tool_calls or []]
    assert key(first) == key(hit) == key(cold), (key(first), key(hit), key(cold))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="the sanitizer build's run: greedy calls whole, streamed, named, a round trip and the 400s; "
                         "no sampled seeds, forced or parallel answers, or cache comparison (the same code paths, "
                         "a fraction of the tokens)")
    args = ap.parse_args()
    qwen = default_chat_model_or_skip()
    smollm = model_or_skip("smollm2:135m", "SmolLM2-135M-Instruct.Q4_1.gguf")
    d = Hearthd(args.hearthd, qwen, "--model", smollm, "--ctx", "2048")
    try:
        client = openai.OpenAI(base_url="http://localhost/v1", api_key="unused", timeout=HANG_GUARD_S,
                               http_client=httpx.Client(transport=httpx.HTTPTransport(uds=d.socket)))
        model = "qwen2.5-coder:0.5b"
        call = check_auto(client, model, () if args.quick else (1, 2, 3))
        check_stream(client, model, call)
        check_named(client, model)
        if not args.quick:
            check_required(client, model)
            check_parallel(client, model)
        check_round_trip(client, model, call)
        check_refusals(client, model)
        if not args.quick:
            check_cached_equals_cold(client, model)
    finally:
        rc = d.close()
    assert rc == 0, rc
    print("ok")


if __name__ == "__main__":
    main()

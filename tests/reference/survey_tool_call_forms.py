#!/usr/bin/env python3
"""How a small model writes a function call when it means one: its openings, counted.

Renders tool questions with Qwen2.5's chat template (the one stored in
tests/fixtures/chat_templates.json, tools and all) -- fourteen first questions and eight
conversations whose history already holds a call in the template's own <tool_call> form --
runs each through hearth-run greedily and with five sampled seeds, and counts, over the
answers that name a function, the text before the name and between the name and the
arguments (the CallForm's open_prefix and open_suffix), and the text after the arguments'
object (its close). engine/tokenizer/tool_calls.cpp defines one lenient CallForm per
frequent variant; bytes matter, since the grammar matches them.

Run outside CI, from the repository root, after a build (needs jinja2):

    python3 -m venv /tmp/chatvenv && /tmp/chatvenv/bin/pip install jinja2
    /tmp/chatvenv/bin/python tests/reference/survey_tool_call_forms.py \\
        [--hearth-run build/tools/hearth-run] [--model qwen2.5-coder:0.5b] [--save answers.jsonl]
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys

from jinja2.sandbox import ImmutableSandboxedEnvironment

SAMPLING = [(0.0, 0), (0.7, 1), (0.7, 2), (0.7, 3), (1.0, 4), (1.0, 5)]  # (temperature, seed)


def fn(name, description, properties, required):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


S = {"type": "string"}
WEATHER = fn("get_weather", "Get the current weather in a city",
             {"city": {"type": "string", "description": "The city name"},
              "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"])
SEARCH = fn("search_web", "Search the web for a query", {"query": S}, ["query"])
EMAIL = fn("send_email", "Send an email", {"to": S, "subject": S, "body": S}, ["to", "subject", "body"])
CALC = fn("calculate", "Evaluate an arithmetic expression", {"expression": S}, ["expression"])
STOCK = fn("get_stock_price", "Get the latest stock price for a ticker symbol", {"ticker": S}, ["ticker"])
TIMER = fn("set_timer", "Set a timer", {"minutes": {"type": "integer"}}, ["minutes"])
FILES = fn("read_file", "Read a file from disk", {"path": S}, ["path"])
TRANSLATE = fn("translate", "Translate text", {"text": S, "target_language": S}, ["text", "target_language"])

QUESTIONS = [  # (tools, system message or None, question)
    ([WEATHER], None, "What's the weather like in Lyon right now, in celsius?"),
    ([WEATHER, SEARCH], None, "Is it raining in Tokyo?"),
    ([WEATHER, SEARCH, CALC], None, "What is 1234 * 5678?"),
    ([EMAIL], None, "Send an email to bob@example.com saying the meeting moved to 3pm."),
    ([STOCK, SEARCH], None, "How much is Apple stock trading at?"),
    ([TIMER], None, "Set a timer for 10 minutes please."),
    ([FILES], None, "Show me the contents of /etc/hostname"),
    ([TRANSLATE, SEARCH], None, "Translate 'good morning' into German."),
    ([WEATHER], "You are a helpful assistant.", "Weather in Paris and Berlin?"),
    ([SEARCH], None, "Who won the 2022 football world cup? Look it up."),
    ([WEATHER, STOCK, TIMER, CALC], None, "I need the temperature in Madrid in fahrenheit."),
    ([CALC], None, "Compute the square root of 144 using the calculator tool."),
    ([FILES, EMAIL], "You can use tools.", "Read notes.txt and email it to alice@example.com"),
    ([SEARCH, WEATHER], None, "Search for the best pizza in Naples."),
]


def called(name, arguments):
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def user(text):
    return {"role": "user", "content": text}


def tool(text):
    return {"role": "tool", "content": text}


def answer(text):
    return {"role": "assistant", "content": text}


HISTORIES = [  # (tools, messages): the last call's result, or a new question after it
    ([WEATHER, SEARCH], [user("Weather in Oslo?"), called("get_weather", {"city": "Oslo"}),
                         tool('{"temp": 3, "sky": "snow"}'), answer("It is 3°C and snowing in Oslo."),
                         user("And in Rome?")]),
    ([STOCK, CALC], [user("Price of MSFT?"), called("get_stock_price", {"ticker": "MSFT"}), tool("410.2"),
                     answer("MSFT trades at 410.2."), user("What about Google?")]),
    ([EMAIL, FILES], [user("Read todo.md"), called("read_file", {"path": "todo.md"}), tool("- buy milk"),
                      answer("It says: buy milk."), user("Email that list to carol@example.com with subject Todo.")]),
    ([TIMER, WEATHER], [user("Set a timer for 5 minutes"), called("set_timer", {"minutes": 5}), tool("ok"),
                        answer("Timer set."), user("Now one for 20 minutes.")]),
    ([SEARCH], [user("Search for llama facts"), called("search_web", {"query": "llama facts"}),
                tool("Llamas are camelids.")]),
    ([WEATHER], [user("Weather in Lima?"), called("get_weather", {"city": "Lima"}), tool('{"temp": 19}')]),
    ([TRANSLATE, CALC], [user("Translate 'cat' to French"),
                         called("translate", {"text": "cat", "target_language": "fr"}), tool("chat"),
                         answer("'cat' is 'chat' in French."), user("And 'dog' into Spanish?")]),
    ([CALC, SEARCH], [user("What is 2+2?"), called("calculate", {"expression": "2+2"}), tool("4"), answer("4."),
                      user("And 17 * 23?")]),
]


def prompts(template_source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    template = env.from_string(template_source)
    for i, (tools, system, question) in enumerate(QUESTIONS):
        messages = ([{"role": "system", "content": system}] if system else []) + [user(question)]
        yield "q%02d" % i, template.render(messages=messages, tools=tools, add_generation_prompt=True)
    for i, (tools, messages) in enumerate(HISTORIES):
        yield "h%02d" % i, template.render(messages=messages, tools=tools, add_generation_prompt=True)


def object_end(text, start):
    """The index after the JSON object opening at text[start], or None."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def opening(text):
    """(open_prefix, open_suffix, close) of the first call in `text`, or None."""
    m = re.search(r'(?s)((?:```json\s*|<tool_call>\s*)?\{\s*"name":\s*")([A-Za-z0-9_]+)(",\s*"arguments":\s*)', text)
    if not m:
        return None
    start = m.end(3)
    if start >= len(text) or text[start] != "{":
        return (m.group(1), m.group(3), "(arguments not an object)")
    end = object_end(text, start)
    if end is None:
        return (m.group(1), m.group(3), "(arguments cut off)")
    close = re.match(r"(?s)\s*\}(\s*```|\s*</tool_call>)?", text[end:])
    return (m.group(1), m.group(3), close.group(0) if close else "(no close)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hearth-run", default="build/tools/hearth-run")
    ap.add_argument("--model", default="qwen2.5-coder:0.5b")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--save", help="write every answer here, one JSON object a line")
    args = ap.parse_args()

    fixture = os.path.join(os.path.dirname(__file__), "..", "fixtures", "chat_templates.json")
    with open(fixture, encoding="utf-8") as f:
        source = next(m for m in json.load(f)["models"] if m["name"] == "qwen2.5-coder:0.5b")["chat_template"]
    openings, closes, others = collections.Counter(), collections.Counter(), collections.Counter()
    saved = open(args.save, "w", encoding="utf-8") if args.save else None
    n = 0
    for name, prompt in prompts(source):
        for temp, seed in SAMPLING:
            run = subprocess.run([args.hearth_run, "-m", args.model, "-p", prompt, "-n", "120", "--temp", str(temp),
                                  "--seed", str(seed), "-t", args.threads, "--json"],
                                 capture_output=True, text=True, check=True)
            text = json.loads(run.stdout.strip().splitlines()[-1])["text"]
            n += 1
            if saved:
                saved.write(json.dumps({"prompt": name, "temp": temp, "seed": seed, "text": text},
                                       ensure_ascii=False) + "\n")
            found = opening(text)
            if found:
                openings[found[:2]] += 1
                closes[found[2]] += 1
            else:
                others[text[:50]] += 1
            print("%s t=%.1f s=%d: %r" % (name, temp, seed, text[:80]), file=sys.stderr)
    print("%d answers; %d name a function" % (n, sum(openings.values())))
    print("\nopen_prefix / open_suffix:")
    for (prefix, suffix), count in openings.most_common():
        print("%4d  %r  %r" % (count, prefix, suffix))
    print("\nclose (after the arguments' object):")
    for close, count in closes.most_common():
        print("%4d  %r" % (count, close))
    print("\nanswers that name no function (first 50 characters):")
    for text, count in others.most_common():
        print("%4d  %r" % (count, text))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Tool-call accuracy and well-formed rate on 55 cases of our own (not a test).

Each case offers a few functions of a small toolbox and asks something one of them (or two,
the parallel cases) answers; expected: the functions called and an argument value each must
contain. Every server is asked the same OpenAI chat request, tool_choice auto, greedy or
sampled (--temperature, a seed per case):

  hearth           hearthd, its grammar on (the default)
  hearth-free      the same prompt with tool_choice none: the model's free text, read by a
                   lenient parser of the forms the model writes (JSON objects naming an offered
                   function, fenced or bare, or <tool_call> blocks) -- what the model does
                   without the grammar
  llama-server     llama.cpp's server with --jinja, on the same model file

Counted per answer:
  well-formed  every call it returns has an offered name and arguments that parse and fit
               the function's parameters (jsonschema), and no call-shaped JSON is left in the
               content (a call the client never sees)
  correct      the calls made are the expected ones (names, and each expected argument value
               found in the argument, case-insensitive)

  bench/tool_accuracy.py --hearth SOCKET [--llama-server URL] [--cases N] [--temperature T]
"""
import argparse
import json
import os
import re
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from hearthd_process import UnixHTTPConnection  # noqa: E402  (the tests' HTTP over a Unix socket)

try:
    import jsonschema
except ImportError:
    sys.exit("needs jsonschema (scripts/test's .venv has it)")


def fn(name, description, props, required):
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": required}}}


S = {"type": "string"}
TOOLBOX = {
    "get_weather": fn("get_weather", "Get the current weather in a city",
                      {"city": S, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"]),
    "get_time": fn("get_time", "Get the current local time in a city", {"city": S}, ["city"]),
    "convert_currency": fn("convert_currency", "Convert an amount of money from one currency to another",
                           {"amount": {"type": "number"}, "from_currency": S, "to_currency": S},
                           ["amount", "from_currency", "to_currency"]),
    "get_stock_price": fn("get_stock_price", "Get the latest stock price of a company by its ticker symbol",
                          {"ticker": S}, ["ticker"]),
    "send_email": fn("send_email", "Send an email", {"to": S, "subject": S, "body": S}, ["to", "subject", "body"]),
    "search_web": fn("search_web", "Search the web for a query", {"query": S}, ["query"]),
    "translate": fn("translate", "Translate a text into a target language", {"text": S, "target_language": S},
                    ["text", "target_language"]),
    "calculate": fn("calculate", "Evaluate an arithmetic expression", {"expression": S}, ["expression"]),
}

CITIES = ["Lyon", "Tokyo", "Cairo", "Lima", "Oslo", "Perth", "Denver", "Seoul", "Nairobi", "Quito"]


def cases():
    out = []
    for i, city in enumerate(CITIES):
        out.append({"q": "What is the weather in %s right now?" % city, "tools": ["get_weather"],
                    "expect": [("get_weather", "city", city)]})
        out.append({"q": "What time is it in %s?" % city, "tools": ["get_weather", "get_time", "search_web"],
                    "expect": [("get_time", "city", city)]})
    for amount, a, b in [(100, "USD", "EUR"), (250, "GBP", "JPY"), (12.5, "EUR", "CHF"), (3000, "CAD", "USD"),
                         (75, "AUD", "NZD")]:
        out.append({"q": "Convert %s %s to %s." % (amount, a, b),
                    "tools": ["convert_currency", "calculate", "get_stock_price"],
                    "expect": [("convert_currency", "to_currency", b)]})
    for t in ["AAPL", "MSFT", "NVDA", "TSLA", "AMZN"]:
        out.append({"q": "What's the stock price of %s?" % t, "tools": ["get_stock_price", "search_web"],
                    "expect": [("get_stock_price", "ticker", t)]})
    for text, lang in [("Good morning", "French"), ("Where is the station?", "German"), ("Thank you", "Japanese"),
                       ("I love books", "Spanish"), ("See you tomorrow", "Italian")]:
        out.append({"q": "Translate '%s' into %s." % (text, lang), "tools": ["translate", "search_web"],
                    "expect": [("translate", "target_language", lang)]})
    for expr in ["23 * 19", "1024 / 8", "(3 + 4) * 12", "2 ** 10", "17 - 42"]:
        out.append({"q": "Calculate %s." % expr, "tools": ["calculate", "search_web"],
                    "expect": [("calculate", "expression", expr.split()[0].strip("("))]})
    for who in ["alice@example.com", "bob@example.org", "team@example.net", "carol@example.com", "dan@example.io"]:
        out.append({"q": "Email %s with the subject 'Lunch' and tell them I'll be late." % who,
                    "tools": ["send_email", "search_web"], "expect": [("send_email", "to", who)]})
    for topic in ["the tallest building in the world", "who won the 2018 world cup", "the boiling point of ethanol",
                  "the population of Canada", "the author of Dune"]:
        out.append({"q": "Search the web for %s." % topic, "tools": ["search_web", "calculate"],
                    "expect": [("search_web", "query", topic.split()[-1])]})
    for a, b in [("Paris", "Rome"), ("Berlin", "Madrid"), ("Toronto", "Boston"), ("Delhi", "Dubai"),
                 ("Athens", "Vienna")]:
        out.append({"q": "What is the weather in %s and in %s?" % (a, b), "tools": ["get_weather", "get_time"],
                    "expect": [("get_weather", "city", a), ("get_weather", "city", b)]})
    return out


def post_unix(path, body):
    c = UnixHTTPConnection(path)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return json.loads(r.read())


def post_url(url, body):
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


CALL_TEXT = re.compile(r'(<tool_call>\s*)?(```(?:json)?\s*)?(\{\s*"name"\s*:\s*"[^"]+"\s*,\s*"(?:arguments|parameters)"\s*:)')


def calls_in_text(text, offered):
    """The calls a lenient reader finds in free text: each JSON object at an opening that names
    an offered function, with its arguments object; and whether some call-shaped text failed."""
    found, broken, at = [], False, 0
    dec = json.JSONDecoder()
    while True:
        m = CALL_TEXT.search(text, at)
        if not m:
            return found, broken
        start = m.start(3)
        try:
            obj, end = dec.raw_decode(text, start)
            args = obj.get("arguments", obj.get("parameters"))
            if obj.get("name") in offered and isinstance(args, dict):
                found.append((obj["name"], json.dumps(args)))
            else:
                broken = True
            at = end
        except ValueError:
            broken = True
            at = m.end()


def judge(case, calls, leftover_broken, content):
    schemas = {n: TOOLBOX[n]["function"]["parameters"] for n in case["tools"]}
    well = not leftover_broken
    parsed = []
    for name, arguments in calls:
        try:
            args = json.loads(arguments)
            jsonschema.validate(args, schemas[name])
            parsed.append((name, args))
        except Exception:
            well = False
    if content and CALL_TEXT.search(content):
        well = False  # a call left in the content: the client never runs it
    want = sorted((n, k, v.lower()) for n, k, v in case["expect"])
    got = sorted(parsed, key=lambda c: (c[0], json.dumps(c[1])))
    correct = len(got) == len(want) and all(
        g[0] == w[0] and w[2] in str(g[1].get(w[1], "")).lower() for g, w in zip(got, want))
    if len(want) == 2 and len(got) == 2 and not correct:  # the two calls in the other order
        correct = all(any(g[0] == w[0] and w[2] in str(g[1].get(w[1], "")).lower() for g in got) for w in want)
    return well, correct


def run(name, post, model, all_cases, free, temperature):
    n_well = n_correct = n_calls = 0
    for i, case in enumerate(all_cases):
        body = {"model": model, "messages": [{"role": "user", "content": case["q"]}],
                "tools": [TOOLBOX[t] for t in case["tools"]], "temperature": temperature, "seed": 1000 + i,
                "max_tokens": 200}
        if free:
            body["tool_choice"] = "none"
        msg = post(body)["choices"][0]["message"]
        content = msg.get("content") or ""
        if free:
            calls, broken = calls_in_text(content, set(case["tools"]))
            content = CALL_TEXT.sub("", content) if calls else content
        else:
            calls = [(c["function"]["name"], c["function"]["arguments"]) for c in msg.get("tool_calls") or []]
            broken = False
        well, correct = judge(case, calls, broken, content)
        n_well += well
        n_correct += correct
        n_calls += bool(calls)
    n = len(all_cases)
    print("%-14s cases %3d  made calls %3d  well-formed %5.1f%%  correct %5.1f%%" %
          (name, n, n_calls, 100.0 * n_well / n, 100.0 * n_correct / n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearth", help="hearthd's socket")
    ap.add_argument("--model", default="qwen2.5-coder:0.5b")
    ap.add_argument("--llama-server", help="llama-server's base URL (started with --jinja)")
    ap.add_argument("--cases", type=int, default=0, help="only the first N cases")
    ap.add_argument("--temperature", type=float, default=0.0)
    args = ap.parse_args()
    all_cases = cases()[:args.cases or None]
    if args.hearth:
        run("hearth", lambda b: post_unix(args.hearth, b), args.model, all_cases, False, args.temperature)
        run("hearth-free", lambda b: post_unix(args.hearth, b), args.model, all_cases, True, args.temperature)
    if args.llama_server:
        run("llama-server", lambda b: post_url(args.llama_server, b), args.model, all_cases, False, args.temperature)


if __name__ == "__main__":
    main()

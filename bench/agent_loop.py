#!/usr/bin/env python3
"""An agent's tool loop against hearthd (not a test): the prompt cache and agents (issue 40,
item 5).

An agent sends the same system prompt and tool list every turn, then the conversation so far.
Here: a tool list of about 1,500 tokens (16 functions with descriptions and parameters), a
system prompt, and 5 user questions, each answered in two requests — the model's call
(tool_choice auto), then, after the tool's result, its answer (tool_choice none) — 10 requests
in all, greedy. For each request: the prompt's tokens, where they came from (memory, disk,
computed) and the time to first token. Then hearthd restarts on the same cache directory and
the same 10 requests run again: the prefixes come from disk.

  bench/agent_loop.py --hearthd build/daemon/hearthd [--threads 2]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
from hearthd_process import UnixHTTPConnection  # noqa: E402  (the tests' HTTP over a Unix socket)


def tool(name, description, props, required):
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": required}}}


def s(description):
    return {"type": "string", "description": description}


TOOLS = [
    tool("get_weather", "Get the current weather conditions for a city, including temperature, sky and wind.",
         {"city": s("The city name, e.g. Lyon"), "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                                                          "description": "Temperature unit"}}, ["city"]),
    tool("get_forecast", "Get the weather forecast for the coming days in a city.",
         {"city": s("The city name"), "days": {"type": "integer", "minimum": 1, "maximum": 10,
                                               "description": "How many days ahead"}}, ["city", "days"]),
    tool("get_time", "Get the current local time and time zone of a city.", {"city": s("The city name")}, ["city"]),
    tool("convert_currency", "Convert an amount of money between two currencies at today's rate.",
         {"amount": {"type": "number", "description": "The amount"}, "from_currency": s("ISO code, e.g. EUR"),
          "to_currency": s("ISO code, e.g. USD")}, ["amount", "from_currency", "to_currency"]),
    tool("get_stock_price", "Get the latest trading price of a listed company's stock.",
         {"ticker": s("The ticker symbol, e.g. AAPL")}, ["ticker"]),
    tool("search_web", "Search the web and return the titles and snippets of the top results.",
         {"query": s("What to search for"), "max_results": {"type": "integer", "minimum": 1, "maximum": 20}},
         ["query"]),
    tool("read_file", "Read a text file from the user's project and return its content.",
         {"path": s("Path relative to the project root")}, ["path"]),
    tool("write_file", "Write text to a file in the user's project, replacing its content.",
         {"path": s("Path relative to the project root"), "content": s("The new content")}, ["path", "content"]),
    tool("list_directory", "List the files and folders in a directory of the user's project.",
         {"path": s("Directory path relative to the project root")}, ["path"]),
    tool("run_tests", "Run the project's test suite, or the tests matching a pattern, and report failures.",
         {"pattern": s("Only tests whose name matches this pattern")}, []),
    tool("send_email", "Send an email on the user's behalf.",
         {"to": s("Recipient address"), "subject": s("Subject line"), "body": s("Message text")},
         ["to", "subject", "body"]),
    tool("create_event", "Create a calendar event.",
         {"title": s("Event title"), "start": s("Start, ISO 8601"), "end": s("End, ISO 8601"),
          "location": s("Where")}, ["title", "start", "end"]),
    tool("translate", "Translate a text into another language.",
         {"text": s("The text"), "target_language": s("Language name, e.g. German")}, ["text", "target_language"]),
    tool("calculate", "Evaluate an arithmetic expression exactly.", {"expression": s("e.g. (3 + 4) * 12")},
         ["expression"]),
    tool("get_directions", "Get travel directions between two places.",
         {"origin": s("Where from"), "destination": s("Where to"),
          "mode": {"type": "string", "enum": ["driving", "walking", "transit", "cycling"]}},
         ["origin", "destination"]),
    tool("set_reminder", "Set a reminder for the user at a given time.",
         {"text": s("What to remind"), "when": s("When, ISO 8601")}, ["text", "when"]),
]

SYSTEM = ("You are an assistant in a desktop app. Use the tools when they help; answer briefly and "
          "accurately once you have the tools' results.")
QUESTIONS = ["What is the weather in Lyon right now?", "What time is it in Tokyo?",
             "Convert 250 euros to US dollars.", "What is Apple's stock price?", "Translate 'good night' into German."]
RESULTS = ["14 C, cloudy, light wind", "21:40, JST (UTC+9)", "250 EUR = 271.30 USD", "AAPL: 231.02 USD",
           "Gute Nacht"]


def post(sock, body):
    c = UnixHTTPConnection(sock)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    return json.loads(c.getresponse().read())


def conversation_requests(sock):
    """The 10 requests, each answered before the next is built (the loop an agent runs)."""
    messages = [{"role": "system", "content": SYSTEM}]
    rows = []
    for q, result in zip(QUESTIONS, RESULTS):
        messages.append({"role": "user", "content": q})
        for phase in ("call", "answer"):
            body = {"messages": messages, "tools": TOOLS, "temperature": 0, "max_tokens": 80,
                    "tool_choice": "auto" if phase == "call" else "none"}
            r = post(sock, body)
            rows.append((phase, body, r))
            msg = r["choices"][0]["message"]
            if phase == "call":
                calls = msg.get("tool_calls") or []
                if calls:
                    messages = messages + [{"role": "assistant", "content": None, "tool_calls": calls[:1]},
                                           {"role": "tool", "tool_call_id": calls[0]["id"], "content": result}]
                else:
                    messages = messages + [{"role": "assistant", "content": msg.get("content") or ""}]
                    break
            else:
                messages = messages + [{"role": "assistant", "content": msg.get("content") or ""}]
    return rows


def report(title, rows):
    print(title)
    print("%4s %-7s %7s %8s %6s %9s %9s" % ("turn", "phase", "prompt", "memory", "disk", "computed", "TTFT ms"))
    for i, (phase, _, r) in enumerate(rows, 1):
        t = r["timings"]
        print("%4d %-7s %7d %8d %6d %9d %9.1f" % (i, phase, r["usage"]["prompt_tokens"], t["cached_tokens"]["memory"],
                                                 t["cached_tokens"]["disk"], t["prefilled_tokens"], t["ttft_ms"]))


class Daemon:
    def __init__(self, hearthd, cache_dir, threads):
        self.dir = tempfile.mkdtemp(prefix="hearth-agent-")
        self.sock = os.path.join(self.dir, "s.sock")
        self.p = subprocess.Popen([hearthd, "--socket", self.sock, "--cache-dir", cache_dir, "--threads", str(threads),
                                   "--ctx", "4096"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                c = UnixHTTPConnection(self.sock)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("hearthd did not start")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="hearth-agent-cache-")
    try:
        d = Daemon(args.hearthd, cache, args.threads)
        rows = conversation_requests(d.sock)
        report("first run (turn 1 cold; later turns find the conversation so far in memory)", rows)
        d.stop()
        d = Daemon(args.hearthd, cache, args.threads)
        again = [(phase, body, post(d.sock, body)) for phase, body, _ in rows]
        report("after a restart (the same requests: prefixes from disk)", again)
        d.stop()
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()

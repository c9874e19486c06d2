"""The official `ollama` Python library talks to a real hearthd on the default model over
--listen-ollama on a free loopback port, as a user switching from Ollama would point it
(OLLAMA_HOST): a streamed chat and a whole one give the same greedy text, generate, list,
show, ps, pull of an installed model, version, load and unload, and errors as the library's
ResponseError with Ollama's status codes. The models folder is a temporary one holding
symbolic links to the installed files, so that deleting a model here never touches them."""
import argparse
import json
import os
import socket
import sys
import tempfile
import time
import urllib.request

from hearthd_process import HANG_GUARD_S, SKIP, Hearthd, default_chat_model_or_skip, models_dir

try:
    import ollama
except ImportError:
    print("SKIP: the ollama library is not installed (scripts/test installs it into .venv)")
    sys.exit(SKIP)

MODEL = "qwen2.5-coder:0.5b"
GREEDY = {"temperature": 0, "num_predict": 24}
MESSAGES = [{"role": "system", "content": "You answer in one short sentence."},
            {"role": "user", "content": "What is the capital of France?"}]

# Structured outputs: `format` with a schema is enforced by the engine's grammar.
SCHEMA_ENFORCED = True
CITY_SCHEMA = {"type": "object",
               "properties": {"city": {"type": "string"}, "country": {"type": "string"},
                              "population": {"type": "integer"}},
               "required": ["city", "country", "population"]}


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def expect_error(status, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except ollama.ResponseError as e:
        assert e.status_code == status, (e.status_code, e.error)
        assert isinstance(e.error, str) and e.error, e.error  # Ollama's {"error": "<message>"}
        return e.error
    raise AssertionError("expected ResponseError %d from %s" % (status, call.__name__))


def check_chat(client):
    """Streamed and whole: the same greedy text, final objects with counts and durations."""
    pieces, last = [], None
    for part in client.chat(model=MODEL, messages=MESSAGES, options=GREEDY, stream=True):
        assert part.model == MODEL, part
        assert part.created_at.endswith("Z"), part.created_at
        pieces.append(part.message.content or "")
        last = part
    assert last.done and last.done_reason in ("stop", "length"), last
    assert last.prompt_eval_count > 10 and 0 < last.eval_count <= 24, last
    assert last.total_duration >= last.prompt_eval_duration > 0, last
    assert last.eval_duration > 0, last
    streamed = "".join(pieces)
    whole = client.chat(model=MODEL, messages=MESSAGES, options=GREEDY)
    assert whole.done and whole.message.role == "assistant", whole
    assert whole.message.content == streamed, (whole.message.content, streamed)
    assert whole.eval_count == last.eval_count
    assert "Paris" in streamed, streamed
    return streamed


def post_json(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=HANG_GUARD_S) as r:
        return r.headers.get("Content-Type"), r.read()


def check_wire(port):
    """What the library does not show: NDJSON lines, and hearth's timings beside Ollama's durations."""
    ctype, body = post_json(port, "/api/chat", {"model": MODEL, "messages": MESSAGES, "options": GREEDY})
    assert ctype == "application/x-ndjson", ctype
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert all(not line["done"] for line in lines[:-1]) and lines[-1]["done"], lines
    final = lines[-1]
    assert final["timings"]["ttft_ms"] > 0, final
    assert final["total_duration"] >= final["timings"]["ttft_ms"] * 1e6 * 0.99, final  # nanoseconds


def check_models(client, port):
    names = [m.model for m in client.list().models]
    assert MODEL in names, names
    entry = [m for m in client.list().models if m.model == MODEL][0]
    assert entry.size > 100 << 20 and entry.details.family == "qwen2", entry
    assert entry.details.quantization_level == "Q4_K_M" and entry.details.format == "gguf", entry
    assert len(entry.digest) == 64, entry.digest  # the catalog's sha256 of the file
    shown = client.show(MODEL)
    assert shown.modelinfo["general.architecture"] == "qwen2", shown.modelinfo.get("general.architecture")
    assert shown.capabilities == ["completion", "tools"], shown.capabilities  # Qwen2.5's template has tool syntax
    assert "<|im_start|>" in shown.template, shown.template
    assert shown.details.parameter_size.endswith("M"), shown.details
    running = [m for m in client.ps().models if m.model == MODEL]
    assert len(running) == 1 and running[0].size > 0 and running[0].context_length == 2048, running
    assert running[0].expires_at is not None, running
    assert client.pull(MODEL).status == "success"
    with urllib.request.urlopen("http://127.0.0.1:%d/api/version" % port, timeout=HANG_GUARD_S) as r:
        version = json.loads(r.read())
    assert version["version"] and version["hearth"], version
    with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=HANG_GUARD_S) as r:
        assert r.read() == b"Ollama is running"


def check_errors(client):
    expect_error(404, client.chat, model="no-such-model", messages=MESSAGES)
    expect_error(404, client.generate, model="no-such-model", prompt="hi")
    assert "does not support thinking" in expect_error(400, client.chat, model=MODEL, messages=MESSAGES, think=True)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    # SmolLM2's template has no tool syntax: refused as Ollama refuses a model without the capability.
    assert "does not support tools" in expect_error(400, client.chat, model="smollm2:135m", messages=MESSAGES,
                                                    tools=tools)
    client.generate(model="smollm2:135m", prompt="", keep_alive=0)  # loaded for that answer: unloaded again
    deadline = time.monotonic() + HANG_GUARD_S
    while [m for m in client.ps().models if m.model == "smollm2:135m"]:
        assert time.monotonic() < deadline, "hang guard: smollm2 stayed loaded after keep_alive 0"
        time.sleep(0.05)
    expect_error(400, client.generate, model=MODEL, prompt="x", options={"temperature": "hot"})
    # A name neither installed nor in the catalog: refused before any network, naming the list
    # (Ollama too answers a pull of an unknown name with 500).
    assert "hearth pull --list" in expect_error(500, client.pull, "llama3.2")
    # Deleting needs the Unix socket: the TCP listener cannot tell who asks.
    expect_error(403, client.delete, "smollm2:135m")


def check_load_and_unload(client):
    loaded = client.generate(model=MODEL, prompt="")
    assert loaded.done and loaded.done_reason == "load", loaded
    unloaded = client.generate(model=MODEL, prompt="", keep_alive=0)
    assert unloaded.done_reason == "unload", unloaded
    deadline = time.monotonic() + HANG_GUARD_S
    while [m for m in client.ps().models if m.model == MODEL]:
        assert time.monotonic() < deadline, "hang guard: the model stayed loaded after keep_alive 0"
        time.sleep(0.05)
    again = client.generate(model=MODEL, prompt="Say hi.", options={"temperature": 0, "num_predict": 4})
    assert again.done and again.response, again
    assert again.load_duration > 0, again  # this request waited for the load
    assert again.total_duration > again.load_duration, again
    assert client.generate(model=MODEL, prompt="Say hi.", options={"num_predict": 1}).load_duration == 0


def check_schema(client):
    if not SCHEMA_ENFORCED:
        print("SKIP (part): format with a JSON Schema: the engine does not enforce schemas yet")
        return
    r = client.chat(model=MODEL, format=CITY_SCHEMA, options={"temperature": 0},
                    messages=[{"role": "user", "content": "Describe Paris as JSON: city, country, population."}])
    data = json.loads(r.message.content)
    assert isinstance(data, dict), data
    for key in CITY_SCHEMA["required"]:
        assert key in data, (key, data)
    assert isinstance(data["city"], str) and isinstance(data["country"], str), data
    assert isinstance(data["population"], int) and not isinstance(data["population"], bool), data


def check_tools(client):
    """A tool call through the ollama library: message.tool_calls with the arguments as an
    object, fitting the tool's parameters; the result goes back as a tool message."""
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                       "required": ["city", "unit"]}}}
    question = [{"role": "user", "content": "What is the weather in Lyon right now, in celsius?"}]
    r = client.chat(model=MODEL, messages=question, tools=[weather], options={"temperature": 0, "num_predict": 100})
    calls = r.message.tool_calls or []
    assert len(calls) >= 1 and calls[0].function.name == "get_weather", r.message
    args = dict(calls[0].function.arguments)
    assert args["unit"] in ("celsius", "fahrenheit") and isinstance(args["city"], str), args
    answered = question + [{"role": "assistant", "content": "", "tool_calls": [calls[0]]},
                           {"role": "tool", "content": "14 degrees, cloudy", "tool_name": "get_weather"}]
    final = client.chat(model=MODEL, messages=answered, options={"temperature": 0, "num_predict": 40})
    assert final.done and final.message.content, final
    assert "tools" in client.show(MODEL).capabilities


def link_models(folder):
    """The installed models as symbolic links in folder (skips when the default is missing)."""
    default_chat_model_or_skip()
    for name in os.listdir(models_dir()):
        if name.endswith(".gguf"):
            os.symlink(os.path.join(models_dir(), name), os.path.join(folder, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hearthd", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="the sanitizer build's run: no tool round trip (e2e_tools and the ipc tests cover the "
                         "grammar and call paths there; prefill costs ~20x more under the sanitizers)")
    args = ap.parse_args()
    installed = models_dir()
    folder = tempfile.mkdtemp(prefix="hearth-ollama-models-")
    link_models(folder)
    os.environ["HEARTH_MODELS"] = folder
    port = free_port()
    d = Hearthd(args.hearthd, None, "--listen-ollama", "127.0.0.1:%d" % port, "--parallel", "2", "--ctx", "2048")
    try:
        client = ollama.Client(host="127.0.0.1:%d" % port, timeout=HANG_GUARD_S)
        streamed = check_chat(client)
        check_wire(port)
        g = client.generate(model=MODEL, prompt="What is the capital of France?", options=GREEDY)
        assert g.done and "Paris" in g.response, g
        check_models(client, port)
        check_errors(client)
        check_schema(client)
        if not args.quick:
            check_tools(client)
        check_load_and_unload(client)
        if os.path.exists(os.path.join(folder, "SmolLM2-135M-Instruct.Q4_1.gguf")):
            # Over the Unix socket, as the user hearthd runs as: the link goes, the file stays.
            status, body = d.request("DELETE", "/api/delete", {"model": "smollm2:135m"})
            assert status == 200, body
            assert not os.path.lexists(os.path.join(folder, "SmolLM2-135M-Instruct.Q4_1.gguf"))
            assert os.path.exists(os.path.join(installed, "SmolLM2-135M-Instruct.Q4_1.gguf"))
            assert "smollm2:135m" not in [m.model for m in client.list().models]
        print("streamed: %r" % streamed)
    finally:
        rc = d.close()
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    assert rc == 0, rc
    print("ok")


if __name__ == "__main__":
    main()

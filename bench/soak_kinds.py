"""The request kinds the soak sends beside plain OpenAI completions (issue 47, item 3): what
users send now. Each kind knows its request and how to read its answer, whole or streamed,
and checks the answer is complete and valid; it returns the answer as one string, so a greedy
answer under load can be compared byte for byte with the same request's answer alone.

  tools    OpenAI chat with `tools` (tool_choice auto): a call names an offered function and
           its arguments parse and fit the function's parameters; streamed calls are put
           together from their deltas. Needs a model whose template has tool-call syntax
           (the soak's --tools-model, Qwen2.5-Coder 0.5B by default).
  schema   OpenAI chat with response_format json_schema, and Ollama /api/chat with a schema as
           `format`: the answer parses and validates against the schema (when it ended by
           stop; a length-cut answer is a valid prefix only, so it is compared, not parsed).
  ollama   Ollama /api/chat, whole (one JSON object, done true) or streamed (NDJSON lines, the
           last one done true with a done_reason).
  anthropic  Anthropic /v1/messages, whole (content blocks, stop_reason) or streamed (SSE:
           message_start ... content_block_delta ... message_delta with a stop_reason, then
           message_stop).
Standard library only (the soak runs under the system python).
"""
import json

from tool_defs import SCHEMAS, TOOLS  # tests/e2e, on sys.path through bench/soak.py

TOOL_QUESTIONS = ["What is the weather in Lyon right now, in celsius?", "What time is it in Oslo?",
                  "Write one sentence about a lighthouse."]  # the last one: prose with tools offered

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24},
                                         "population": {"type": "integer", "minimum": 0},
                                         "coastal": {"type": "boolean"}},
        "required": ["city", "population", "coastal"], "additionalProperties": False}
COLOURS = {"type": "object", "properties": {"colours": {"type": "array", "minItems": 1, "maxItems": 4,
                                                        "items": {"enum": ["red", "green", "blue", "yellow"]}}},
           "required": ["colours"]}
SCHEMA_QUESTIONS = [("Describe a city as JSON.", CITY), ("Name some colours of the rainbow as JSON.", COLOURS)]

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def schema_errors(value, schema, path="$"):
    """What in value breaks schema (the keywords the soak's schemas use); empty when it fits."""
    errs = []
    t = schema.get("type")
    if t == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif t == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = t is None or isinstance(value, _TYPES[t])
    if not ok:
        return ["%s: %r is not of type %s" % (path, value, t)]
    if "enum" in schema and value not in schema["enum"]:
        errs.append("%s: %r not in %r" % (path, value, schema["enum"]))
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        errs.append("%s: longer than %d" % (path, schema["maxLength"]))
    if isinstance(value, (int, float)) and "minimum" in schema and value < schema["minimum"]:
        errs.append("%s: %r below %r" % (path, value, schema["minimum"]))
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            errs.append("%s: %d items" % (path, len(value)))
        for i, v in enumerate(value):
            errs += schema_errors(v, schema.get("items", {}), "%s[%d]" % (path, i))
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errs += ["%s: %s missing" % (path, k) for k in schema.get("required", []) if k not in value]
        if schema.get("additionalProperties") is False:
            errs += ["%s: %s not allowed" % (path, k) for k in value if k not in props]
        for k, v in value.items():
            if k in props:
                errs += schema_errors(v, props[k], path + "." + k)
    return errs


class Invalid(Exception):
    """An answer that is not complete and valid: kind names the broken rule."""

    def __init__(self, kind, detail):
        super().__init__(detail)
        self.kind = kind


def check_json(text, schema, finish):
    """A schema-constrained answer: valid JSON fitting the schema, unless cut by its length."""
    if finish != "stop":
        return
    try:
        value = json.loads(text)
    except ValueError as e:
        raise Invalid("schema_not_json", "%r: %s" % (text[:200], e))
    errs = schema_errors(value, schema)
    if errs:
        raise Invalid("schema_invalid", "%r: %s" % (text[:200], "; ".join(errs[:3])))


def check_calls(calls):
    """Tool calls (name, arguments text): offered functions, arguments that fit them."""
    for name, arguments in calls:
        if name not in SCHEMAS:
            raise Invalid("tool_unknown", "a call of %r" % name)
        try:
            args = json.loads(arguments)
        except ValueError as e:
            raise Invalid("tool_arguments_not_json", "%s(%r): %s" % (name, arguments[:200], e))
        errs = schema_errors(args, SCHEMAS[name])
        if errs:
            raise Invalid("tool_arguments_invalid", "%s(%r): %s" % (name, arguments[:200], "; ".join(errs[:3])))


def sse_data(response):
    """The data payloads of an SSE response, parsed; '[DONE]' as the string. Truncation: None last."""
    while True:
        line = response.readline()
        if not line:
            yield None
            return
        line = line.rstrip(b"\r\n")
        if line.startswith(b"data: "):
            payload = line[6:]
            if payload == b"[DONE]":
                yield "[DONE]"
                return
            try:
                yield json.loads(payload)
            except ValueError:
                raise Invalid("bad_event", payload[:300].decode("utf-8", "replace"))


# --- the three surfaces: (body, whole reader, stream reader); a reader returns (text, calls, finish) ---

def openai_whole(data):
    j = json.loads(data)
    choice = j["choices"][0]
    m = choice["message"]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]
    return m.get("content") or "", calls, choice["finish_reason"]


def openai_stream(response):
    text, calls, finish = [], {}, None
    for ev in sse_data(response):
        if ev is None:
            raise Invalid("stream_truncated", "no [DONE] before the end: %r" % "".join(text)[-80:])
        if ev == "[DONE]":
            break
        if ev.get("error"):
            raise Invalid("stream_error_event", json.dumps(ev)[:300])
        for ch in ev.get("choices") or []:
            delta = ch.get("delta") or {}
            text.append(delta.get("content") or "")
            for tc in delta.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], ["", ""])
                f = tc.get("function") or {}
                c[0] += f.get("name") or ""
                c[1] += f.get("arguments") or ""
            finish = ch.get("finish_reason") or finish
    return "".join(text), [tuple(calls[i]) for i in sorted(calls)], finish


def ollama_whole(data):
    j = json.loads(data)
    if j.get("done") is not True:
        raise Invalid("bad_body", "done is not true: %r" % data[:200])
    return j["message"].get("content") or "", [], j.get("done_reason")


def ollama_stream(response):
    text, finish = [], None
    while True:
        line = response.readline()
        if not line:
            raise Invalid("stream_truncated", "no done line before the end: %r" % "".join(text)[-80:])
        if not line.strip():
            continue
        try:
            j = json.loads(line)
        except ValueError:
            raise Invalid("bad_event", line[:300].decode("utf-8", "replace"))
        if j.get("error"):
            raise Invalid("stream_error_event", line[:300].decode("utf-8", "replace"))
        text.append((j.get("message") or {}).get("content") or "")
        if j.get("done"):
            finish = j.get("done_reason")
            break
    return "".join(text), [], finish


def anthropic_whole(data):
    j = json.loads(data)
    text = "".join(b.get("text", "") for b in j["content"] if b["type"] == "text")
    return text, [], j["stop_reason"]


def anthropic_stream(response):
    text, finish, stopped = [], None, False
    for ev in sse_data(response):
        if ev is None:
            break
        kind = ev.get("type")
        if kind == "error":
            raise Invalid("stream_error_event", json.dumps(ev)[:300])
        if kind == "content_block_delta" and ev["delta"].get("type") == "text_delta":
            text.append(ev["delta"]["text"])
        elif kind == "message_delta":
            finish = ev["delta"].get("stop_reason")
        elif kind == "message_stop":
            stopped = True
            break
    if not stopped:
        raise Invalid("stream_truncated", "no message_stop before the end: %r" % "".join(text)[-80:])
    return "".join(text), [], finish


# finish reasons of a complete answer, per surface
FINISHED = {"openai": ("stop", "length", "tool_calls"), "ollama": ("stop", "length"),
            "anthropic": ("end_turn", "max_tokens", "stop_sequence")}
READERS = {"openai": (openai_whole, openai_stream), "ollama": (ollama_whole, ollama_stream),
           "anthropic": (anthropic_whole, anthropic_stream)}
ENDPOINTS = {"openai": "/v1/chat/completions", "ollama": "/api/chat", "anthropic": "/v1/messages"}


def chat_body(surface, model, messages, max_tokens, temperature, seed=None):
    if surface == "ollama":
        opts = {"temperature": temperature, "num_predict": max_tokens}
        if seed is not None:
            opts["seed"] = seed
        return {"model": model, "messages": messages, "options": opts}
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
    if seed is not None and surface == "openai":
        body["seed"] = seed
    return body


class KindCase:
    """One request of a new kind: surface, body, and what its answer must satisfy. run() sends
    it (whole or streamed) and returns the answer as one string; solo holds the answer alone."""

    def __init__(self, label, surface, body, schema=None, tools=False):
        self.label, self.surface, self.body, self.schema, self.tools = label, surface, body, schema, tools
        self.endpoint = ENDPOINTS[surface]
        self.solo = None

    def max_tokens(self):
        return self.body.get("max_tokens") or self.body["options"]["num_predict"]

    def run(self, connect, stream, timeout):
        """connect(timeout) gives a new HTTP connection."""
        body = dict(self.body, stream=stream)
        c = connect(timeout)
        try:
            c.request("POST", self.endpoint, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise Invalid("status_%d" % r.status, r.read()[:300].decode("utf-8", "replace"))
            whole, streamed = READERS[self.surface]
            try:
                text, calls, finish = streamed(r) if stream else whole(r.read())
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise Invalid("bad_body", "%s: %r" % (self.label, e))
        finally:
            c.close()
        if finish not in FINISHED[self.surface]:
            raise Invalid("bad_finish_reason", "%s: %r" % (self.label, finish))
        if calls and not self.tools:
            raise Invalid("tool_unasked", "%s: %r" % (self.label, calls))
        check_calls(calls)
        if self.schema is not None:
            check_json(text, self.schema, "stop" if finish in ("stop", "end_turn") else finish)
        return json.dumps([text, calls, finish])


def kind_cases(model, tools_model, max_tokens, schema_tokens=32, temperature=0, seed=None):
    """The new kinds' cases at each max_tokens (tools ones only with a tools_model); the schema
    ones get at least schema_tokens, room for a whole object (a length-cut one is compared,
    never validated)."""
    cases = []
    for mt in max_tokens:
        for i, (q, schema) in enumerate(SCHEMA_QUESTIONS):
            msgs = [{"role": "user", "content": q}]
            n = max(mt, schema_tokens)
            b = chat_body("openai", model, msgs, n, temperature, seed)
            b["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
            cases.append(KindCase("schema%d" % i, "openai", b, schema=schema))
            b = dict(chat_body("ollama", model, msgs, n, temperature, seed), format=schema)
            cases.append(KindCase("ollama-schema%d" % i, "ollama", b, schema=schema))
        for i, p in enumerate(["Name three colours of the rainbow.", "What is 17 plus 25?"]):
            msgs = [{"role": "user", "content": p}]
            cases.append(KindCase("ollama%d" % i, "ollama", chat_body("ollama", model, msgs, mt, temperature, seed)))
            cases.append(KindCase("anthropic%d" % i, "anthropic",
                                  chat_body("anthropic", model, msgs, mt, temperature, seed)))
        if tools_model:
            for i, q in enumerate(TOOL_QUESTIONS):
                b = chat_body("openai", tools_model, [{"role": "user", "content": q}], max(mt, 64), temperature, seed)
                b["tools"] = TOOLS
                cases.append(KindCase("tools%d" % i, "openai", b, tools=True))
    return cases

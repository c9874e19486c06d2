#!/usr/bin/env python3
"""Expected chat prompts, rendered by each model's own Jinja template with Python's jinja2.

Writes tests/fixtures/chat_templates.json, which tests/tokenizer/chat_template_fixture_test.cpp
compares hearth's native rendering against. For each model it stores the template source
(so the test needs no model file) and, for a fixed set of conversations, the messages and
the text jinja2 renders from them.

The template comes from the file's tokenizer.chat_template (read by a small GGUF metadata
parser below, no `gguf` package needed). The Gemma 3 270M file carries none; for it the
script uses Gemma 3's instruction-tuned template (tokenizer_config.json of google's
gemma-3 "-it" models), which is what hearth's Gemma rendering follows.

Rendering is set up as Hugging Face transformers renders chat templates: a sandboxed
environment with trim_blocks and lstrip_blocks, the loopcontrols extension, bos_token /
eos_token from the file, and raise_exception. Content given as text parts is passed as parts
to a template that renders typed content (Gemma 3's does); a template that cannot (it joins
strings with `+`, as Qwen's and SmolLM's do) gets the parts joined with "\\n" -- how
OpenAI-compatible servers (llama.cpp's among them) hand typed content to such templates, and
how hearth's OpenAI route does.

Run outside CI (needs jinja2):

    python3 -m venv /tmp/chatvenv && /tmp/chatvenv/bin/pip install jinja2
    /tmp/chatvenv/bin/python tests/reference/make_chat_template_fixtures.py \\
        [--models ~/.local/share/hearth/models] [--out tests/fixtures/chat_templates.json]
"""

import argparse
import hashlib
import json
import os
import struct
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

MODELS = [
    ("qwen2.5-coder:0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    ("smollm2:135m", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("gemma3:270m", "gemma-3-270m-q4_k_m.gguf"),
]

# Gemma 3's instruction-tuned chat template, for the 270M file that carries none.
GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""


def text(t):
    return {"type": "text", "text": t}


# (name, messages, add_generation_prompt). Contents carry leading/trailing whitespace in
# places so that templates that trim (Gemma) and those that do not (ChatML) both show.
CONVERSATIONS = [
    ("one user turn", [{"role": "user", "content": "What is the capital of France?"}], True),
    ("system and user", [
        {"role": "system", "content": "You answer in one sentence."},
        {"role": "user", "content": "Why is the sky blue?"},
    ], True),
    ("multi-turn with assistant answers, no system", [
        {"role": "user", "content": "Hi! "},
        {"role": "assistant", "content": "Hello! How can I help you today?"},
        {"role": "user", "content": "Name a prime number.\n"},
        {"role": "assistant", "content": " 7 is prime."},
        {"role": "user", "content": "And an even one?"},
    ], True),
    ("multi-turn with system and assistant answers", [
        {"role": "system", "content": "You are terse.\n"},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "Times 3?"},
    ], True),
    ("empty system message", [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Say hi."},
    ], True),
    ("content as text parts", [
        {"role": "user", "content": [text("Summarise this:"), text(" The cat sat on the mat. ")]},
    ], True),
    ("system and user content as text parts", [
        {"role": "system", "content": [text("Be kind.")]},
        {"role": "user", "content": [text("First part."), text("Second part.")]},
        {"role": "assistant", "content": [text("Noted.")]},
        {"role": "user", "content": [text(""), text("After an empty part.")]},
    ], True),
    ("no generation prompt", [
        {"role": "user", "content": "Ping"},
        {"role": "assistant", "content": "Pong"},
    ], False),
]


def read_gguf_metadata(path, keep_arrays=("tokenizer.ggml.tokens",)):
    """Key -> value for the metadata of a GGUF file; arrays only for the keys in keep_arrays."""
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
              10: "<Q", 11: "<q", 12: "<d"}
    out = {}
    with open(path, "rb") as f:
        def unpack(fmt):
            return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]

        def string():
            return f.read(unpack("<Q")).decode("utf-8", "replace")

        def value(t, keep):
            if t == 8:
                return string()
            if t == 9:
                et, n = unpack("<I"), unpack("<Q")
                items = [value(et, keep) for _ in range(n)]
                return items if keep else None
            return unpack(scalar[t])

        if f.read(4) != b"GGUF":
            raise SystemExit(path + ": not a GGUF file")
        unpack("<I")  # version
        unpack("<Q")  # tensor count
        for _ in range(unpack("<Q")):
            key = string()
            v = value(unpack("<I"), key in keep_arrays)
            if v is not None:
                out[key] = v
    return out


def token_text(meta, key):
    """The text of the token whose id the metadata stores under `key`, or ''."""
    tokens = meta.get("tokenizer.ggml.tokens", [])
    i = meta.get(key)
    return tokens[i] if i is not None and 0 <= i < len(tokens) else ""


def supports_typed_content(template):
    probe = "<typed content probe>"
    try:
        out = template.render(messages=[{"role": "user", "content": [text(probe)]}],
                              add_generation_prompt=False)
    except Exception:
        return False
    return probe in out and "'type'" not in out


def flatten(messages):
    out = []
    for m in messages:
        c = m["content"]
        if isinstance(c, list):
            joined = ""
            for part in c:
                if joined:
                    joined += "\n"
                joined += part["text"]
            c = joined
        out.append({"role": m["role"], "content": c})
    return out


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=os.environ.get("HEARTH_MODELS") or os.path.expanduser(
        "~/.local/share/hearth/models"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures",
                                                  "chat_templates.json"))
    args = ap.parse_args()

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    models = []
    for name, file_name in MODELS:
        path = os.path.join(args.models, file_name)
        meta = read_gguf_metadata(path)
        source = meta.get("tokenizer.chat_template")
        origin = "tokenizer.chat_template of " + file_name
        if source is None:
            if meta.get("general.architecture") != "gemma3":
                raise SystemExit(path + ": no tokenizer.chat_template")
            source = GEMMA3_TEMPLATE
            origin = ("Gemma 3's instruction-tuned template (" + file_name +
                      " carries no tokenizer.chat_template)")
        template = env.from_string(source)
        bos = token_text(meta, "tokenizer.ggml.bos_token_id")
        eos = token_text(meta, "tokenizer.ggml.eos_token_id")
        typed = supports_typed_content(template)
        cases = []
        for case_name, messages, gen in CONVERSATIONS:
            given = messages if typed else flatten(messages)
            expected = template.render(messages=given, add_generation_prompt=gen,
                                       bos_token=bos, eos_token=eos)
            cases.append({"name": case_name, "messages": messages,
                          "add_generation_prompt": gen, "expected": expected})
        with open(path, "rb") as f:
            sha = hashlib.sha256()
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
        models.append({"name": name, "file": file_name, "sha256": sha.hexdigest(),
                       "template_origin": origin, "typed_content": typed,
                       "chat_template": source, "cases": cases})
        print("%s: %d cases (typed content %s)" % (name, len(cases),
                                                    "rendered by the template" if typed
                                                    else "joined with \\n"), file=sys.stderr)

    doc = {"generated_by": "tests/reference/make_chat_template_fixtures.py",
           "jinja2_version": jinja2.__version__,
           "models": models}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print("wrote " + os.path.normpath(args.out), file=sys.stderr)


if __name__ == "__main__":
    main()

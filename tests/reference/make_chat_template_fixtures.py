#!/usr/bin/env python3
"""Expected chat prompts, rendered by each model's own Jinja template with Python's jinja2.

Writes tests/fixtures/chat_templates.json, which tests/tokenizer/chat_template_fixture_test.cpp
compares hearth's native rendering against. For each model it stores the template source
(so the test needs no model file) and, for a fixed set of conversations, the messages and
the text jinja2 renders from them.

The template comes from the file's tokenizer.chat_template (read by a small GGUF metadata
parser below, no `gguf` package needed). The Gemma 3 270M file carries none; for it the
script uses Gemma 3's instruction-tuned template (tokenizer_config.json of google's
gemma-3 "-it" models), which is what hearth's Gemma rendering follows. Llama 3.1 and Qwen3
have no file here at all: their entries use Meta's template as published in
Llama-3.1-8B-Instruct's tokenizer_config.json (LLAMA31_TEMPLATE below), with Llama 3's BOS,
and Qwen3's from Qwen3-0.6B's (QWEN3_TEMPLATE), which also renders THINKING_CONVERSATIONS:
reasoning in the history and enable_thinking.

Templates with a tool syntax (Qwen2.5's <tool_call>, Llama 3.1's ipython) also render
TOOL_CONVERSATIONS: tools given as the JSON text a client sends (so the test sees the same
bytes hearth gets), calls with their arguments as a JSON string (OpenAI's wire form), which
are handed to the template parsed -- as llama.cpp and vLLM do. A conversation the template
refuses (raise_exception) is stored with the error instead of an expected text.
`tojson` is transformers' own filter (json.dumps with ensure_ascii=False, keys unsorted), not
jinja2's built-in, since that is what models' templates are written for.

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
    ("llama3.1", None),  # no file: LLAMA31_TEMPLATE
    ("qwen3", None),  # no file: QWEN3_TEMPLATE
]

# Meta's Llama 3.1 chat template (tokenizer_config.json of meta-llama/Llama-3.1-8B-Instruct;
# llama.cpp keeps the same text as models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja).
LLAMA31_TEMPLATE = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\\n\\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

# Qwen3's chat template (tokenizer_config.json of Qwen/Qwen3-0.6B, the same in the dense
# Qwen3 models and in Qwen3-30B-A3B; llama.cpp keeps it as models/templates/Qwen-Qwen3-0.6B.jinja).
QWEN3_TEMPLATE = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

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


# Tools as a client sends them: JSON text, keys in the client's order, with what tojson must
# write exactly as Python does -- unicode, escapes (\u00e9, \/, a control character, an
# emoji's surrogate pair), HTML-ish text that jinja2's own tojson would escape, numbers of
# every kind (0.5, 1e-3, 1E2, 1.0, -0, 1e16, 1.5e-7, an integer past 64 bits), whitespace.
WEATHER_TOOL = r"""{"type": "function", "function": {"name": "get_weather",
  "description": "Météo actuelle d'une ville \u2014 東京, Zürich; answers in °C or °F",
  "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "description": "City name, e.g. \"Lyon\" or \u00c9vian"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
    "required": ["city"]}}}"""
SEARCH_TOOL = r"""{"function":{"name":"search_docs","description":"Search the docs.\nReturns <b>HTML</b> & 'snippets' \/ paths\tC:\\docs \ud83d\ude00 \u0001","parameters":{"type":"object","properties":{"query":{"type":"string","minLength":1},"filters":{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"maxItems":5},"score":{"type":"number","minimum":0.5,"maximum":1E2,"multipleOf":1e-3,"default":1.0},"offset":{"type":"number","default":-0,"examples":[1e16,1.5e-7,-2.50,100.0,0.0001,0.00001,123456789.125]}},"required":[]},"limit":{"type":"integer","default":10,"maximum":123456789012345678901234567890}},"required":["query"],"additionalProperties":false},"strict":true},"type":"function"}"""
TIME_TOOL = """{"type": "function", "function": {"name": "get_time", "description": "", "parameters": {"type": "object", "properties": {}}}}"""
TOOLS = [WEATHER_TOOL, SEARCH_TOOL, TIME_TOOL]


def call(id, name, arguments):
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def called(*calls, content=None):
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def result(id, content):
    return {"role": "tool", "tool_call_id": id, "content": content}


LYON = call("call_1", "get_weather", '{"city": "Lyon", "unit": "celsius"}')
TRICKY_ARGS = call("call_9", "search_docs", r"""{ "query" : "say \"hi\" \\ \/ \u00e9\n\t\u0007 </tool_call> {not: json}",
  "filters": {"score": 0.5, "offset": 1e-3, "tags": ["a", "b"], "nested": {"deep": [[], {}, [1, 2.0, -0, 1E2]]}},
  "limit": 12345678901234567890123, "flag": true, "none": null, "b": 1, "a": 2, "b": 3}""")

# (name, tools, messages, add_generation_prompt), rendered for templates with a tool syntax.
TOOL_CONVERSATIONS = [
    ("tools without a system message", TOOLS, [
        {"role": "user", "content": "What's the weather in Lyon?"},
    ], True),
    ("system message and tools", TOOLS[:1], [
        {"role": "system", "content": " You are a weather bot. "},
        {"role": "user", "content": " Lyon, please. "},
    ], True),
    ("a call, its result and the answer", TOOLS[:2], [
        {"role": "user", "content": "Weather in Lyon?"},
        called(LYON),
        result("call_1", '{"temp": 21.5, "sky": "clear \u2600"}'),
        {"role": "assistant", "content": "It is 21.5 °C and clear in Lyon."},
    ], False),
    ("several turns with calls", TOOLS, [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Lyon?"},
        called(LYON),
        result("call_1", "21 °C"),
        {"role": "assistant", "content": "21 °C."},
        {"role": "user", "content": "And what time is it?"},
        called(call("call_2", "get_time", "{}")),
        result("call_2", "12:00"),
    ], True),
    ("parallel calls and consecutive tool messages", TOOLS, [
        {"role": "user", "content": "Weather in Lyon and in Tokyo?"},
        called(LYON, call("call_2", "get_weather", '{"city": "東京"}')),
        result("call_1", "21 °C"),
        result("call_2", "18 °C"),
    ], True),
    ("content with a call", TOOLS[:1], [
        {"role": "user", "content": "Weather in Lyon?"},
        called(LYON, content="Let me check."),
        result("call_1", "sunny"),
    ], True),
    ("arguments that test tojson", TOOLS, [
        {"role": "user", "content": "Search the docs."},
        called(TRICKY_ARGS),
        result("call_9", 'a "quoted" result\nwith \\ and </tool_response> and é'),
    ], True),
    ("tool messages without tools", [], [
        {"role": "user", "content": "Weather in Lyon?"},
        called(LYON),
        result("call_1", "21 °C"),
    ], True),
    ("tools and nothing but a system message", TOOLS[:1], [
        {"role": "system", "content": "Only a system message."},
    ], True),
]


def thought(content, reasoning=None, calls=()):
    m = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    if calls:
        m["tool_calls"] = list(calls)
    return m


# (name, tools, messages, add_generation_prompt, enable_thinking), rendered for Qwen3: the
# reasoning block in the history (kept after the last user query, dropped before it, from
# reasoning_content or from a <think> block in content) and enable_thinking. None: the
# template is not given enable_thinking at all (its default: thinking).
THINKING_CONVERSATIONS = [
    ("thinking off", [], [{"role": "user", "content": "What is 2+2?"}], True, False),
    ("thinking on, said so", [], [{"role": "user", "content": "What is 2+2?"}], True, True),
    ("earlier reasoning in content is dropped", [], [
        {"role": "user", "content": "What is 2+2?"},
        thought("<think>\nTwo and two.\n\n</think>\n\n4"),
        {"role": "user", "content": "Times 3?"},
    ], True, None),
    ("earlier reasoning_content is dropped, thinking off", [], [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        thought("4", "Two and two make four."),
        {"role": "user", "content": "Times 3?"},
    ], True, False),
    ("reasoning in the current tool loop is kept", TOOLS[:1], [
        {"role": "user", "content": "Weather in Lyon?"},
        thought("", "\nI need the weather tool.\n", [LYON]),
        result("call_1", "21 °C"),
    ], True, None),
    ("reasoning in content with a call, then the answer", TOOLS[:1], [
        {"role": "user", "content": "Weather in Lyon?"},
        thought("<think>\nCall the tool.\n</think>\n\nLet me check.", None, [LYON]),
        result("call_1", "21 °C"),
        thought("<think>\nIt said 21.\n</think>\n\nIt is 21 °C."),
    ], False, None),
    ("tool results in a user message are not a query", TOOLS[:1], [
        {"role": "user", "content": "Weather in Lyon?"},
        thought("", "Use the tool.", [LYON]),
        {"role": "user", "content": "<tool_response>\n21 °C\n</tool_response>"},
    ], True, None),
    ("an answer without reasoning after the query, and a later system message", [], [
        {"role": "user", "content": "Hi"},
        thought("Hello!"),
        {"role": "system", "content": "Now answer in French."},
        {"role": "user", "content": "Hi again"},
        thought("Bonjour !"),
    ], False, None),
    ("empty reasoning_content keeps a <think> block in content as content", [], [
        {"role": "user", "content": "Q"},
        thought("<think>x</think>A", ""),
        {"role": "user", "content": "Q2"},
        thought("B", "why B"),
    ], True, False),
    ("several <think> and </think> in content", [], [
        {"role": "user", "content": "Q"},
        thought("pre<think>a</think>mid<think>\nb\n</think>\n\nend"),
    ], False, None),
]


def qwen3_entry(env, name):
    """Qwen3's template on every conversation; an assistant message's null content is handed
    over as "" (the template tests `'</think>' in message.content`, which fails on None; hearth
    reads null content as "")."""
    template = env.from_string(QWEN3_TEMPLATE)
    bos, eos = "", "<|im_end|>"
    typed = supports_typed_content(template)
    cases = plain_cases(template, bos, eos, typed)
    no_null = [(n, t, [dict(m, content=m["content"] or "") for m in msgs], g)
               for n, t, msgs, g in TOOL_CONVERSATIONS]
    cases += tool_cases(template, bos, eos, no_null)
    for case_name, tools, messages, gen, thinking in THINKING_CONVERSATIONS:
        case = {"name": case_name, "messages": messages, "add_generation_prompt": gen}
        kwargs = {}
        if tools:
            case["tools"] = tools
            kwargs["tools"] = [json.loads(t) for t in tools]
        if thinking is not None:
            case["enable_thinking"] = thinking
            kwargs["enable_thinking"] = thinking
        case["expected"] = template.render(messages=as_template_sees(messages), add_generation_prompt=gen,
                                           bos_token=bos, eos_token=eos, **kwargs)
        cases.append(case)
    print("%s: %d cases" % (name, len(cases)), file=sys.stderr)
    return {"name": name, "file": None, "sha256": None,
            "template_origin": "Qwen/Qwen3-0.6B tokenizer_config.json (no model file)",
            "typed_content": typed, "tool_syntax": True, "chat_template": QWEN3_TEMPLATE,
            "cases": cases}


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


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' `tojson` filter (chat_template_utils.py), which chat templates are written for."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def as_template_sees(messages):
    """The messages with each call's arguments parsed, as llama.cpp and vLLM hand them over."""
    out = []
    for m in messages:
        m = dict(m)
        if "tool_calls" in m:
            m["tool_calls"] = [dict(c, function=dict(c["function"],
                                                     arguments=json.loads(c["function"]["arguments"])))
                               for c in m["tool_calls"]]
        out.append(m)
    return out


def has_tool_syntax(source):
    return "<tool_call>" in source or "ipython" in source


def tool_cases(template, bos, eos, conversations=None):
    cases = []
    for case_name, tools, messages, gen in conversations or TOOL_CONVERSATIONS:
        case = {"name": case_name, "tools": tools, "messages": messages, "add_generation_prompt": gen}
        kwargs = {"tools": [json.loads(t) for t in tools]} if tools else {}
        try:
            case["expected"] = template.render(messages=as_template_sees(messages),
                                               add_generation_prompt=gen, bos_token=bos,
                                               eos_token=eos, **kwargs)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = str(e)
        cases.append(case)
    return cases


def plain_cases(template, bos, eos, typed):
    cases = []
    for case_name, messages, gen in CONVERSATIONS:
        given = messages if typed else flatten(messages)
        expected = template.render(messages=given, add_generation_prompt=gen,
                                   bos_token=bos, eos_token=eos)
        cases.append({"name": case_name, "messages": messages,
                      "add_generation_prompt": gen, "expected": expected})
    return cases


def llama31_entry(env, name):
    template = env.from_string(LLAMA31_TEMPLATE)
    bos, eos = "<|begin_of_text|>", "<|eot_id|>"
    typed = supports_typed_content(template)
    cases = plain_cases(template, bos, eos, typed) + tool_cases(template, bos, eos)
    print("%s: %d cases" % (name, len(cases)), file=sys.stderr)
    return {"name": name, "file": None, "sha256": None,
            "template_origin": "Meta's Llama-3.1-8B-Instruct tokenizer_config.json (no model file)",
            "typed_content": typed, "tool_syntax": True, "chat_template": LLAMA31_TEMPLATE,
            "cases": cases}


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
    env.filters["tojson"] = tojson
    models = []
    for name, file_name in MODELS:
        if file_name is None:
            models.append(qwen3_entry(env, name) if name == "qwen3" else llama31_entry(env, name))
            continue
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
        cases = plain_cases(template, bos, eos, typed)
        with open(path, "rb") as f:
            sha = hashlib.sha256()
            for block in iter(lambda: f.read(1 << 20), b""):
                sha.update(block)
        tools = has_tool_syntax(source)
        if tools:
            cases += tool_cases(template, bos, eos)
        models.append({"name": name, "file": file_name, "sha256": sha.hexdigest(),
                       "template_origin": origin, "typed_content": typed,
                       "tool_syntax": tools, "chat_template": source, "cases": cases})
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

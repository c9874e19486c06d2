"""The two functions offered in tool-call requests, shared by tests/e2e/tools_test.py and the
soak's tool kind (bench/soak_kinds.py), so both ask the model the same thing. Each importer
puts tests/e2e on sys.path (ctest runs tools_test.py by its path; bench/soak.py adds it)."""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TOOLS = [WEATHER, TIME]
# Each function's parameters by its name: what a call's arguments must fit.
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}

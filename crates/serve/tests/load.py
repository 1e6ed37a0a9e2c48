"""A bounded load run against tinygrad-serve on loopback: N concurrent clients send R requests
(mixed streaming and non-streaming chat, distinct seeds), each checked against the same request
run alone first (equal text: no failed, truncated or mixed-up replies); prints p50/p99 latency
and aggregate tokens/s (prompts' prefill included), and the aggregate decode rate (prefill
excluded, while all of them decode) of 1 stream against 8 concurrent ones.

usage: load.py BASE_URL [--clients 64] [--requests 1000] [--max-tokens 32] [--distinct 24]
"""
import argparse
import asyncio
import statistics
import time

from openai import AsyncOpenAI

p = argparse.ArgumentParser()
p.add_argument("base_url")
p.add_argument("--clients", type=int, default=64)
p.add_argument("--requests", type=int, default=1000)
p.add_argument("--max-tokens", type=int, default=32)
p.add_argument("--distinct", type=int, default=24)
args = p.parse_args()
assert args.clients <= 256 and args.requests <= 5000, "bounded: at most 256 clients, 5000 requests"

client = AsyncOpenAI(base_url=args.base_url, api_key="x", max_retries=0, timeout=600)


def spec(i):
    k = i % args.distinct
    return dict(messages=[{"role": "user", "content": f"Write a line about the number {k}."}],
                max_tokens=args.max_tokens, temperature=0.8, seed=100 + k,
                stream=(i % 2 == 0))


async def run(i, model):
    s = spec(i)
    t0 = time.perf_counter()
    if s["stream"]:
        text, tokens, finish = [], 0, None
        stream = await client.chat.completions.create(model=model, **s,
                                                      stream_options={"include_usage": True})
        async for chunk in stream:
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
            for c in chunk.choices:
                if c.delta.content:
                    text.append(c.delta.content)
                finish = c.finish_reason or finish
        text = "".join(text)
    else:
        r = await client.chat.completions.create(model=model, **s)
        text, tokens, finish = r.choices[0].message.content, r.usage.completion_tokens, \
            r.choices[0].finish_reason
    assert finish in ("stop", "length"), f"request {i}: finish {finish!r} (truncated?)"
    return i, text, tokens, time.perf_counter() - t0


async def main():
    model = (await client.models.list()).data[0].id
    # references, one at a time (non-streamed and streamed replies must be equal)
    ref = {}
    for k in range(args.distinct):
        for i in (k, k + args.distinct):
            _, text, _, _ = await run(i, model)
            if k in ref:
                assert ref[k] == text, f"spec {k}: streamed and plain replies differ"
            ref[k] = text
    # one stream's decode rate against 8 concurrent ones: streamed chunks (about one per
    # token) that arrive while every stream is decoding (after each has its first token: all
    # prompts prefilled; until the first stream ends: replies that end early would leave fewer
    # streams than measured), over that window
    async def chunk_times(j):
        s = spec(2 * j)
        # a prompt that asks for a long reply (a short one would end the window early)
        s["messages"] = [{"role": "user", "content": f"Tell a long story about the number {j}, "
                          "in several paragraphs."}]
        s["max_tokens"] = 4 * args.max_tokens
        times = []
        async for chunk in await client.chat.completions.create(model=model, **s):
            if chunk.choices and chunk.choices[0].delta.content:
                times.append(time.perf_counter())
        return times

    async def rate(n):
        streams = [t for t in await asyncio.gather(*(chunk_times(j) for j in range(n))) if t]
        if not streams:
            return float("nan")
        start = max(t[0] for t in streams)
        end = min(t[-1] for t in streams)
        inside = sum(sum(1 for x in t if start < x <= end) for t in streams)
        return inside / (end - start) if end > start else float("nan")
    one = statistics.median([await rate(1) for _ in range(3)])
    eight = statistics.median([await rate(8) for _ in range(3)])
    # the load: a queue of requests, `clients` workers
    queue = list(range(args.requests))
    results, failures = [], []

    async def worker():
        while queue:
            i = queue.pop()
            try:
                results.append(await run(i, model))
            except Exception as e:  # a failed request is counted, not fatal
                failures.append(f"request {i}: {e!r}")

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(args.clients)))
    wall = time.perf_counter() - t0
    mixed = [i for i, text, _, _ in results if text != ref[i % args.distinct]]
    lat = sorted(r[3] for r in results)
    tokens = sum(r[2] for r in results)
    print(f"load: {args.clients} clients, {args.requests} requests in {wall:.1f} s: "
          f"{len(failures)} failed, {len(mixed)} mixed-up; latency p50 {lat[len(lat) // 2]:.3f} s, "
          f"p99 {lat[min(len(lat) - 1, int(len(lat) * 0.99))]:.3f} s; "
          f"{tokens / wall:.1f} tokens/s aggregate")
    print(f"decode: 1 stream {one:.1f} tokens/s, 8 streams {eight:.1f} tokens/s aggregate "
          f"({eight / one:.2f}x)")
    assert not failures, failures[:5]
    assert not mixed, f"replies differ from their solo runs: {mixed[:10]}"
    assert len(results) == args.requests


asyncio.run(main())

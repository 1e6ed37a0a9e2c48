#!/usr/bin/env python3
"""Golden cases for crates/tensor/src/keccak.rs, checked by crates/tensor/tests/keccak.rs.

References are Python's hashlib (sha3_224, sha3_256, shake_128 with a 16-byte digest), over the
input's bytes (numpy's little-endian memory layout for wider dtypes), one digest per row of the
leading dims. `hash` follows tinygrad's tree: the bytes zero-padded to whole MiB chunks, each
chunk's 4 KiB blocks hashed with shake_128, the chunk digest the shake_128 of its block
digests, repeated over the concatenated chunk digests until one chunk remains (the first 16
bytes of the last level).

Run: python3 tests/golden/gen_keccak.py  (writes tests/golden/keccak_cases.json)
"""
import hashlib
import json
import os

import numpy as np

rng = np.random.default_rng(20261202)
CHUNK = 1 << 20


def digest(cfg, b):
    if cfg == "shake_128":
        return hashlib.shake_128(b).digest(16)
    return hashlib.new(cfg, b).digest()


def tree_hash(b):
    def pad(d):
        return d + b"\0" * ((-len(d)) % CHUNK) if len(d) % CHUNK else d
    data = pad(b)
    base = len(data) // CHUNK
    depth = 0
    while base > 1 and 65536 ** depth < base:
        depth += 1
    for _ in range(depth + 1):
        out = b""
        for c in range(0, len(data), CHUNK):
            chunk = data[c:c + CHUNK]
            blocks = b"".join(digest("shake_128", chunk[i:i + 4096]) for i in range(0, CHUNK, 4096))
            out += digest("shake_128", blocks)
        data = pad(out)
    return data[:16]


def spec(a):
    return {"data": [int(v) if a.dtype.kind in "iub" else float(v) for v in a.reshape(-1)],
            "shape": list(a.shape), "dtype": str(a.dtype)}


cases = []


def keccak(name, a, cfg):
    rows = a.reshape(int(np.prod(a.shape[:-1])), a.shape[-1])
    out = np.array([list(digest(cfg, r.tobytes())) for r in rows], dtype=np.uint8)
    out = out.reshape(*a.shape[:-1], out.shape[-1])
    cases.append({"name": name, "op": "keccak", "cfg": cfg, "input": spec(a), "out": spec(out)})


def hashcase(name, a):
    out = np.frombuffer(tree_hash(a.tobytes()), dtype=np.uint8)
    cases.append({"name": name, "op": "hash", "input": spec(a), "out": spec(out)})


def u8(n):
    return rng.integers(0, 256, n).astype(np.uint8)


keccak("sha3_256_hello", np.frombuffer(b"Hello World!", dtype=np.uint8).copy(), "sha3_256")
keccak("sha3_256_empty", np.zeros(0, np.uint8), "sha3_256")
# message lengths around the 136-byte rate: one pad byte (dsbyte ^ 0x80), a full block of padding
for n in (1, 135, 136, 137, 300):
    keccak(f"sha3_256_len{n}", u8(n), "sha3_256")
keccak("sha3_224_len143", u8(143), "sha3_224")
keccak("sha3_224_rows_3x50", u8((3, 50)), "sha3_224")
keccak("shake_128_len167", u8(167), "shake_128")
keccak("shake_128_len400", u8(400), "shake_128")
keccak("shake_128_batched_2x2x20", u8((2, 2, 20)), "shake_128")
keccak("sha3_256_int32_le_bytes", rng.integers(-2**31, 2**31, (2, 9)).astype(np.int32), "sha3_256")
keccak("sha3_256_float32_le_bytes", rng.standard_normal(13).astype(np.float32), "sha3_256")
hashcase("hash_float32_3", np.array([1.0, 2.0, 3.0], np.float32))
hashcase("hash_uint8_5000", u8(5000))

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keccak_cases.json")
with open(out, "w") as f:
    json.dump(cases, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {out}")

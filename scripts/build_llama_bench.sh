#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench` (the reference of `cargo xtask bench`'s gguf_* rows) from the
# source that PyPI's `llama-cpp-python` sdist vendors, tuned for this CPU (-DGGML_NATIVE=ON),
# into target/llama.cpp/bin/llama-bench (static: no shared libraries to carry). Needs cmake and a
# C++ compiler (`apt-get install cmake g++`, or PyPI's `pip install cmake` on the PATH); about 10
# minutes on 2 cores. PIP= names the pip to download with. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.3.36
DEST=target/llama.cpp
OUT="$DEST/bin/llama-bench"
if [ ! -x "$OUT" ]; then
    mkdir -p "$DEST"
    if [ ! -d "$DEST/llama_cpp_python-$VERSION" ]; then
        # scikit-build-core is the sdist's build backend: without it pip would try to build cmake
        ${PIP:-python3 -m pip} install -q --disable-pip-version-check scikit-build-core >&2
        ${PIP:-python3 -m pip} download -q --no-deps --no-binary :all: --no-build-isolation \
            --disable-pip-version-check "llama-cpp-python==$VERSION" -d "$DEST" >&2
        tar xzf "$DEST/llama_cpp_python-$VERSION.tar.gz" -C "$DEST"
    fi
    src="$DEST/llama_cpp_python-$VERSION/vendor/llama.cpp"
    cmake -S "$src" -B "$DEST/build" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release >&2
    cmake --build "$DEST/build" -j"$(nproc)" --target llama-bench >&2
    mkdir -p "$DEST/bin"
    cp "$DEST/build/bin/llama-bench" "$OUT"
fi
echo "$OUT"

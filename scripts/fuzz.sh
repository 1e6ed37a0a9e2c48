#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ on the stable toolchain (what `cargo fuzz build -s none`
# does: sanitizer-coverage instrumentation, no sanitizer) and runs each for SECONDS (default 60)
# from its committed corpus. New inputs found go to a scratch corpus, not the committed one.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECONDS_PER_TARGET="${1:-60}"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# an explicit --target keeps the instrumentation flags off build scripts and proc macros
HOST=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --bins --target "$HOST"
for target in ${FUZZ_TARGETS:-safetensors_load shape_ops gguf_load torch_load onnx_load gguf_tokenizer}; do
    scratch="target/corpus-$target"
    mkdir -p "$scratch"
    echo "fuzzing $target for ${SECONDS_PER_TARGET}s"
    # -rss_limit_mb: a hostile input must not make the loader allocate beyond its size
    "target/$HOST/release/$target" "$scratch" "corpus/$target" \
        -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -timeout=20 \
        -print_final_stats=1 2>&1 | tail -12
done

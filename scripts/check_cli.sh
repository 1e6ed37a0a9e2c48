#!/usr/bin/env bash
# Every example, `xtask` and `tinygrad-serve` answers `--help` (exit 0, a usage line) and refuses an unknown flag
# with the usage on stderr and exit status 2 (clap's usage error); README's onnx_run command runs.
# Builds them first (debug).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --workspace --examples --bins
fail=0
check() { # name, binary
    local name="$1" bin="$2" out rc
    out=$("$bin" --help 2>&1) && rc=0 || rc=$?
    if [ "$rc" != 0 ] || ! grep -q '^Usage: ' <<<"$out"; then
        echo "FAIL $name --help: exit $rc"; echo "$out" | head -5; fail=1; return
    fi
    out=$("$bin" --no-such-flag 2>&1 >/dev/null) && rc=0 || rc=$?
    if [ "$rc" != 2 ] || ! grep -q '^Usage: ' <<<"$out"; then
        echo "FAIL $name --no-such-flag: exit $rc (expected 2 and the usage)"; echo "$out" | head -5
        fail=1; return
    fi
    echo "ok   $name: --help, and an unknown flag exits 2 with the usage"
}
n=0
for src in crates/*/examples/*.rs; do
    name=$(basename "$src" .rs)
    check "example $name" "target/debug/examples/$name"
    n=$((n + 1))
done
check "xtask" "target/debug/xtask"
check "tinygrad-serve" "target/debug/tinygrad-serve"
[ "$n" -ge 7 ] || { echo "FAIL: found only $n examples"; fail=1; }
# README's onnx_run command runs; without the --dim it refuses, naming the dim, before running.
onnx_run=target/debug/examples/onnx_run
model=crates/onnx/tests/data/resnet_tiny.onnx
if out=$("$onnx_run" "$model" --dim batch=1 --runs 1 2>&1) && grep -q 'output logits' <<<"$out"; then
    echo "ok   onnx_run: README's command runs"
else
    echo "FAIL onnx_run $model --dim batch=1:"; echo "$out" | tail -5; fail=1
fi
if out=$("$onnx_run" "$model" 2>&1); then
    echo "FAIL onnx_run without --dim ran"; fail=1
elif grep -q 'give --dim batch=SIZE' <<<"$out"; then
    echo "ok   onnx_run: a symbolic dim without --dim is refused by name"
else
    echo "FAIL onnx_run without --dim:"; echo "$out" | tail -5; fail=1
fi
exit "$fail"

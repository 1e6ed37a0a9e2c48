#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU and its driver (no CUDA toolkit needed: PTX is
# rendered by tinygrad-rs and compiled by the driver). Builds with the `cuda` feature and runs
# on the CUDA device:
#   1. the CUDA tests of crates/tensor/tests/ptx.rs (every dtype and op class vs REF, a large
#      launch), with TINYGRAD_REQUIRE_CUDA=1 so a missing GPU fails instead of skipping;
#   2. the golden suite (738 cases of tests/golden/cases.json) with DEV=CUDA;
#   2b. tinygrad's test_ops.py calls (crates/tensor/tests/test_ops.rs, every case) on CUDA;
#   3. the CPU/REF/CUDA differential proptest (random graphs) with DEV=CUDA;
#   3b. device memory: a 20-kernel graph and beautiful_mnist steps move only their inputs and
#      results between host and GPU (transfer counters), to() between every pair of devices;
#   4. every other tensor test with DEV=CUDA (tensors created without a device land on CUDA;
#      tests/multi.rs's NCCL all-reduce runs where there are two GPUs and libnccl, and prints
#      why it skipped otherwise);
#   5. `cargo xtask bench` on CUDA (all its rows run on DEV; kernel-only GFLOP/s from DEBUG=2,
#      timed with CUDA events), when this checkout has the bench.
# Everything builds once, in release. Budget: under 8 minutes on a 16-core machine (each step
# has its own timeout). Exits non-zero if any step fails; prints a summary either way.
#
# Usage: scripts/gpu-check.sh            (from anywhere in the repository)
set -uo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
elapsed() { echo $(($(date +%s) - start)); }
failed=()
step() { # step NAME TIMEOUT_S CMD...: run, record the result, never abort the script
    local name=$1 limit=$2
    shift 2
    echo
    echo "=== [$(elapsed)s] $name"
    if timeout "$limit" "$@"; then
        echo "=== $name: ok"
    else
        local rc=$?
        echo "=== $name: FAILED (exit $rc$([ "$rc" = 124 ] && echo ", timed out after ${limit}s"))"
        failed+=("$name")
    fi
}

echo "=== GPU"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader
else
    echo "nvidia-smi not found (the CUDA test below still says whether the driver loads)"
fi

export TINYGRAD_REQUIRE_CUDA=1
FEATURES=(--release -p tinygrad-tensor --features cuda)

step "build (release, --features cuda)" 300 cargo test "${FEATURES[@]}" --no-run --quiet
if [ ${#failed[@]} -ne 0 ]; then
    echo "build failed; nothing else can run"
    exit 1
fi

step "CUDA vs REF, every dtype and op class" 120 \
    cargo test "${FEATURES[@]}" --quiet --test ptx -- --nocapture cuda
step "golden suite on CUDA" 120 \
    env DEV=CUDA cargo test "${FEATURES[@]}" --quiet --test golden -- --nocapture golden_dev
step "tinygrad's test_ops.py calls on CUDA" 180 \
    env DEV=CUDA cargo test "${FEATURES[@]}" --quiet --test test_ops -- --nocapture test_ops_dev
step "differential proptest CPU/REF/CUDA" 120 \
    env DEV=CUDA cargo test "${FEATURES[@]}" --quiet --test differential -- --nocapture
step "device memory on CUDA (transfer counters, to() between devices)" 120 \
    cargo test "${FEATURES[@]}" --quiet --test device_memory --test devices -- --nocapture
# Every other test binary of the tensor crate, with CUDA as the default device.
others=()
for f in crates/tensor/tests/*.rs; do
    t=$(basename "$f" .rs)
    case $t in ptx | golden | differential | test_ops | device_memory | devices) ;; *) others+=(--test "$t") ;; esac
done
step "other tensor tests with DEV=CUDA" 120 \
    env DEV=CUDA cargo test "${FEATURES[@]}" --quiet "${others[@]}"

if grep -q '"bench"' xtask/src/main.rs 2>/dev/null; then
    echo
    echo "=== [$(elapsed)s] cargo xtask bench on CUDA (wall time; buffers stay on the GPU)"
    XTASK=(cargo run --quiet --release -p xtask --features tinygrad-tensor/cuda --)
    if timeout 150 env DEV=CUDA "${XTASK[@]}" bench --quick; then
        echo "=== kernel-only timings (DEBUG=2, CUDA events), fastest line per kernel:"
        timeout 60 env DEV=CUDA DEBUG=2 "${XTASK[@]}" bench --quick matmul 2>&1 >/dev/null |
            grep '^\*\*\* CUDA' | sort -k3,3 -k8,8gr | awk '!seen[$3]++' | head -20
    else
        failed+=("bench")
    fi
else
    echo "=== (no \`cargo xtask bench\` in this checkout: skipped)"
fi

echo
echo "=== done in $(elapsed)s"
if [ ${#failed[@]} -ne 0 ]; then
    printf '=== FAILED: %s\n' "${failed[@]}"
    exit 1
fi
echo "=== all GPU checks passed"

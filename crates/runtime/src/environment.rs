//! The environment variables the library reads, in one place: [`VARIABLES`] (name and meaning)
//! and [`help`], the text the examples' and `xtask`'s `--help` print.
//!
//! Each variable is read once, where it acts (the module named in its entry); a test
//! (`crates/tensor/tests/environment.rs`) checks that every variable read under `crates/*/src`
//! has an entry here and every entry is read, so the list cannot fall behind the code.

/// Every environment variable the library reads: `(name, what it does)`.
pub const VARIABLES: &[(&str, &str)] = &[
    (
        "DEV",
        "the default device: CPU (default), REF, WEBGPU, CUDA, with an index (CPU:1)",
    ),
    (
        "DEBUG",
        "tinygrad's debug levels: 2 a line per kernel with its time, 3 the opts, 4 the code, \
         5/6 the kernel's UOps / linear program, 7 the CPU's machine code",
    ),
    (
        "DEFAULT_FLOAT",
        "the default float dtype (float32 unless set, e.g. float16)",
    ),
    (
        "NOOPT",
        "1: CPU kernels without the heuristic optimizations (no splits, no unrolls)",
    ),
    (
        "BEAM",
        "n: search each new CPU kernel's optimizations by timing, beam width n",
    ),
    (
        "BEAM_TIMEOUT",
        "seconds one BEAM search may take (default 10)",
    ),
    (
        "BEAM_CACHE_DIR",
        "where BEAM winners are cached (default ~/.cache/tinygrad-rs/beam)",
    ),
    (
        "JIT",
        "0: a Jit runs its function every call instead of capturing and replaying",
    ),
    (
        "JIT_CHECK",
        "1: every Jit replay also runs the function without the JIT and compares, bit for bit",
    ),
    (
        "OPT_ORDER",
        "0: keep the loop order of matmul-shaped kernels (no vector axis outermost)",
    ),
    (
        "SCHEDULE_CACHE",
        "0: schedule every realize anew (no reuse for repeated graphs)",
    ),
    (
        "SPLIT_REDUCEOP",
        "0: do not split large reductions into two kernels",
    ),
    (
        "KERNEL_CACHE_SIZE",
        "compiled kernels kept (default 4096, least recently used evicted)",
    ),
    (
        "CPU_THREADS",
        "n: threads for CPU kernels (default: all cores)",
    ),
    (
        "CPU_GEMM",
        "0: matmul-shaped kernels through Cranelift instead of the native GEMM path",
    ),
    (
        "CPU_GEMM_MIN_FLOPS",
        "the smallest product (in FLOPs) sent to the GEMM path",
    ),
    (
        "CPU_GEMM_IN_PLACE",
        "0: the GEMM path packs every operand (no in-place reads)",
    ),
    (
        "CPU_AVX512",
        "0: the AVX2 micro-kernel and loops on a CPU with AVX-512",
    ),
    (
        "CPU_ROW_REDUCE",
        "0: float32 row/column sums and maxima through Cranelift, not native loops",
    ),
    (
        "CPU_ATTENTION",
        "0: a decode step's attention over KV cache slots through the IR, not one native kernel",
    ),
    (
        "CPU_DEPTHWISE",
        "0: depthwise 2-D convolutions through the IR, not one native kernel",
    ),
    (
        "CPU_INT8",
        "0: 8-bit integer products (ONNX's MatMulInteger) through float32 GEMMs, not native loops",
    ),
    (
        "CPU_PAD",
        "0: a large convolution's padded input computed in the IR, not padded by a native copy",
    ),
    (
        "CPU_QUANT",
        "0: GGUF quantized products and dequantization through the IR, not native loops",
    ),
    (
        "CPU_TWO_STREAMS",
        "0: large streaming kernels' outer loop as one stream, not two halves",
    ),
    (
        "CPU_HUGE_PAGES",
        "0: do not ask Linux for transparent huge pages for large buffers",
    ),
    (
        "WEBGPU_HOST_BUFFERS",
        "1: WEBGPU buffers in host memory, copied per kernel (the first design)",
    ),
    (
        "ALL2ALL",
        "all-reduce of sharded tensors: 2 always all-to-all (each device reduces its chunk from \
         every device), 1 above RING_ALLREDUCE_THRESHOLD on more than two devices, 0 never (default)",
    ),
    (
        "RING",
        "all-reduce of sharded tensors: 2 always through the ring, 0 never",
    ),
    (
        "RING_ALLREDUCE_THRESHOLD",
        "elements above which the ring all-reduce is used (default 256000)",
    ),
    (
        "NCCL",
        "0: all-reduce across CUDA GPUs by copies instead of NCCL",
    ),
];

/// The `Environment:` section of a program's `--help`: every entry of [`VARIABLES`], one per
/// line, names aligned.
///
/// ```
/// let text = tinygrad_runtime::environment::help();
/// assert!(text.lines().any(|l| l.trim_start().starts_with("DEBUG ")));
/// ```
pub fn help() -> String {
    let width = VARIABLES.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut out = String::from("Environment (read by the library):\n");
    for (name, what) in VARIABLES {
        out.push_str(&format!("  {name:<width$}  {what}\n"));
    }
    out
}

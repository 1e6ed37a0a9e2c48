//! The runtime: devices, buffers, compiling and launching kernels.
//!
//! Module map:
//! - [`allocator`]: device memory ([`allocator::Allocator`]: alloc, free, copyin, copyout,
//!   transfer) and the counters of bytes between host and devices ([`transfer_stats`]).
//! - [`buffer`]: [`Buffer`], a typed array on a device (host memory, or the device's own), and its
//!   handle inside `Buffer` UOps.
//! - [`buffer_pool`]: reuse of freed large host allocations (no page faults for new outputs).
//! - [`huge_pages`]: transparent huge pages for large host allocations (faster streams).
//! - [`device`]: the [`Device`]/[`Kernel`] traits, the registry (`CPU`, `REF`, `CUDA`, `WEBGPU`,
//!   each with an optional index: `CPU:1`; `DEV=`), `DEBUG`.
//! - [`cpu`]: the Cranelift JIT device.
//! - [`environment`]: the environment variables the library reads ([`environment::VARIABLES`]),
//!   and the `--help` text listing them.
//! - [`gemm`]: the CPU's GEMM path (packing kernels + AVX2/FMA micro-kernel + epilogue).
//! - [`cuda`]: the `CUDA` device (PTX through the CUDA driver; cargo feature `cuda`).
//! - [`nccl`]: all-reduce across CUDA GPUs through NVIDIA's NCCL, loaded at run time.
//! - [`webgpu`]: the `WEBGPU` device (WGSL compute shaders through wgpu on Vulkan; cargo feature
//!   `webgpu`, on by default).
//! - [`reference`](mod@reference): `REF`, an interpreter of the linear program — the oracle for every backend.
//! - [`quant`]: the CPU's products with GGUF's quantized weights, read as blocks, and their
//!   dequantization (AVX-512/AVX2 loops).
//! - [`int_matmul`]: the CPU's 8-bit integer products accumulated in int32 (ONNX's
//!   `MatMulInteger`; AVX-512 VNNI/AVX2 tiles over a packed weight).
//! - [`depthwise`]: the CPU's native kernel for depthwise 2-D convolutions.
//! - [`pad`]: the CPU's native kernel zero-padding planes (a convolution's input).
//! - `native`: what those native kernels share (payload look-up, ids, switches).
//! - [`attention`]: the CPU's native kernel for a decode step's attention over KV cache slots.
//! - [`row_reduce`]: the CPU's row-reduction path (contiguous `sum`/`max`/`mean` rows in
//!   AVX-512/AVX2 loops).
//! - [`realize`]: running a schedule with a compiled-kernel cache and `DEBUG` output.
//! - [`capture`]: recording the launches of schedules run on a thread and replaying them on
//!   other buffers (the runtime half of the tensor layer's `Jit`).
//! - [`beam`]: BEAM search (`BEAM=n`) for kernel opts, with its on-disk cache.
//! - [`thread_pool`]: the persistent worker threads that split CPU kernels across cores.

pub mod allocator;
pub mod attention;
pub mod beam;
pub mod buffer;
pub mod buffer_pool;
pub mod capture;
pub mod cpu;
pub mod cuda;
pub mod depthwise;
pub mod device;
pub mod environment;
pub mod gemm;
pub mod huge_pages;
pub mod int_matmul;
mod native;
pub mod nccl;
pub mod pad;
pub mod quant;
pub mod realize;
pub mod reference;
pub mod row_reduce;
pub mod thread_pool;
pub mod webgpu;

pub use allocator::{TransferStats, thread_transfer_stats, transfer_stats};
pub use beam::{beam_stats, beam_width, set_beam, set_beam_cache_dir};
pub use buffer::{Buffer, BufferRef};
pub use device::{
    DEVICE_NAMES, Device, DeviceError, Kernel, canonical_device, debug_level, default_device,
    get_device, with_default_device,
};
pub use realize::{
    compile_count, get_kernel, kernel_cache_capacity, kernel_cache_len, run_schedule,
    run_schedule_with_vars, thread_run_counts,
};

//! tinygrad-rs: a lazy `Tensor` compiled into fused kernels, with tinygrad's API.
//!
//! ```
//! use tinygrad_tensor::Tensor;
//! let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
//! let b = (&a * 2.0 + 1.0).relu().sum(1isize);
//! assert_eq!(b.to_vec::<f32>(), vec![8.0, 16.0]);
//! ```
//!
//! This is the crate users depend on; it re-exports the whole API.
//!
//! Module map:
//! - [`tensor`](mod@tensor): [`Tensor`]: creation (nested data too: [`Data`], `tensor!`),
//!   realize, reading data, devices (one file each in `tensor/`).
//! - [`elementwise`]: math, comparisons, logic, casts, with broadcasting and promotion (one file
//!   per topic in `elementwise/`).
//! - [`movement`]: reshape, permute, expand, pad, shrink, flip, cat, slicing — views, no copies
//!   (one file per topic in `movement/`).
//! - [`indexing`]: `getitem` ([`Idx`]: ints, slices with steps, ellipsis, new axes, tensor
//!   indices), `gather`, `masked_fill`, `tril`/`triu`, `roll`, `repeat`, `split`/`chunk`.
//! - [`einsum`]: `einsum` (Einstein summation with `...`, diagonals, implicit output).
//! - [`rearrange`]: `rearrange` (einops formulas: split, permute, merge axes).
//! - [`math`]: `log10`, `square`, `asin`/`acos`/`atan`, `fmod`, `copysign`, `logaddexp`,
//!   `isclose`/`allclose`.
//! - [`keccak`]: `keccak` (SHA-3, SHAKE) and `hash` (tinygrad's content hash), from tensor ops.
//! - [`linalg`]: `qr` (Householder) and `svd` (one-sided Jacobi), from tensor ops.
//! - [`reduce`]: sum/max/mean/var/argmax, softmax, matmul, cumsum.
//! - [`ordering`]: `sort`/`argsort`/`topk` (bitonic sort), `cumprod`/`cummax`/`cummin`/`logcumsumexp`.
//! - [`autograd`]: `requires_grad`, `backward`, `gradient`, `detach`, training and no-grad
//!   modes — gradients are lazy tensors built on the UOp graph.
//! - [`nn_ops`]: convolutions and pooling (any number of spatial dims), activations, layernorm/
//!   batchnorm, `rand`/`dropout`, `one_hot`, attention, losses — one file per topic in `nn_ops/`.
//! - [`scatter`]: `pad_mode` ([`PadMode`]: reflect/replicate/circular), `scatter`/`scatter_reduce`, `meshgrid`, `masked_select`.
//! - [`setitem`]: `setitem` — writing into the part of a tensor an index selects.
//! - [`assign`]: `assign` — replacing a tensor's value lazily (optimizer updates).
//! - [`symbolic`]: [`Variable`] and bound variables ([`BoundVar`]) — symbolic sizes, kernels
//!   compiled once for every value.
//! - [`multi`]: tensors on several devices at once — `shard`, `shard_like`, `devices`: ops run
//!   per shard, reductions over the sharded axis all-reduce (`collective`: naive, ring or
//!   all-to-all through copies between devices, or NCCL across CUDA GPUs).
//! - [`jit`]: [`Jit`] — capturing the kernels of a function of tensors once and replaying them
//!   on new inputs, with every replay checked against the capture.
//! - [`nn`]: layers, `Module`/`Parameters` and state dicts, optimizers, safetensors files,
//!   weight initialization.
//! - [`operators`]: Rust operator overloading.
//! - [`display`]: numpy-style printing.
//! - [`element`]: Rust element types.
//! - [`environment`]: the environment variables the library reads (`DEV`, `DEBUG`, the CPU
//!   path switches), with the `--help` text that lists them.

pub mod assign;
pub mod autograd;
mod collective;
pub mod display;
pub mod einsum;
pub mod element;
pub mod elementwise;
pub mod indexing;
pub mod jit;
pub mod keccak;
pub mod linalg;
pub mod math;
pub mod movement;
pub mod multi;
pub mod nn;
pub mod nn_ops;
pub mod operators;
pub mod ordering;
mod random;
pub mod rearrange;
pub mod reduce;
pub mod scatter;
pub mod setitem;
pub mod symbolic;
pub mod tensor;

pub use autograd::{NoGradGuard, TrainGuard};
pub use element::Element;
pub use elementwise::{IntoOperand, Operand, broadcast_shape};
pub use half::{bf16, f16};
pub use indexing::{Idx, IndexError, SplitSizes};
pub use jit::{Jit, JitError, OnMismatch};
pub use movement::ShapeDim;
pub use nn_ops::{Dims, InterpolateMode, Padding, Reduction};
pub use reduce::Axis;
pub use scatter::PadMode;
pub use symbolic::{BoundVar, Variable};
pub use tensor::{Data, Tensor, TensorError};
pub use tinygrad_dtype::{ConstValue, DType};
pub use tinygrad_runtime::buffer_pool::release_free_memory;
pub use tinygrad_runtime::environment;
pub use tinygrad_runtime::{
    DeviceError, TransferStats, beam_stats, canonical_device, compile_count, debug_level,
    default_device, get_device, set_beam, set_beam_cache_dir, thread_run_counts,
    thread_transfer_stats, transfer_stats, with_default_device,
};
pub use tinygrad_schedule::{schedule_cache_hits, schedule_cache_misses};
pub use tinygrad_uop::{Ops, SInt, UOp};

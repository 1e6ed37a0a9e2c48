//! tinygrad-rs: a lazy `Tensor` compiled into fused kernels, with tinygrad's API.
//!
//! This is the crate users depend on; it re-exports the whole API.
//!
//! Module map (filled in as the frontend lands):
//! - `tensor`: the lazy `Tensor` and its creation, elementwise, movement and reduce ops.
//! - `realize`: scheduling, compiling and running the graph behind a tensor.

pub use tinygrad_dtype::{ConstValue, DType};

//! Data types of tinygrad-rs: what a tensor element or an IR value is, how types promote, and
//! typed constants.
//!
//! Module map:
//! - [`dtype`]: [`DType`] (scalar kind + vector width + pointer address space), its facts
//!   (itemsize, priority, min/max, finfo) and name parsing.
//! - [`promote`]: tinygrad's promotion lattice, [`least_upper_dtype`], [`least_upper_float`],
//!   [`sum_acc_dtype`], defaults, and "weak" promotion of Rust literals.
//! - [`value`]: [`ConstValue`], a typed scalar with tinygrad's casting/truncation rules and
//!   little-endian byte conversion for every dtype.
//! - [`fp8`]: exact float <-> fp8 (e4m3, e5m2) conversions.
//!
//! This crate knows nothing about tensors or devices; the UOp IR and every backend build on it.

pub mod dtype;
pub mod fp8;
pub mod promote;
pub mod value;

pub use dtype::{AddrSpace, DType, ParseDTypeError, Scalar};
pub use promote::{
    can_lossless_cast, default_float, default_int, least_upper_dtype, least_upper_float,
    promote_with_const, sum_acc_dtype,
};
pub use value::ConstValue;

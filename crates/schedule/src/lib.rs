//! The scheduler: turns a lazy tensor graph (UOps) into an ordered list of kernels.
//!
//! Module map (filled in as the scheduler lands):
//! - `realize`: which nodes must become buffers (contiguous, multi-consumer, broadcast reduces).
//! - `rangeify`: movement ops become index arithmetic on loop ranges; kernels are split out.
//! - `memory`: buffer lifetimes and reuse.

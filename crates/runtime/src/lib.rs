//! The runtime: devices, buffers, allocators, compiling and launching kernels.
//!
//! Module map (filled in as the runtime lands):
//! - `device`: the `Device` trait (allocate, copy in/out, compile, launch, synchronize).
//! - `cpu`: the Cranelift JIT device with a compiled-kernel cache and a thread pool.
//! - `reference`: `REF`, an interpreter of the linear program, the oracle for every backend.

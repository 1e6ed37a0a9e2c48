//! Code generation: a kernel (UOps) becomes an optimized, target-neutral linear program, which a
//! [renderer] per target turns into code.
//!
//! Module map (filled in as codegen lands):
//! - `lower`: kernel -> loops, index math, loads, stores, accumulators.
//! - `opt`: kernel optimizations (upcast, unroll, tiling, threads).
//! - `decomp`: transcendentals as polynomials, emulated dtypes.
//! - `linearize`: the flat program and its launch dimensions.
//! - `renderer`: the `Renderer` trait and its Cranelift, PTX and WGSL implementations.

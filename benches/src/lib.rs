//! Criterion benchmarks of tinygrad-rs kernels on the CPU device (the same workloads as
//! `cargo xtask bench`, which also measures references). Run with
//! `cargo bench -p tinygrad-benches` (add `-- matmul` to select).

/// Deterministic pseudo-random floats in [-1, 1).
pub fn rand_vec(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

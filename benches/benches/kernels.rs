//! Kernel benchmarks on the CPU device: matmul, a fused elementwise chain, a full sum, and the
//! warm realize latency of a small graph. Each realize builds the graph anew (the kernels come
//! from the compile cache after the first iteration) and writes a fresh output buffer (from the
//! buffer pool after the first iteration).
//!
//! `cargo bench -p tinygrad-benches --bench kernels -- --warm-up-time 1 --measurement-time 5`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tinygrad_benches::rand_vec;
use tinygrad_tensor::Tensor;

fn matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("matmul_f32");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for n in [256usize, 512, 1024] {
        let a = Tensor::from_slice(&rand_vec(n * n, 1), &[n, n]);
        let b = Tensor::from_slice(&rand_vec(n * n, 2), &[n, n]);
        g.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
        g.bench_function(format!("{n}"), |bch| {
            bch.iter(|| {
                let out = a.matmul(&b);
                out.realize();
                black_box(out)
            })
        });
    }
    g.finish();
}

const BIG: usize = 1 << 24;

fn elementwise_and_sum(c: &mut Criterion) {
    let a = Tensor::from_slice(&rand_vec(BIG, 3), &[BIG]);
    let b = Tensor::from_slice(&rand_vec(BIG, 4), &[BIG]);
    let d = Tensor::from_slice(&rand_vec(BIG, 5), &[BIG]);
    let mut g = c.benchmark_group("memory_bound_16M_f32");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Bytes(16 * BIG as u64));
    g.bench_function("mul_add_relu_exp", |bch| {
        bch.iter(|| {
            let out = ((&a * &b) + &d).relu().exp();
            out.realize();
            black_box(out)
        })
    });
    g.throughput(Throughput::Bytes(4 * BIG as u64));
    g.bench_function("sum", |bch| {
        bch.iter(|| {
            let out = a.sum(None);
            out.realize();
            black_box(out)
        })
    });
    g.finish();
}

fn latency(c: &mut Criterion) {
    let x = Tensor::from_slice(&rand_vec(16, 7), &[4, 4]);
    c.bench_function("chain20_4x4_warm_realize", |bch| {
        bch.iter(|| {
            let mut y = x.clone();
            for i in 0..20 {
                y = match i % 5 {
                    0 => &y + 1.0,
                    1 => &y * 0.5,
                    2 => y.relu(),
                    3 => &y - 0.25,
                    _ => y.neg(),
                };
            }
            y.realize();
            black_box(y)
        })
    });
}

criterion_group!(benches, matmul, elementwise_and_sum, latency);
criterion_main!(benches);

//! Where the CPU's GEMM path pays off: small and skinny matmuls (a batch-1 transformer's
//! projections, matrix-vector products, small squares) timed on the GEMM path and on the generic
//! kernels, the measurement behind `CPU_GEMM_MIN_FLOPS`'s default.
//!
//! `cargo run --release --example skinny_matmul` runs itself twice, with `CPU_GEMM_MIN_FLOPS=0`
//! (every eligible kernel on the GEMM path) and with the path off for these sizes, and prints the
//! median of 30 runs of each shape (`a (m, k) @ w (n, k)^T`, realized inputs, warm kernels).

use std::process::Command;
use std::time::Instant;

use clap::Parser;
use tinygrad_tensor::{Tensor, environment};

/// (m, n, k): transformer projections at batch 1 (12 tokens), its MLP, a decode step's
/// matrix-vector products, squares.
const SHAPES: [(usize, usize, usize); 13] = [
    (12, 384, 384),
    (12, 1536, 384),
    (12, 384, 1536),
    (4, 384, 384),
    (6, 384, 384),
    (8, 384, 384),
    (1, 384, 384),
    (1, 30522, 384),
    (8, 64, 64),
    (64, 64, 64),
    (32, 128, 128),
    (384, 384, 384),
    (384, 1536, 384),
];

/// Median microseconds of each shape in this process.
fn measure() -> Vec<f64> {
    SHAPES
        .iter()
        .map(|&(m, n, k)| {
            let a = Tensor::rand(&[m, k]);
            let w = Tensor::rand(&[n, k]);
            a.realize();
            w.realize();
            let f = || a.matmul(&w.transpose(0, 1));
            f().realize();
            let mut times: Vec<f64> = (0..30)
                .map(|_| {
                    let t0 = Instant::now();
                    f().realize();
                    t0.elapsed().as_secs_f64()
                })
                .collect();
            times.sort_by(f64::total_cmp);
            times[times.len() / 2] * 1e6
        })
        .collect()
}

/// Times small and skinny matmuls on the CPU's GEMM path and on the generic kernels.
#[derive(Parser)]
#[command(after_help = environment::help())]
struct Args {}

fn main() {
    Args::parse();
    if std::env::var_os("SKINNY_MATMUL_CHILD").is_some() {
        let us = measure();
        println!(
            "{}",
            us.iter()
                .map(|t| format!("{t:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        return;
    }
    let run = |min_flops: &str| -> Vec<f64> {
        let exe = std::env::current_exe().expect("the example's own path");
        let out = Command::new(exe)
            .env("SKINNY_MATMUL_CHILD", "1")
            .env("CPU_GEMM_MIN_FLOPS", min_flops)
            .output()
            .expect("rerun the example");
        assert!(
            out.status.success(),
            "child failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|t| t.parse().expect("a time"))
            .collect()
    };
    let gemm = run("0");
    let generic = run("1e30");
    println!(
        "{:>18} | {:>10} {:>8} | {:>10} {:>8} | {:>6}",
        "m x n x k", "GEMM us", "GFLOP/s", "generic us", "GFLOP/s", "GEMM x"
    );
    for (((m, n, k), g), c) in SHAPES.iter().zip(&gemm).zip(&generic) {
        let gflop = 2.0 * (m * n * k) as f64 / 1e3;
        println!(
            "{:>18} | {g:>10.1} {:>8.1} | {c:>10.1} {:>8.1} | {:>5.2}x",
            format!("{m}x{n}x{k}"),
            gflop / g,
            gflop / c,
            c / g
        );
    }
    println!("(matrix-vector shapes, m or n below 4, never take the GEMM path: equal columns)");
}

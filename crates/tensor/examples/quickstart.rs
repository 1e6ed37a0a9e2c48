//! The quick-start example: a small tensor program, end to end (graph -> fused kernels ->
//! Cranelift JIT -> result). Run with `cargo run --release --example quickstart`; add `DEBUG=2`
//! to see each kernel and its time, `DEBUG=4` for the generated code, `DEV=REF` for the
//! reference interpreter.

use clap::Parser;
use tinygrad_tensor::{DType, Tensor, environment};

/// A small tensor program, end to end: graph, fused kernels, Cranelift JIT, result.
#[derive(Parser)]
#[command(after_help = environment::help())]
struct Args {}

fn main() {
    Args::parse();
    let a = Tensor::from_slice(&[1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0], &[2, 3]);
    let b = Tensor::from_slice(&[0.5f32, 1.0, 2.0], &[3]);
    println!("a =\n{a}\nb = {b}");

    // one fused kernel: broadcast, multiply, add, relu, exp
    let c = ((&a * &b) + 1.0).relu().exp();
    println!("((a * b) + 1).relu().exp() =\n{c}");

    // reductions and a matmul
    println!("a.sum(1) = {}", a.sum(1isize));
    println!("a.max() = {}", a.max(None));
    println!("softmax(a, -1) =\n{}", a.softmax(-1));
    let w = Tensor::arange(0, 6, 1)
        .cast(DType::FLOAT32)
        .reshape(&[3, 2]);
    println!("a @ w =\n{}", a.matmul(&w));

    // movement ops are views: this permute + flip + pad runs as one kernel, no copies
    let v = a.permute(&[1, 0]).flip(&[0]).pad(&[(1, 0), (0, 1)], 0.0);
    println!("a.T.flip(0).pad(...) =\n{v}");
}

//! tinygrad's `test/unit/test_jit_cases.py`, replayed on our API (see `replay/mod.rs`): the four
//! kinds of tensors a jitted function meets (explicit inputs and outputs, implicit inputs read
//! from a closure, implicit outputs assigned to). tinygrad's `TinyJit` is our [`Jit`]; every
//! expected value (`i*2`) is written in the tinygrad test.
//!
//! Departure, noted at its cases: a jitted function returns at least one tensor
//! (`JitError::NoOutputs` otherwise), so the functions with only an implicit output return the
//! tensor they assigned to (the test reads that tensor, not the return value).

mod replay;

use replay::{Case, Ctx, call};
use tinygrad_tensor::{Jit, Tensor};

const CASES: &[Case] = &[
    ("TestJitCases.test_explicit", explicit),
    ("TestJitCases.test_implicit_input", implicit_input),
    ("TestJitCases.test_implicit_output", implicit_output),
    ("TestJitCases.test_implicit_io", implicit_io),
];

fn explicit(_: &Ctx) {
    // an explicit input and an explicit output (returned unrealized)
    let mut f = Jit::new(|x: &[Tensor]| vec![&x[0] * 2]);
    for i in 0..5 {
        let out = call(&mut f, &[Tensor::from_slice(&[i], &[1])], "f");
        assert_eq!(out[0].item::<i32>(), i * 2, "call {i}");
    }
    assert_eq!(f.replays(), 3);
}

fn implicit_input(_: &Ctx) {
    // x is the implicit input (like a weight)
    let x = Tensor::from_slice(&[0i32], &[1]);
    let mut f = Jit::new(|_: &[Tensor]| vec![&x * 2]);
    for i in 0..5 {
        // NOTE: realized here, as in tinygrad
        x.assign(&Tensor::from_slice(&[i], &[1])).realize();
        let out = call(&mut f, &[], "f");
        assert_eq!(out[0].item::<i32>(), i * 2, "call {i}");
    }
    assert_eq!(f.replays(), 3);
}

/// Departure: tinygrad's `f` returns nothing; here it returns `out` (a jitted function returns
/// at least one tensor); the test reads `out`, as tinygrad's.
fn implicit_output(_: &Ctx) {
    // out is the implicit output (it's assigned to)
    let out = Tensor::from_slice(&[0i32], &[1]);
    let mut f = Jit::new(|x: &[Tensor]| {
        out.assign(&(&x[0] * 2)).realize();
        vec![out.clone()]
    });
    for i in 0..5 {
        call(&mut f, &[Tensor::from_slice(&[i], &[1])], "f");
        assert_eq!(out.item::<i32>(), i * 2, "call {i}");
    }
    assert_eq!(f.replays(), 3);
}

/// Departure as in `test_implicit_output`: `f` returns `out`.
fn implicit_io(_: &Ctx) {
    let x = Tensor::from_slice(&[0i32], &[1]);
    let out = Tensor::from_slice(&[0i32], &[1]);
    let mut f = Jit::new(|_: &[Tensor]| {
        out.assign(&(&x * 2)).realize(); // NOTE: realized here, as in tinygrad
        vec![out.clone()]
    });
    for i in 0..5 {
        x.assign(&Tensor::from_slice(&[i], &[1])).realize();
        call(&mut f, &[], "f");
        assert_eq!(out.item::<i32>(), i * 2, "call {i}");
    }
    assert_eq!(f.replays(), 3);
}

#[test]
fn cpu() {
    replay::replay("unit_test_jit_cases", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("unit_test_jit_cases", "REF", CASES);
}

#[test]
fn webgpu() {
    replay::on_webgpu("unit_test_jit_cases on WEBGPU", |dev| {
        replay::replay("unit_test_jit_cases", dev, CASES)
    });
}

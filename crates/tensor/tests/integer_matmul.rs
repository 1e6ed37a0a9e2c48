//! 8-bit integer products (`nn::integer`): `matmul_integer` and `Int8Weight` on the CPU's native
//! kernels (the VNNI, AVX2 or portable layout this CPU runs; `CPU_AVX512=0` in CI takes the
//! AVX2 one) and on the float32 GEMM route (REF, WEBGPU) equal the definition
//! `sum (a - za) * (b - zb)` computed in i64 here, exactly: both signednesses, scalar and
//! per-row/per-column zero points, batched and 1-D `a`, a batched `b`; in a graph with other
//! ops, and replayed by a `Jit`.

mod common;

use tinygrad_tensor::nn::integer::{Int8Weight, matmul_integer};
use tinygrad_tensor::{DType, Jit, Tensor};

/// Deterministic bytes.
fn bytes(len: usize, seed: u32) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (s >> 16) as u8
        })
        .collect()
}

/// An 8-bit tensor of `shape` from `raw` (`int8` when `signed`).
fn int8(raw: &[u8], shape: &[usize], signed: bool, dev: &str) -> Tensor {
    let t = if signed {
        let v: Vec<i8> = raw.iter().map(|&b| b as i8).collect();
        Tensor::from_slice(&v, shape)
    } else {
        Tensor::from_slice(raw, shape)
    };
    t.to(dev)
}

fn value(b: u8, signed: bool) -> i64 {
    if signed {
        i64::from(b as i8)
    } else {
        i64::from(b)
    }
}

/// `[batch, m, k] @ [k, n]` with zero points (per row when `za` has `m` values, per column when
/// `zb` has `n`), in i64 wrapped to i32.
#[allow(clippy::too_many_arguments)]
fn definition(
    a: &[u8],
    b: &[u8],
    (batch, m, n, k): (usize, usize, usize, usize),
    (sa, sb): (bool, bool),
    za: &[u8],
    zb: &[u8],
) -> Vec<i32> {
    let zero = |z: &[u8], i: usize, s: bool| match z.len() {
        0 => 0,
        1 => value(z[0], s),
        _ => value(z[i], s),
    };
    let mut out = Vec::with_capacity(batch * m * n);
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let s: i64 = (0..k)
                    .map(|p| {
                        (value(a[(bi * m + i) * k + p], sa) - zero(za, i, sa))
                            * (value(b[p * n + j], sb) - zero(zb, j, sb))
                    })
                    .sum();
                out.push(s as i32);
            }
        }
    }
    out
}

fn check(dev: &str) {
    let mut seed = 1;
    for &(batch, m, n, k) in &[
        (1, 1, 1, 1),
        (2, 3, 33, 13),
        (1, 17, 70, 64),
        (3, 5, 40, 300),
    ] {
        for signs in [(false, false), (false, true), (true, false), (true, true)] {
            for (za_len, zb_len) in [(0, 0), (1, 1), (m, n), (0, n), (m, 0)] {
                seed += 1;
                let (a, b) = (bytes(batch * m * k, seed), bytes(k * n, seed * 3));
                let (za, zb) = (bytes(za_len, seed * 5), bytes(zb_len, seed * 7));
                let want = definition(&a, &b, (batch, m, n, k), signs, &za, &zb);
                let at = int8(&a, &[batch, m, k], signs.0, dev);
                let bt = int8(&b, &[k, n], signs.1, dev);
                let zat = (za_len > 0).then(|| {
                    let shape: &[usize] = if za_len == 1 { &[] } else { &[za_len] };
                    int8(&za, shape, signs.0, dev)
                });
                let zbt = (zb_len > 0).then(|| int8(&zb, &[zb_len], signs.1, dev));
                let y = matmul_integer(&at, &bt, zat.as_ref(), zbt.as_ref());
                assert_eq!((y.dtype(), y.shape()), (DType::INT32, vec![batch, m, n]));
                let case = format!(
                    "{dev} [{batch}, {m}, {k}] @ [{k}, {n}] signs {signs:?} zero points {za_len}/{zb_len}"
                );
                assert_eq!(y.to_vec::<i32>(), want, "{case}: matmul_integer");
                // the weight prepared once, used twice
                let w = Int8Weight::new(&bt, zbt.as_ref()).unwrap();
                for _ in 0..2 {
                    let y = w.matmul(&at, zat.as_ref());
                    assert_eq!(y.to_vec::<i32>(), want, "{case}: Int8Weight");
                }
            }
        }
    }
}

#[test]
fn products_equal_the_definition_on_cpu() {
    check("CPU");
}

#[test]
fn products_equal_the_definition_on_ref() {
    check("REF");
}

#[test]
fn products_equal_the_definition_on_webgpu() {
    common::on_webgpu("products_equal_the_definition_on_webgpu", check);
}

/// A 1-D `a` gives a 1-D result; a batched `b` (float route) broadcasts as matmul does.
#[test]
fn one_d_and_batched_operands() {
    let (n, k) = (6, 9);
    let (a, b) = (bytes(k, 3), bytes(2 * k * n, 4));
    let at = int8(&a, &[k], false, "CPU");
    let b0 = int8(&b[..k * n], &[k, n], true, "CPU");
    let y = matmul_integer(&at, &b0, None, None);
    assert_eq!(y.shape(), vec![n]);
    assert_eq!(
        y.to_vec::<i32>(),
        definition(&a, &b[..k * n], (1, 1, n, k), (false, true), &[], &[])
    );
    let bb = int8(&b, &[2, k, n], true, "CPU");
    let a2 = int8(&a, &[1, k], false, "CPU");
    let y = matmul_integer(&a2, &bb, None, None);
    assert_eq!(y.shape(), vec![2, 1, n]);
    let mut want = definition(&a, &b[..k * n], (1, 1, n, k), (false, true), &[], &[]);
    want.extend(definition(
        &a,
        &b[k * n..],
        (1, 1, n, k),
        (false, true),
        &[],
        &[],
    ));
    assert_eq!(y.to_vec::<i32>(), want);
}

/// Inside a graph: `a` computed by other ops (quantized from floats) and the product read by
/// more ops, all scheduled together; a `Jit` captures the native kernels and replays them on
/// new inputs.
#[test]
fn products_inside_a_graph_and_replayed() {
    let (m, n, k) = (4, 24, 32);
    let b = bytes(k * n, 9);
    let w = Int8Weight::new(&int8(&b, &[k, n], true, "CPU"), None).unwrap();
    let floats = |seed: u32| -> Vec<f32> {
        bytes(m * k, seed)
            .iter()
            .map(|&v| f32::from(v) / 2.0)
            .collect()
    };
    let expect = |x: &[f32]| -> Vec<f32> {
        let a: Vec<u8> = x.iter().map(|v| v.round_ties_even() as u8).collect();
        definition(&a, &b, (1, m, n, k), (false, true), &[], &[])
            .iter()
            .map(|&v| v as f32 * 0.5)
            .collect()
    };
    let mut jit = Jit::new(|x: &[Tensor]| {
        let a = x[0].round().cast(DType::UINT8);
        vec![w.matmul(&a, None).cast(DType::FLOAT32) * 0.5]
    });
    for seed in 0..4 {
        let xv = floats(seed);
        let x = Tensor::from_slice(&xv, &[m, k]);
        let y = jit.call(&[x]).unwrap();
        assert_eq!(y[0].to_vec::<f32>(), expect(&xv), "call {seed}");
    }
}

#[test]
#[should_panic(expected = "matmul_integer: a is float32")]
fn a_float_operand_is_refused() {
    let a = Tensor::ones(&[2, 2], DType::FLOAT32);
    let b = Tensor::from_slice(&[1u8; 4], &[2, 2]);
    let _ = matmul_integer(&a, &b, None, None);
}

#[test]
#[should_panic(expected = "zero point")]
fn a_zero_point_of_another_dtype_is_refused() {
    let a = Tensor::from_slice(&[1u8; 4], &[2, 2]);
    let b = Tensor::from_slice(&[1u8; 4], &[2, 2]);
    let z = Tensor::from_slice(&[1i8], &[]);
    let _ = matmul_integer(&a, &b, Some(&z), None);
}

//! Integer ops checked against exact products computed here: `MatMulInteger` at the extremes
//! of its 8-bit ranges, over more terms than float32 could sum exactly in one go.

mod common;

use std::collections::HashMap;

use common::{INT8, INT32, UINT8, model, node, value};
use tinygrad_onnx::OnnxModel;
use tinygrad_tensor::{DType, Tensor};

/// `y = MatMulInteger(a, b, a_zero_point, b_zero_point)`, a uint8 [m, k] with one zero point
/// per row, b int8 [k, n] with one per column.
fn matmul_integer(m: usize, k: usize, n: usize) -> OnnxModel {
    let (m, k, n) = (m as i64, k as i64, n as i64);
    model(
        vec![node(
            "MatMulInteger",
            &["a", "b", "az", "bz"],
            &["y"],
            vec![],
        )],
        vec![],
        vec![
            value("a", UINT8, &[m, k]),
            value("b", INT8, &[k, n]),
            value("az", UINT8, &[m]),
            value("bz", INT8, &[n]),
        ],
        vec![value("y", INT32, &[m, n])],
    )
}

#[test]
fn matmul_integer_is_exact_over_many_terms() {
    let (m, k, n) = (3, 700, 5);
    let model = matmul_integer(m, k, n);
    // extremes: |a - az| up to 255, |b - bz| up to 255, all products of one sign in row 0
    let a: Vec<u8> = (0..m * k)
        .map(|i| match i / k {
            0 => 255,
            1 => (i * 37 % 256) as u8,
            _ => (i % 2 * 255) as u8,
        })
        .collect();
    let b: Vec<i8> = (0..k * n)
        .map(|i| match i % n {
            0 => -128,
            1 => 127,
            _ => ((i * 53) % 256) as u8 as i8,
        })
        .collect();
    let az: Vec<u8> = vec![0, 128, 255];
    let bz: Vec<i8> = vec![127, -128, 0, 5, -7];
    let want: Vec<i32> = (0..m * n)
        .map(|o| {
            let (r, c) = (o / n, o % n);
            (0..k)
                .map(|j| {
                    (i64::from(a[r * k + j]) - i64::from(az[r]))
                        * (i64::from(b[j * n + c]) - i64::from(bz[c]))
                })
                .sum::<i64>() as i32
        })
        .collect();
    let feeds = HashMap::from([
        ("a".to_string(), Tensor::from_slice(&a, &[m, k])),
        ("b".to_string(), Tensor::from_slice(&b, &[k, n])),
        ("az".to_string(), Tensor::from_slice(&az, &[m])),
        ("bz".to_string(), Tensor::from_slice(&bz, &[n])),
    ]);
    // the first run folds, the next capture, the last replay: each exact
    for run in 0..4 {
        let y = &model.run(&feeds).expect("runs")["y"];
        assert_eq!(y.dtype(), DType::INT32);
        assert_eq!(y.to_vec::<i32>(), want, "run {run}");
    }
    // row 0, column 0: 700 products of 255 * -255, beyond float32's exact integers in one sum
    assert_eq!(want[0], -700 * 255 * 255);
}

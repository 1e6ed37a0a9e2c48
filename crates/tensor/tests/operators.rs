//! Rust operators: scalar-left forms (tinygrad's `__rmod__`, `__rand__`, `__ror__`, `__rxor__`,
//! `__rlshift__`, `__rrshift__`) and compound assignment (`__iadd__` ... `__irshift__`), checked
//! against values computed here by plain Rust on the same inputs.

use tinygrad_tensor::{DType, Tensor};

fn ints() -> (Vec<i32>, Tensor) {
    let v = vec![-7, -3, -1, 1, 2, 5, 9];
    let t = Tensor::from_slice(&v, &[v.len()]);
    (v, t)
}

/// Python's `%` (the result has the sign of the divisor), which tinygrad's `%` follows.
fn py_mod(a: i64, b: i64) -> i64 {
    ((a % b) + b) % b
}

#[test]
fn scalar_left_remainder_follows_the_divisor_sign() {
    let (v, t) = ints();
    let got = (17i32 % &t).to_vec::<i32>();
    let want: Vec<i32> = v.iter().map(|&x| py_mod(17, x.into()) as i32).collect();
    assert_eq!(got, want);
    let f = Tensor::from_slice(&[2.0f32, -3.0, 0.5], &[3]);
    let got = (7.0f32 % &f).to_vec::<f32>();
    let want: Vec<f32> = [2.0f32, -3.0, 0.5]
        .iter()
        .map(|&x| 7.0 - (7.0f32 / x).floor() * x)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn scalar_left_bitwise_and_shifts() {
    let (v, t) = ints();
    let each = |f: fn(i32) -> i32| v.iter().map(|&x| f(x)).collect::<Vec<i32>>();
    assert_eq!((12i32 & &t).to_vec::<i32>(), each(|x| 12 & x));
    assert_eq!((12i32 | &t).to_vec::<i32>(), each(|x| 12 | x));
    assert_eq!((12i32 ^ &t).to_vec::<i32>(), each(|x| 12 ^ x));
    let sh = Tensor::from_slice(&[0i32, 1, 4, 10], &[4]);
    assert_eq!((3i32 << &sh).to_vec::<i32>(), vec![3, 6, 48, 3072]);
    assert_eq!(
        (-1024i32 >> &sh).to_vec::<i32>(),
        vec![-1024, -512, -64, -1]
    );
    let b = Tensor::from_slice(&[true, false], &[2]);
    assert_eq!((true & &b).to_vec::<bool>(), vec![true, false]);
    assert_eq!((false | &b).to_vec::<bool>(), vec![true, false]);
    assert_eq!((true ^ b).to_vec::<bool>(), vec![false, true]);
}

#[test]
fn compound_assignment_updates_every_clone() {
    let (v, mut t) = ints();
    let alias = t.clone();
    t += 3;
    t *= 2;
    t -= 1;
    t %= 7;
    let want: Vec<i32> = v
        .iter()
        .map(|&x| py_mod(((i64::from(x) + 3) * 2) - 1, 7) as i32)
        .collect();
    assert_eq!(alias.to_vec::<i32>(), want);
    t &= 6;
    t |= 8;
    t ^= 1;
    t <<= 2;
    t >>= 1;
    let want: Vec<i32> = want
        .iter()
        .map(|&x| ((((x & 6) | 8) ^ 1) << 2) >> 1)
        .collect();
    assert_eq!(alias.to_vec::<i32>(), want);
    let mut f = Tensor::from_slice(&[1.0f32, 4.0], &[2]);
    f /= 4.0f32;
    f += &Tensor::from_slice(&[0.5f32, 0.5], &[2]);
    assert_eq!(f.to_vec::<f32>(), vec![0.75, 1.5]);
}

#[test]
fn compound_assignment_with_a_broadcast_tensor() {
    let mut w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    w += &Tensor::from_slice(&[10.0f32, 20.0], &[2]);
    assert_eq!(w.to_vec::<f32>(), vec![11.0, 22.0, 13.0, 24.0]);
    assert_eq!((w.shape(), w.dtype()), (vec![2, 2], DType::FLOAT32));
}

#[test]
#[should_panic(expected = "assign: dtype mismatch")]
fn compound_assignment_refuses_a_dtype_change() {
    let mut t = Tensor::from_slice(&[1i32, 2], &[2]);
    t += 0.5f32;
}

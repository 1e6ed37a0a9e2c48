//! exec_alu: the reference semantics of every ALU op.

use tinygrad_uop::{ConstValue as C, DType, Ops, exec_alu};

fn i(op: Ops, dt: DType, a: i64, b: i64) -> i64 {
    exec_alu(op, dt, &[C::Int(a), C::Int(b)]).as_i64()
}

fn f(op: Ops, dt: DType, a: f64, b: f64) -> f64 {
    exec_alu(op, dt, &[C::Float(a), C::Float(b)]).as_f64()
}

#[test]
fn idiv_mod_truncate_toward_zero() {
    let d = DType::INDEX;
    assert_eq!(i(Ops::IDiv, d, 7, 2), 3);
    assert_eq!(i(Ops::IDiv, d, -7, 2), -3);
    assert_eq!(i(Ops::IDiv, d, 7, -2), -3);
    assert_eq!(i(Ops::IDiv, d, -7, -2), 3);
    assert_eq!(i(Ops::Mod, d, 7, 2), 1);
    assert_eq!(i(Ops::Mod, d, -7, 2), -1);
    assert_eq!(i(Ops::Mod, d, 7, -2), 1);
    assert_eq!(i(Ops::Mod, d, -7, -2), -1);
}

#[test]
fn division_by_zero_is_zero() {
    for dt in [
        DType::INDEX,
        DType::INT8,
        DType::INT32,
        DType::UINT32,
        DType::UINT64,
        DType::BOOL,
    ] {
        assert_eq!(
            exec_alu(Ops::IDiv, dt, &[C::Int(5).cast(dt), C::Int(0).cast(dt)]).as_i64(),
            0,
            "{dt}"
        );
        assert_eq!(
            exec_alu(Ops::Mod, dt, &[C::Int(5).cast(dt), C::Int(0).cast(dt)]).as_i64(),
            0,
            "{dt}"
        );
    }
}

#[test]
fn min_div_minus_one_wraps() {
    assert_eq!(i(Ops::IDiv, DType::INDEX, i64::MIN, -1), i64::MIN);
    assert_eq!(i(Ops::Mod, DType::INDEX, i64::MIN, -1), 0);
    assert_eq!(i(Ops::IDiv, DType::INT8, -128, -1), -128);
}

#[test]
fn integer_ops_wrap_to_width() {
    assert_eq!(i(Ops::Add, DType::INT8, 100, 100), -56);
    assert_eq!(i(Ops::Mul, DType::INT16, 300, 300), 24464);
    assert_eq!(
        i(Ops::Add, DType::INT32, i32::MAX as i64, 1),
        i32::MIN as i64
    );
    assert_eq!(
        exec_alu(Ops::Sub, DType::UINT8, &[C::UInt(3), C::UInt(5)]),
        C::UInt(254)
    );
    assert_eq!(
        exec_alu(Ops::Neg, DType::UINT32, &[C::UInt(1)]),
        C::UInt(u32::MAX as u64)
    );
    assert_eq!(
        exec_alu(Ops::Mul, DType::UINT64, &[C::UInt(u64::MAX), C::UInt(2)]),
        C::UInt(u64::MAX - 1)
    );
    assert_eq!(i(Ops::Add, DType::INDEX, i64::MAX, 1), i64::MIN);
}

#[test]
fn unsigned_division_and_compare() {
    let big = C::UInt(u64::MAX - 1);
    assert_eq!(
        exec_alu(Ops::IDiv, DType::UINT64, &[big, C::UInt(2)]),
        C::UInt(u64::MAX / 2)
    );
    assert_eq!(
        exec_alu(Ops::CmpLt, DType::BOOL, &[C::UInt(1), big]),
        C::Bool(true)
    );
    assert_eq!(exec_alu(Ops::Max, DType::UINT64, &[C::UInt(1), big]), big);
    assert_eq!(
        exec_alu(Ops::Shr, DType::UINT8, &[C::UInt(0x80), C::UInt(7)]),
        C::UInt(1)
    );
}

#[test]
fn shifts() {
    let d = DType::INT32;
    assert_eq!(i(Ops::Shl, d, 1, 31), i32::MIN as i64);
    assert_eq!(i(Ops::Shl, d, 1, 32), 0);
    assert_eq!(i(Ops::Shr, d, -8, 1), -4);
    assert_eq!(i(Ops::Shr, d, -8, 40), -1);
    assert_eq!(i(Ops::Shr, d, 8, 40), 0);
    assert_eq!(i(Ops::Shl, DType::INT8, 3, 7), -128);
}

#[test]
fn comparisons() {
    let b = DType::BOOL;
    assert_eq!(
        exec_alu(Ops::CmpLt, b, &[C::Int(-1), C::Int(0)]),
        C::Bool(true)
    );
    assert_eq!(
        exec_alu(Ops::CmpNe, b, &[C::Int(3), C::Int(3)]),
        C::Bool(false)
    );
    assert_eq!(
        exec_alu(Ops::CmpEq, b, &[C::Int(3), C::Int(3)]),
        C::Bool(true)
    );
    assert_eq!(
        exec_alu(Ops::CmpLt, b, &[C::Float(f64::NAN), C::Float(1.0)]),
        C::Bool(false)
    );
    assert_eq!(
        exec_alu(Ops::CmpNe, b, &[C::Float(f64::NAN), C::Float(f64::NAN)]),
        C::Bool(true)
    );
    assert_eq!(
        exec_alu(Ops::CmpEq, b, &[C::Float(0.0), C::Float(-0.0)]),
        C::Bool(true)
    );
    assert_eq!(
        exec_alu(Ops::CmpLt, b, &[C::Bool(false), C::Bool(true)]),
        C::Bool(true)
    );
}

#[test]
fn float_results_round_to_dtype() {
    let s = f(Ops::Add, DType::FLOAT32, 0.1f32 as f64, 0.2f32 as f64);
    assert_eq!(s, (0.1f32 + 0.2f32) as f64);
    let h = f(Ops::Mul, DType::FLOAT16, 1000.0, 1000.0);
    assert!(h.is_infinite());
    assert_eq!(
        f(Ops::FDiv, DType::FLOAT32, 1.0, 3.0),
        (1.0f32 / 3.0f32) as f64
    );
    assert_eq!(f(Ops::Add, DType::BFLOAT16, 1.0, 1.0 / 512.0), 1.0);
}

#[test]
fn float_special_values() {
    let d = DType::FLOAT32;
    let u = |op, x: f64| exec_alu(op, d, &[C::Float(x)]).as_f64();
    assert_eq!(u(Ops::Log2, 0.0), f64::NEG_INFINITY);
    assert!(u(Ops::Log2, -1.0).is_nan());
    assert_eq!(u(Ops::Log2, 8.0), 3.0);
    assert!(u(Ops::Sqrt, -1.0).is_nan());
    assert_eq!(u(Ops::Recip, 0.0), f64::INFINITY);
    assert_eq!(u(Ops::Recip, -0.0), f64::NEG_INFINITY);
    assert!(u(Ops::Sin, f64::INFINITY).is_nan());
    assert_eq!(u(Ops::Exp2, 10.0), 1024.0);
    assert_eq!(u(Ops::Exp2, 1000.0), f64::INFINITY);
    assert_eq!(u(Ops::Trunc, -2.7), -2.0);
    // ties to even, both signs
    assert_eq!(u(Ops::Round, 2.5), 2.0);
    assert_eq!(u(Ops::Round, 3.5), 4.0);
    assert_eq!(u(Ops::Round, -2.5), -2.0);
    assert_eq!(u(Ops::Round, -2.7), -3.0);
    assert_eq!(u(Ops::Neg, 2.5), -2.5);
    assert_eq!(u(Ops::Sin, 0.5), (0.5f64.sin() as f32) as f64);
}

#[test]
fn float_max_propagates_nan() {
    assert!(f(Ops::Max, DType::FLOAT32, f64::NAN, 1.0).is_nan());
    assert!(f(Ops::Max, DType::FLOAT32, 1.0, f64::NAN).is_nan());
    assert_eq!(f(Ops::Max, DType::FLOAT32, -1.0, 2.0), 2.0);
}

#[test]
fn float_idiv_mod_pow() {
    assert_eq!(f(Ops::IDiv, DType::FLOAT32, -7.0, 2.0), -3.0);
    assert_eq!(f(Ops::Mod, DType::FLOAT32, -7.0, 2.0), -1.0);
    assert_eq!(f(Ops::Pow, DType::FLOAT32, 2.0, 10.0), 1024.0);
    assert!(f(Ops::Pow, DType::FLOAT32, -8.0, 1.0 / 3.0).is_nan());
    assert_eq!(f(Ops::Sub, DType::FLOAT64, 1.0, 0.25), 0.75);
}

#[test]
fn integer_pow_recip_and_transcendentals() {
    let d = DType::INT32;
    assert_eq!(i(Ops::Pow, d, 3, 4), 81);
    assert_eq!(i(Ops::Pow, d, 2, 31), i32::MIN as i64);
    assert_eq!(i(Ops::Pow, d, 2, -1), 0);
    assert_eq!(i(Ops::Pow, d, -1, -3), -1);
    assert_eq!(i(Ops::Pow, DType::INDEX, 3, 41), 3i64.wrapping_pow(41));
    assert_eq!(exec_alu(Ops::Recip, d, &[C::Int(1)]).as_i64(), 1);
    assert_eq!(exec_alu(Ops::Recip, d, &[C::Int(5)]).as_i64(), 0);
    assert_eq!(exec_alu(Ops::Sqrt, d, &[C::Int(17)]).as_i64(), 4);
    assert_eq!(exec_alu(Ops::Exp2, d, &[C::Int(5)]).as_i64(), 32);
}

#[test]
fn bool_ops() {
    let b = DType::BOOL;
    let bb = |op, x: bool, y: bool| exec_alu(op, b, &[C::Bool(x), C::Bool(y)]).as_bool();
    assert!(bb(Ops::Add, true, true));
    assert!(!bb(Ops::Mul, true, false));
    assert!(bb(Ops::Max, false, true));
    assert!(!bb(Ops::Sub, true, true));
    assert!(bb(Ops::Xor, true, false));
    assert!(bb(Ops::Or, false, true));
    assert!(!bb(Ops::And, true, false));
    assert_eq!(exec_alu(Ops::Neg, b, &[C::Bool(true)]), C::Bool(false));
}

#[test]
fn bitwise_ints_and_floats() {
    assert_eq!(i(Ops::And, DType::INT32, 0b1100, 0b1010), 0b1000);
    assert_eq!(i(Ops::Or, DType::INT32, 0b1100, 0b1010), 0b1110);
    assert_eq!(i(Ops::Xor, DType::INT8, -1, 1), -2);
    // -0.0 = 1.0 & sign bit: and(x, -0.0) keeps only the sign
    assert_eq!(
        f(Ops::And, DType::FLOAT32, -2.0, -0.0).to_bits(),
        (-0.0f64).to_bits()
    );
    assert_eq!(f(Ops::Xor, DType::FLOAT32, 2.0, -0.0), -2.0);
}

#[test]
fn where_and_mulacc() {
    let d = DType::INT32;
    assert_eq!(
        exec_alu(Ops::Where, d, &[C::Bool(true), C::Int(1), C::Int(2)]).as_i64(),
        1
    );
    assert_eq!(
        exec_alu(Ops::Where, d, &[C::Bool(false), C::Int(1), C::Int(2)]).as_i64(),
        2
    );
    assert_eq!(
        exec_alu(Ops::MulAcc, d, &[C::Int(3), C::Int(4), C::Int(5)]).as_i64(),
        17
    );
    let m = exec_alu(
        Ops::MulAcc,
        DType::FLOAT32,
        &[C::Float(0.1), C::Float(10.0), C::Float(-1.0)],
    );
    assert_eq!(m.as_f64(), ((0.1f32 as f64) * 10.0 - 1.0) as f32 as f64);
}

#[test]
fn threefry_known_answers() {
    // Random123's Threefry-2x32 (20 rounds) known-answer vectors; words packed low first.
    let tf = |ctr: (u32, u32), key: (u32, u32)| {
        let x = ctr.0 as u64 | (ctr.1 as u64) << 32;
        let k = key.0 as u64 | (key.1 as u64) << 32;
        let r = exec_alu(Ops::Threefry, DType::UINT64, &[C::UInt(x), C::UInt(k)]).as_u64();
        (r as u32, (r >> 32) as u32)
    };
    assert_eq!(tf((0, 0), (0, 0)), (0x6b200159, 0x99ba4efe));
    assert_eq!(
        tf((u32::MAX, u32::MAX), (u32::MAX, u32::MAX)),
        (0x1cb996fc, 0xbb002be7)
    );
    assert_eq!(
        tf((0x243f6a88, 0x85a308d3), (0x13198a2e, 0x03707344)),
        (0xc4923a9c, 0x483df7a0)
    );
}

#[test]
fn total_on_bad_input() {
    assert_eq!(exec_alu(Ops::Add, DType::INT32, &[]).as_i64(), 0);
    assert_eq!(
        exec_alu(Ops::Add, DType::VOID, &[C::Int(1), C::Int(2)]),
        C::Int(0)
    );
    assert_eq!(exec_alu(Ops::Load, DType::INT32, &[C::Int(9)]).as_i64(), 9);
    assert_eq!(
        exec_alu(Ops::Add, DType::INT32.vec(4), &[C::Int(1), C::Int(2)]).as_i64(),
        3
    );
}

#[test]
fn consts_fold_through_simplify() {
    use tinygrad_uop::UOp;
    let e =
        (UOp::cnst(DType::INT32, 7) * UOp::cnst(DType::INT32, -3)).idiv(UOp::cnst(DType::INT32, 4));
    assert_eq!(e.simplify(), UOp::cnst(DType::INT32, -5));
    let e = UOp::cnst(DType::FLOAT32, 2.0).unary(Ops::Sqrt);
    assert_eq!(e.simplify(), UOp::cnst(DType::FLOAT32, 2f32.sqrt()));
    let t = UOp::new(
        Ops::Threefry,
        DType::UINT64,
        vec![
            UOp::cnst(DType::UINT64, 0u64),
            UOp::cnst(DType::UINT64, 0u64),
        ],
        tinygrad_uop::Arg::None,
    );
    assert_eq!(t.simplify().as_const(), Some(C::UInt(0x99ba4efe_6b200159)));
}

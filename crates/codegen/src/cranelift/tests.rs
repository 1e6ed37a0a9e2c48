//! Unit tests of the Cranelift renderer's helpers.

use super::alu::magic_reciprocal;

#[test]
fn magic_reciprocal_is_exact_up_to_xmax() {
    for c in 2u64..300 {
        for xmax in [1u64, 255, 1000, 65_535, 1 << 20] {
            let Some((m, s)) = magic_reciprocal(c, xmax, 64) else {
                panic!("no magic for c={c} xmax={xmax}");
            };
            let step = (xmax / 5000).max(1);
            let xs = (0..=xmax)
                .step_by(step as usize)
                .chain(xmax.saturating_sub(300)..=xmax);
            for x in xs {
                assert_eq!((x * m) >> s, x / c, "c={c} x={x} m={m} s={s}");
            }
        }
    }
    // 32-bit: products must not overflow
    let (m, s) = magic_reciprocal(7, 1 << 12, 32).expect("7 below 2^12 in 32 bits");
    assert_eq!(
        magic_reciprocal(7, 1 << 20, 32),
        None,
        "2^20 * m overflows 32 bits"
    );
    assert!(((1u64 << 12) * m) < (1 << 32));
    for x in 0..=(1u64 << 12) {
        assert_eq!((x * m) >> s, x / 7);
    }
    // huge numerators have no exact 64-bit magic for 7
    assert_eq!(magic_reciprocal(7, u64::MAX, 64), None);
}

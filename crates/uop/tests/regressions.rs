//! Regression tests for simplifier bugs found through the Tensor golden suite.

use tinygrad_uop::UOp;

/// `(x//c)*c + x%c` is `x`: recombining must put back the mod's operand, not the mod itself
/// (a reshape (3,4) -> (12,) of a (12,) range produced `r%4` and read the wrong elements).
#[test]
fn divmod_recombines_to_the_operand() {
    let r = UOp::variable("r", 0, 11);
    let e = r.idiv(4) * 4 + r.modulo(4);
    assert_eq!(e.simplify(), r);
    let e = (r.modulo(4) * 3) + (r.idiv(4) * 12) + 1;
    assert_eq!(e.simplify(), (&r * 3 + 1).simplify());
}

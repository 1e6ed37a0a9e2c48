//! tinygrad's `test/unit/test_helpers.py` (commit a9069c17; `tinygrad.helpers` applied to
//! tensors), replayed on our API: one case per test method, named `Class.test_name`; the
//! excluded methods and their reasons are in `tests/golden/replay/unit_test_helpers.json`
//! (`tests/golden/replay/gen_unit_test_helpers.py`).
//!
//! `polyN` is a helper of tinygrad's, not a Tensor method: the test folds Horner's rule itself,
//! as tinygrad's does, over our Tensor arithmetic.

mod replay;

use replay::{Case, Ctx, assert_allclose, values_f64};
use tinygrad_tensor::Tensor;

const CASES: &[Case] = &[("TestPolyN.test_tensor", polyn_tensor)];

#[test]
fn cpu() {
    replay::replay("unit_test_helpers", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("unit_test_helpers", "REF", CASES);
}

/// tinygrad's `polyN(x, p)`: `functools.reduce(lambda acc, c: acc*x + c, p, 0.0)`, the first
/// step `0.0 * x` a Python float times a tensor (`Tensor.__rmul__`).
fn poly_n(x: &Tensor, p: &[f64]) -> Tensor {
    let Some((&first, rest)) = p.split_first() else {
        panic!("polyN: no coefficients (the result would be the float 0.0, not a tensor)");
    };
    let acc = 0.0 * x + first;
    rest.iter().fold(acc, |acc, &c| acc * x + c)
}

fn polyn_tensor(_: &Ctx) {
    let x = Tensor::new(vec![1.0, 2.0, 3.0, 4.0]);
    let got = poly_n(&x, &[1.0, -2.0, 1.0]);
    assert_eq!(got.shape(), &[4]);
    // np.testing.assert_allclose defaults: rtol 1e-7, atol 0
    assert_allclose(
        &values_f64(&got),
        &[0.0, 1.0, 4.0, 9.0],
        0.0,
        1e-7,
        "polyN(Tensor([1, 2, 3, 4]), [1, -2, 1])",
    );
}

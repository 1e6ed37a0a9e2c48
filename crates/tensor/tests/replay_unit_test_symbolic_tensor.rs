//! tinygrad's `test/unit/test_symbolic_tensor.py` (commit a9069c17), replayed on our API: one
//! case per test method, named `Class.test_name` (see `replay/mod.rs`; the data, with no
//! exclusions, is `tests/golden/replay/unit_test_symbolic_tensor.json`, written by
//! `tests/golden/replay/gen_unit_test_symbolic_tensor.py`).
//!
//! tinygrad's `t[:v]` with a bound `Variable` is `Idx::SymSlice`.

mod replay;

use replay::{Case, Ctx};
use tinygrad_tensor::{DType, Data, Idx, Tensor, Variable};

const CASES: &[Case] = &[("TestSymbolicPad.test_pad", pad)];

#[test]
fn cpu() {
    replay::replay("unit_test_symbolic_tensor", "CPU", CASES);
}

#[test]
fn reference() {
    replay::replay("unit_test_symbolic_tensor", "REF", CASES);
}

fn pad(_: &Ctx) {
    let v = Variable::new("v", 1, 100).bind(5);
    let t = Tensor::ones(&[100], DType::FLOAT32)
        .getitem(&[Idx::SymSlice {
            start: 0.into(),
            stop: v.into(),
        }])
        .pad(&[(4, 0)], 0);
    let t = t.getitem(&[Idx::slice(None, Some(9), 1)]);
    assert_eq!(t.tolist(), Data::from([0, 0, 0, 0, 1, 1, 1, 1, 1]));
}

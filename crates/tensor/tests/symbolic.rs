//! Symbolic sizes on the public API: `Variable`, the `*_sym` movement ops and symbolic
//! slicing give the values of the same ops with concrete sizes, for several bound values, and
//! keep their sizes symbolic through the ops that carry them over; misuse is refused with a
//! message.

use tinygrad_tensor::{Axis, Idx, SInt, Tensor, Variable};

fn data() -> Tensor {
    Tensor::arange(0, 48, 1)
        .float()
        .reshape(&[4, 12])
        .contiguous()
}

#[test]
fn symbolic_slices_equal_concrete_slices_for_every_value() {
    let x = data();
    let n = Variable::new("n", 1, 12);
    for v in [1usize, 3, 7, 12] {
        let b = n.bind(v);
        let sym = x.getitem(&[
            Idx::all(),
            Idx::SymSlice {
                start: 0.into(),
                stop: (&b).into(),
            },
        ]);
        let plain = x.getitem(&[
            Idx::all(),
            Idx::Slice {
                start: Some(0),
                stop: Some(v as isize),
                step: 1,
            },
        ]);
        assert_eq!(sym.shape(), vec![4, v]);
        assert!(sym.sym_shape()[1].is_symbolic());
        assert_eq!(sym.to_vec::<f32>(), plain.to_vec::<f32>(), "n = {v}");
        // with an integer index and an ellipsis around it
        let row = x.getitem(&[
            Idx::Int(2),
            Idx::Ellipsis,
            Idx::SymSlice {
                start: 1.into(),
                stop: (&b).into(),
            },
        ]);
        let want: Vec<f32> = (1..v).map(|j| (24 + j) as f32).collect();
        assert_eq!(row.to_vec::<f32>(), want, "n = {v}");
    }
}

#[test]
fn ops_on_a_symbolic_tensor_keep_its_sizes_and_match_concrete_ones() {
    let x = data();
    let n = Variable::new("n", 1, 12);
    for v in [2usize, 5, 12] {
        let b: SInt = n.bind(v).into();
        let sym = x.shrink_sym(&[(0.into(), 4.into()), (0.into(), b.clone())]);
        let con = x.shrink(&[(0, 4), (0, v)]);
        let pairs = [
            (
                (&sym * 2.0 + 1.0).exp2().sum(1isize),
                (&con * 2.0 + 1.0).exp2().sum(1isize),
            ),
            (sym.softmax(-1), con.softmax(-1)),
            (
                sym.transpose(0, 1).contiguous(),
                con.transpose(0, 1).contiguous(),
            ),
            (sym.max(1isize), con.max(1isize)),
            (
                sym.reshape(&[1, 4, v as isize])
                    .expand(&[3, 4, v as isize])
                    .sum(0isize),
                con.reshape(&[1, 4, v as isize])
                    .expand(&[3, 4, v as isize])
                    .sum(0isize),
            ),
            (
                sym.matmul(&con.transpose(0, 1)),
                con.matmul(&con.transpose(0, 1)),
            ),
            (
                &sym + &Tensor::ones(&[1, 1], tinygrad_tensor::DType::FLOAT32),
                &con + 1.0,
            ),
        ];
        for (k, (s, c)) in pairs.iter().enumerate() {
            assert_eq!(s.shape(), c.shape(), "op {k}, n = {v}");
            let (a, e) = (s.to_vec::<f32>(), c.to_vec::<f32>());
            for (i, (p, q)) in a.iter().zip(&e).enumerate() {
                assert!(
                    (p - q).abs() <= 1e-5 * q.abs().max(1.0),
                    "op {k}, n = {v}, [{i}]: {p} vs {q}"
                );
            }
        }
        // the symbolic size is carried through elementwise ops, permutes and broadcasts
        assert!((&sym * 2.0).sym_shape()[1].is_symbolic());
        assert!(sym.transpose(0, 1).sym_shape()[0].is_symbolic());
        assert!(sym.softmax(-1).sym_shape()[1].is_symbolic());
    }
}

#[test]
fn schedule_with_vars_reports_the_bound_values() {
    let x = data();
    let n = Variable::new("len", 1, 12);
    let s = x
        .shrink_sym(&[(0.into(), 4.into()), (0.into(), n.bind(9).into())])
        .sum(Axis::All);
    let (items, vars) = Tensor::schedule_with_vars(&[&s]);
    assert!(!items.is_empty());
    assert_eq!(vars.len(), 1);
    assert_eq!(vars["len"], 9);
    // the kernels read the variable: the same kernels for another value
    let s2 = x
        .shrink_sym(&[(0.into(), 4.into()), (0.into(), n.bind(4).into())])
        .sum(Axis::All);
    let (items2, vars2) = Tensor::schedule_with_vars(&[&s2]);
    assert_eq!(vars2["len"], 4);
    let asts = |v: &[tinygrad_tensor::UOp]| v.to_vec();
    assert_eq!(
        asts(&items.iter().map(|i| i.ast.clone()).collect::<Vec<_>>()),
        asts(&items2.iter().map(|i| i.ast.clone()).collect::<Vec<_>>())
    );
}

fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let e = std::panic::catch_unwind(f).unwrap_err();
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(ToString::to_string))
        .unwrap_or_default()
}

#[test]
fn misuse_is_refused_with_a_message() {
    let n = Variable::new("n", 2, 6);
    assert!(
        panic_message(std::panic::AssertUnwindSafe(|| {
            n.bind(7);
        }))
        .contains("n = 7 is outside its bounds [2, 6]")
    );
    let x = data();
    let b = n.bind(4);
    // a shrink past the dim
    let big = Variable::new("m", 1, 20).bind(13);
    assert!(
        panic_message(std::panic::AssertUnwindSafe(|| {
            x.shrink_sym(&[(0.into(), 4.into()), (0.into(), big.clone().into())]);
        }))
        .contains("outside a dimension of 12")
    );
    let e = x
        .try_getitem(&[
            Idx::all(),
            Idx::SymSlice {
                start: 0.into(),
                stop: big.into(),
            },
        ])
        .unwrap_err();
    assert!(e.to_string().contains("outside dim 1 of size 12"), "{e}");
    // splitting a symbolic size is refused
    let s = x.shrink_sym(&[(0.into(), 4.into()), (0.into(), b.into())]);
    assert!(
        panic_message(std::panic::AssertUnwindSafe(|| {
            s.reshape(&[4, 2, 2]);
        }))
        .contains("cannot be split")
    );
    // a variable whose largest value is past the dim: its kernels could not serve every value
    // (a Jit replays them with any value in the bounds), so the shrink is refused
    let wide = Variable::new("w", 1, 40).bind(10);
    assert!(
        panic_message(std::panic::AssertUnwindSafe(|| {
            x.shrink_sym(&[(0.into(), 4.into()), (0.into(), wide.clone().into())]);
        }))
        .contains("can reach 40, past a dimension of 12")
    );
    let e = x
        .try_getitem(&[
            Idx::all(),
            Idx::SymSlice {
                start: 0.into(),
                stop: wide.into(),
            },
        ])
        .unwrap_err();
    assert!(e.to_string().contains("outside dim 1"), "{e}");
}

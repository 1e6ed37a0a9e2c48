//! verify(): accepted and rejected graphs at each stage.

use std::any::Any;
use std::sync::Arc;

use tinygrad_dtype::AddrSpace;
use tinygrad_uop::{Arg, AxisKind, ConstValue, DType, Opaque, Ops, Stage, UOp, verify};

#[derive(Debug)]
struct Handle(u64);

impl Opaque for Handle {
    fn id(&self) -> u64 {
        self.0
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn buffer(n: usize) -> UOp {
    UOp::new(
        Ops::Buffer,
        DType::FLOAT32,
        vec![],
        Arg::Buffer(n, Arc::new(Handle(n as u64))),
    )
}

fn err(root: &UOp, stage: Stage) -> String {
    verify(root, stage)
        .expect_err("expected a verification error")
        .to_string()
}

fn global(slot: i64, dt: DType) -> UOp {
    UOp::new(
        Ops::DefineGlobal,
        dt.ptr(AddrSpace::Global),
        vec![],
        Arg::Int(slot),
    )
}

/// out[i] = a[i] * 2 + 1 for i in 0..16
fn kernel() -> UOp {
    let (out, a) = (global(0, DType::FLOAT32), global(1, DType::FLOAT32));
    let r = UOp::range(16, 0, AxisKind::Loop);
    let ia = UOp::new(Ops::Index, a.dtype(), vec![a, r.clone()], Arg::None);
    let ld = UOp::new(Ops::Load, DType::FLOAT32, vec![ia], Arg::None);
    let val = &ld * 2.0 + 1.0;
    let io = UOp::new(Ops::Index, out.dtype(), vec![out, r.clone()], Arg::None);
    let st = UOp::new(Ops::Store, DType::VOID, vec![io, val], Arg::None);
    let end = UOp::new(Ops::End, DType::VOID, vec![st, r], Arg::None);
    UOp::new(Ops::Sink, DType::VOID, vec![end], Arg::None)
}

#[test]
fn tensor_graph_accepted() {
    let b = buffer(12);
    let x = UOp::new(
        Ops::Reshape,
        DType::FLOAT32,
        vec![b.clone()],
        Arg::shape(&[3, 4]),
    );
    let y = UOp::new(Ops::Permute, DType::FLOAT32, vec![x], Arg::shape(&[1, 0]));
    let z = UOp::new(
        Ops::ReduceAxis,
        DType::FLOAT32,
        vec![&y * 2.0],
        Arg::Reduce(Ops::Add, Arc::from(vec![0])),
    );
    let c = UOp::new(Ops::Contiguous, DType::FLOAT32, vec![z], Arg::None);
    let root = UOp::new(Ops::Sink, DType::VOID, vec![c], Arg::None);
    verify(&root, Stage::Tensor).unwrap();
}

#[test]
fn kernel_accepted_and_program_rejects_index_dtype() {
    let k = kernel();
    verify(&k, Stage::Kernel).unwrap();
    let e = err(&k, Stage::Program);
    assert!(e.contains("index dtype must be lowered"), "{e}");
}

#[test]
fn movement_ops_not_allowed_in_kernels() {
    let x = UOp::new(
        Ops::Reshape,
        DType::FLOAT32,
        vec![buffer(4)],
        Arg::shape(&[2, 2]),
    );
    let e = err(&x, Stage::Kernel);
    assert!(
        e.contains("BUFFER is not allowed at the Kernel stage"),
        "{e}"
    );
}

#[test]
fn kernel_ops_not_allowed_in_tensor_graph() {
    let e = err(&kernel(), Stage::Tensor);
    assert!(e.contains("not allowed at the Tensor stage"), "{e}");
}

#[test]
fn alu_dtype_mismatch_rejected() {
    let a = UOp::cnst(DType::INT32, 1);
    let b = UOp::cnst(DType::FLOAT32, 1.0);
    let bad = UOp::new(Ops::Add, DType::INT32, vec![a, b], Arg::None);
    let e = err(&bad, Stage::Kernel);
    assert!(e.contains("ADD int32"), "{e}");
    assert!(e.contains("CONST int32, CONST float32"), "{e}");
    assert!(
        e.contains("source 1 must have the node's dtype int32, has float32"),
        "{e}"
    );
}

#[test]
fn alu_arity_rejected() {
    let a = UOp::cnst(DType::INT32, 1);
    let bad = UOp::new(Ops::Mul, DType::INT32, vec![a], Arg::None);
    assert!(err(&bad, Stage::Tensor).contains("takes 2 source(s), has 1"));
}

#[test]
fn comparison_must_produce_bool() {
    let (a, b) = (UOp::index(1), UOp::index(2));
    let bad = UOp::new(
        Ops::CmpLt,
        DType::INDEX,
        vec![a.clone(), b.clone()],
        Arg::None,
    );
    assert!(err(&bad, Stage::Kernel).contains("a comparison produces bool"));
    verify(&a.lt(&b), Stage::Kernel).unwrap();
    let mixed = UOp::new(
        Ops::CmpLt,
        DType::BOOL,
        vec![a, UOp::cnst(DType::INT32, 2)],
        Arg::None,
    );
    assert!(err(&mixed, Stage::Kernel).contains("compared sources must have one dtype"));
}

#[test]
fn where_condition_must_be_bool() {
    let (a, b) = (UOp::index(1), UOp::index(2));
    let bad = UOp::new(
        Ops::Where,
        DType::INDEX,
        vec![a.clone(), a.clone(), b.clone()],
        Arg::None,
    );
    let e = err(&bad, Stage::Kernel);
    assert!(e.contains("the condition of a where must be bool"), "{e}");
    verify(&a.lt(&b).where_(&a, &b), Stage::Kernel).unwrap();
}

#[test]
fn const_needs_const_arg_and_no_src() {
    let bad = UOp::new(Ops::Const, DType::INT32, vec![], Arg::Int(3));
    assert!(err(&bad, Stage::Tensor).contains("must be a Const value"));
    let bad = UOp::new(
        Ops::Const,
        DType::INT8,
        vec![],
        Arg::Const(ConstValue::Int(300)),
    );
    assert!(err(&bad, Stage::Tensor).contains("not a canonical int8 value"));
    let bad = UOp::new(
        Ops::Const,
        DType::INT32,
        vec![UOp::index(1), UOp::index(2)],
        Arg::Const(ConstValue::Int(3)),
    );
    assert!(err(&bad, Stage::Tensor).contains("takes 0 to 1 sources"));
}

#[test]
fn movement_args_checked() {
    let b = buffer(12);
    let bad = UOp::new(
        Ops::Reshape,
        DType::FLOAT32,
        vec![b.clone()],
        Arg::pairs(&[(0, 1)]),
    );
    assert!(err(&bad, Stage::Tensor).contains("the argument must be Shape"));
    let bad = UOp::new(
        Ops::Reshape,
        DType::FLOAT32,
        vec![b.clone()],
        Arg::shape(&[5, 2]),
    );
    assert!(err(&bad, Stage::Tensor).contains("cannot reshape"));
    let m = UOp::new(
        Ops::Reshape,
        DType::FLOAT32,
        vec![b.clone()],
        Arg::shape(&[3, 4]),
    );
    let bad = UOp::new(
        Ops::Permute,
        DType::FLOAT32,
        vec![m.clone()],
        Arg::shape(&[0, 0]),
    );
    assert!(err(&bad, Stage::Tensor).contains("is not a permutation"));
    let bad = UOp::new(
        Ops::Shrink,
        DType::FLOAT32,
        vec![m.clone()],
        Arg::pairs(&[(0, 2), (1, 5)]),
    );
    assert!(err(&bad, Stage::Tensor).contains("shrink (1, 5) outside a dimension of 4"));
    let bad = UOp::new(
        Ops::Expand,
        DType::FLOAT32,
        vec![m.clone()],
        Arg::shape(&[3, 8]),
    );
    assert!(err(&bad, Stage::Tensor).contains("cannot expand"));
    let ok = UOp::new(
        Ops::Pad,
        DType::FLOAT32,
        vec![m],
        Arg::pairs(&[(1, 1), (0, 2)]),
    );
    verify(&ok, Stage::Tensor).unwrap();
}

#[test]
fn range_needs_integer_size() {
    let bad = UOp::new(
        Ops::Range,
        DType::INDEX,
        vec![UOp::cnst(DType::FLOAT32, 4.0)],
        Arg::Range(0, AxisKind::Loop),
    );
    assert!(err(&bad, Stage::Kernel).contains("the size must be an integer"));
    let bad = UOp::new(Ops::Range, DType::INDEX, vec![UOp::index(4)], Arg::Int(0));
    assert!(err(&bad, Stage::Kernel).contains("Range(id, kind)"));
}

#[test]
fn index_first_source_must_be_pointer() {
    let bad = UOp::new(
        Ops::Index,
        DType::FLOAT32,
        vec![UOp::cnst(DType::FLOAT32, 1.0), UOp::index(0)],
        Arg::None,
    );
    assert!(err(&bad, Stage::Kernel).contains("source 0 must be a pointer"));
}

#[test]
fn store_is_void_and_value_matches() {
    let g = global(0, DType::FLOAT32);
    let idx = UOp::new(Ops::Index, g.dtype(), vec![g, UOp::index(0)], Arg::None);
    let bad = UOp::new(
        Ops::Store,
        DType::FLOAT32,
        vec![idx.clone(), UOp::cnst(DType::FLOAT32, 1.0)],
        Arg::None,
    );
    assert!(err(&bad, Stage::Kernel).contains("a store has dtype void"));
    let bad = UOp::new(
        Ops::Store,
        DType::VOID,
        vec![idx, UOp::cnst(DType::INT32, 1)],
        Arg::None,
    );
    assert!(err(&bad, Stage::Kernel).contains("the value must be float32, is int32"));
}

#[test]
fn reduce_arg_and_ranges() {
    let r = UOp::range(4, 0, AxisKind::Reduce);
    let v = r.cast(DType::FLOAT32);
    let ok = UOp::new(
        Ops::Reduce,
        DType::FLOAT32,
        vec![v.clone(), r.clone()],
        Arg::Op(Ops::Add),
    );
    verify(&ok, Stage::Kernel).unwrap();
    let r32 = UOp::new(
        Ops::Range,
        DType::INT32,
        vec![UOp::cnst(DType::INT32, 4)],
        Arg::Range(1, AxisKind::Reduce),
    );
    let red = UOp::new(
        Ops::Reduce,
        DType::FLOAT32,
        vec![r32.cast(DType::FLOAT32), r32],
        Arg::Op(Ops::Add),
    );
    assert!(err(&red, Stage::Program).contains("REDUCE is not allowed at the Program stage"));
    let bad = UOp::new(
        Ops::Reduce,
        DType::FLOAT32,
        vec![v.clone(), r],
        Arg::Op(Ops::Sub),
    );
    assert!(err(&bad, Stage::Kernel).contains("SUB is not a reduce op"));
    let bad = UOp::new(
        Ops::Reduce,
        DType::FLOAT32,
        vec![v, UOp::index(3)],
        Arg::Op(Ops::Add),
    );
    assert!(err(&bad, Stage::Kernel).contains("must be RANGEs"));
}

#[test]
fn define_var_and_bind() {
    let x = UOp::variable("n", 1, 8);
    let ok = UOp::new(
        Ops::Bind,
        DType::INDEX,
        vec![x.clone(), UOp::index(4)],
        Arg::None,
    );
    verify(&ok, Stage::Tensor).unwrap();
    let bad = UOp::new(Ops::Bind, DType::INDEX, vec![x, UOp::index(9)], Arg::None);
    assert!(err(&bad, Stage::Tensor).contains("value 9 outside the bounds 1..=8"));
}

#[test]
fn program_with_int32_indices_accepted() {
    let g = global(0, DType::INT32);
    let r = UOp::new(
        Ops::Range,
        DType::INT32,
        vec![UOp::cnst(DType::INT32, 8)],
        Arg::Range(0, AxisKind::Loop),
    );
    let idx = UOp::new(Ops::Index, g.dtype(), vec![g, r.clone()], Arg::None);
    let st = UOp::new(Ops::Store, DType::VOID, vec![idx, &r * 2], Arg::None);
    let end = UOp::new(Ops::End, DType::VOID, vec![st, r], Arg::None);
    verify(
        &UOp::new(Ops::Sink, DType::VOID, vec![end], Arg::None),
        Stage::Program,
    )
    .unwrap();
}

#[test]
fn error_names_position_and_stage() {
    let bad = UOp::new(Ops::Sink, DType::INT32, vec![], Arg::None);
    let e = verify(&bad, Stage::Tensor).unwrap_err();
    assert_eq!(e.index, 0);
    assert_eq!(e.node, bad);
    assert!(
        e.to_string().starts_with("Tensor stage: node 0 SINK int32"),
        "{e}"
    );
}

#[test]
fn simplified_graphs_still_verify() {
    let (a, b) = (UOp::variable("a", 0, 9), UOp::variable("b", -3, 3));
    let e = ((&a * 4 + &b).idiv(4) % 3)
        .maximum(&b)
        .lt(2)
        .where_(&a, &b * 2);
    verify(&e, Stage::Kernel).unwrap();
    verify(&e.simplify(), Stage::Kernel).unwrap();
}

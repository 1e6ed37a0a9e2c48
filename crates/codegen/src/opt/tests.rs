//! Unit tests of the kernel optimizations.

use super::*;

#[test]
fn affine_coefficients() {
    let r = UOp::range(8i64, 0, AxisKind::Loop);
    let s = UOp::range(4i64, 1, AxisKind::Loop);
    let m = &mut HashMap::new();
    assert_eq!(affine_coeff(&(&r * 16 + &s * 3 + 5), &s, m), Some(3));
    assert_eq!(
        affine_coeff(&(&r * 16 + &s * 3 + 5), &r, &mut HashMap::new()),
        Some(16)
    );
    assert_eq!(affine_coeff(&r.idiv(2), &r, &mut HashMap::new()), None);
    assert_eq!(affine_coeff(&(&r - &s), &s, &mut HashMap::new()), Some(-1));
    assert_eq!(affine_coeff(&(&r * &s), &s, &mut HashMap::new()), None);
}

fn global(slot: i64) -> UOp {
    let ptr = DType::FLOAT32.ptr(tinygrad_dtype::AddrSpace::Global);
    UOp::new(Ops::DefineGlobal, ptr, vec![], Arg::Int(slot))
}

fn index(buf: &UOp, idx: UOp) -> UOp {
    UOp::new(Ops::Index, buf.dtype(), vec![buf.clone(), idx], Arg::None)
}

/// A float32 load of `global(slot)` at `idx`.
fn load_f32(slot: i64, idx: UOp) -> UOp {
    UOp::new(
        Ops::Load,
        DType::FLOAT32,
        vec![index(&global(slot), idx)],
        Arg::None,
    )
}

/// `v` reduced with `op` over `ranges`.
fn reduce_op(v: UOp, ranges: &[&UOp], op: Ops) -> UOp {
    let mut src = vec![v];
    src.extend(ranges.iter().map(|r| (*r).clone()));
    UOp::new(Ops::Reduce, DType::FLOAT32, src, Arg::Op(op))
}

/// The kernel storing `v` into `global(0)` at `idx`.
fn store_sink(idx: UOp, v: UOp) -> UOp {
    let st = UOp::new(
        Ops::Store,
        DType::VOID,
        vec![index(&global(0), idx), v],
        Arg::None,
    );
    UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None)
}

/// Each split of `opts` as (axis, lanes, vector).
fn split_summary(opts: &KernelOpts) -> Vec<(usize, Vec<usize>, bool)> {
    opts.splits
        .iter()
        .map(|s| (s.axis, s.lanes.clone(), s.vector))
        .collect()
}

/// Ranges 0..4 of a 2x2 window kernel: outputs `(i, j)` of sizes `outer`, then the window
/// `(ky, kx)` of kind `window` (reduced in pooling, output axes in a window-layout gradient).
fn window_ranges(outer: (i64, i64), window: AxisKind) -> (UOp, UOp, UOp, UOp) {
    (
        UOp::range(outer.0, 0, AxisKind::Loop),
        UOp::range(outer.1, 1, AxisKind::Loop),
        UOp::range(2i64, 2, window),
        UOp::range(2i64, 3, window),
    )
}

/// `out[i][j] = op over (ry, rx) of x[2i + ry][2j + rx]`: 2x2 pooling of an 8x16 input.
fn pooling_kernel(op: Ops) -> UOp {
    let (i, j, ry, rx) = window_ranges((4, 8), AxisKind::Reduce);
    let (out, x) = (global(0), global(1));
    let xi = (&i * 2 + &ry) * 16 + &j * 2 + &rx;
    let v = UOp::new(Ops::Load, DType::FLOAT32, vec![index(&x, xi)], Arg::None);
    let red = UOp::new(Ops::Reduce, DType::FLOAT32, vec![v, ry, rx], Arg::Op(op));
    let st = UOp::new(
        Ops::Store,
        DType::VOID,
        vec![index(&out, &i * 8 + &j), red],
        Arg::None,
    );
    UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None)
}

/// A pooling gradient in window layout, `out[i][j][ky][kx] = x[2i + ky][2j + kx] * g[i][j]`:
/// the contiguous output axis (kx) is shorter than a vector, so the window axes are unrolled
/// and no loop of two iterations is left.
#[test]
fn elementwise_short_inner_axes_unroll() {
    let (i, j, ky, kx) = window_ranges((5, 10), AxisKind::Loop);
    let x = UOp::new(
        Ops::Load,
        DType::FLOAT32,
        vec![index(&global(1), (&i * 2 + &ky) * 20 + &j * 2 + &kx)],
        Arg::None,
    );
    let g = UOp::new(
        Ops::Load,
        DType::FLOAT32,
        vec![index(&global(2), &i * 10 + &j)],
        Arg::None,
    );
    let out = index(&global(0), &i * 40 + &j * 4 + &ky * 2 + &kx);
    let st = UOp::new(Ops::Store, DType::VOID, vec![out, &x * &g], Arg::None);
    let ast = UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None);
    let opts = heuristic(&ast);
    let unrolled: Vec<usize> = opts.splits.iter().map(|s| s.axis).collect();
    assert_eq!(unrolled, vec![3, 2], "{opts}");
    let applied = apply_opts(&ast, &opts).expect("the heuristic's opts apply");
    let short_loops = applied
        .toposort()
        .iter()
        .filter(|n| n.op() == Ops::Range && range_size(n) == Some(2))
        .count();
    assert_eq!(short_loops, 0, "a loop of two iterations is left");
}

/// `out[i][j] = x[i][j] * g[i // 2][j // 2]` (a pooled tensor broadcast back over its 2x2
/// windows): `j` as vectors and `i` unrolled by 2, so both rows share the gathered `g`;
/// without the `// 2` loads, only the vector split.
#[test]
fn loads_broadcast_over_windows_unroll_the_row_axis() {
    let i = UOp::range(8i64, 0, AxisKind::Loop);
    let j = UOp::range(16i64, 1, AxisKind::Loop);
    let x = load_f32(1, &i * 16 + &j);
    let kernel = |y: UOp| store_sink(&i * 16 + &j, &x * &y);
    let pooled = kernel(load_f32(2, i.idiv(2) * 8 + j.idiv(2)));
    let opts = heuristic(&pooled);
    let splits: Vec<(usize, bool)> = opts.splits.iter().map(|s| (s.axis, s.vector)).collect();
    assert_eq!(splits, vec![(1, true), (0, false)], "{opts}");
    assert_eq!(opts.splits[1].lanes, vec![2], "{opts}");
    apply_opts(&pooled, &opts).expect("the heuristic's opts apply");
    let plain = heuristic(&kernel(load_f32(2, &i * 16 + &j)));
    let splits: Vec<(usize, bool)> = plain.splits.iter().map(|s| (s.axis, s.vector)).collect();
    assert_eq!(splits, vec![(1, true)], "{plain}");
    // rows of a symbolic count: not split (their size is unknown)
    let n = UOp::new(
        Ops::DefineVar,
        DType::INDEX,
        vec![],
        Arg::Var("n".into(), 1, 64),
    );
    let rows = UOp::range(n, 0, AxisKind::Loop);
    let x = load_f32(1, &rows * 16 + &j);
    let g = load_f32(2, rows.idiv(2) * 8 + j.idiv(2));
    let symbolic = heuristic(&store_sink(&rows * 16 + &j, &x * &g));
    let splits: Vec<(usize, bool)> = symbolic.splits.iter().map(|s| (s.axis, s.vector)).collect();
    assert_eq!(splits, vec![(1, true)], "{symbolic}");
}

/// A transposed read (`out[c][p] = C[p][c]`, C's rows 64 floats apart): `p` as vectors, `c`
/// unrolled by 4 and nested innermost; a load only 8 apart along `p` (within a cache line) is
/// not a transposed read.
#[test]
fn transposed_loads_unroll_and_nest_the_contiguous_axis_innermost() {
    let kernel = |row: i64| {
        let c = UOp::range(64i64, 0, AxisKind::Loop);
        let p = UOp::range(112i64, 1, AxisKind::Loop);
        store_sink(&c * 112 + &p, load_f32(1, &p * row + &c))
    };
    let ast = kernel(64);
    let opts = heuristic(&ast);
    assert_eq!(
        split_summary(&opts),
        vec![(1, vec![4, 2], true), (0, vec![4], false)],
        "{opts}"
    );
    assert_eq!(opts.order, Some(vec![1, 0]), "{opts}");
    apply_opts(&ast, &opts).expect("the heuristic's opts apply");
    let near = heuristic(&kernel(8));
    assert_eq!((near.splits.len(), &near.order), (1, &None), "{near}");
}

#[test]
fn short_rows_unroll_the_row_axis() {
    let kernel = |cols: i64| {
        let i = UOp::range(64i64, 0, AxisKind::Loop);
        let j = UOp::range(cols, 1, AxisKind::Loop);
        let v = &load_f32(1, &i * cols + &j) * &load_f32(2, i.clone());
        store_sink(&i * cols + &j, v)
    };
    let short = kernel(8);
    let opts = heuristic(&short);
    assert_eq!(
        split_summary(&opts),
        vec![(1, vec![4, 2], true), (0, vec![4], false)],
        "{opts}"
    );
    apply_opts(&short, &opts).expect("the heuristic's opts apply");
    let long = heuristic(&kernel(32));
    assert_eq!(long.splits.len(), 1, "{long}");
}

/// `mask[i] = 0 < x[i]` (ReLU's saved mask), `y[i] = where(mask[i], x[i], 0)`: the bool
/// store and the bool load are 4-lane vector accesses, not four scalar bytes.
#[test]
fn bool_buffers_are_loaded_and_stored_as_vectors() {
    let bool_global = |slot: i64| {
        let ptr = DType::BOOL.ptr(tinygrad_dtype::AddrSpace::Global);
        UOp::new(Ops::DefineGlobal, ptr, vec![], Arg::Int(slot))
    };
    let i = UOp::range(64i64, 0, AxisKind::Loop);
    let x = UOp::new(
        Ops::Load,
        DType::FLOAT32,
        vec![index(&global(1), i.clone())],
        Arg::None,
    );
    let zero = UOp::cnst(DType::FLOAT32, 0.0);
    let positive = UOp::new(
        Ops::CmpLt,
        DType::BOOL,
        vec![zero.clone(), x.clone()],
        Arg::None,
    );
    let store_mask = UOp::new(
        Ops::Store,
        DType::VOID,
        vec![index(&bool_global(0), i.clone()), positive],
        Arg::None,
    );
    let mask = UOp::new(
        Ops::Load,
        DType::BOOL,
        vec![index(&bool_global(2), i.clone())],
        Arg::None,
    );
    let selected = UOp::new(Ops::Where, DType::FLOAT32, vec![mask, x, zero], Arg::None);
    let store_selected = UOp::new(
        Ops::Store,
        DType::VOID,
        vec![index(&global(3), i.clone()), selected],
        Arg::None,
    );
    for (what, st) in [("bool store", store_mask), ("bool load", store_selected)] {
        let ast = UOp::new(Ops::Sink, DType::VOID, vec![st], Arg::None);
        let opts = heuristic(&ast);
        assert!(opts.splits.iter().any(|s| s.vector), "{what}: {opts}");
        let applied = apply_opts(&ast, &opts).expect("the heuristic's opts apply");
        let bool_vector_access = applied.toposort().iter().any(|n| match n.op() {
            Ops::Load => n.dtype() == DType::BOOL.vec(4),
            Ops::Store => n.s(1).dtype() == DType::BOOL.vec(4),
            _ => false,
        });
        assert!(bool_vector_access, "{what}: no 4-lane bool access");
    }
}

#[test]
fn small_windows_unroll_and_vectorize_with_strided_loads() {
    let ast = pooling_kernel(Ops::Max);
    let opts = heuristic(&ast);
    // both window ranges unrolled, the output column (stride 2 in the load) as a vector
    let unrolled: Vec<usize> = opts
        .splits
        .iter()
        .filter(|s| !s.vector)
        .map(|s| s.axis)
        .collect();
    assert_eq!(unrolled, vec![2, 3], "{opts}");
    assert!(
        opts.splits.iter().any(|s| s.vector && s.axis == 1),
        "{opts}"
    );
    // two splits of one reduction without remainders are accepted (the heuristic's opts
    // must apply: a rejected set falls back to no opts at all)
    let applied = apply_opts(&ast, &opts).expect("the heuristic's opts apply");
    assert!(
        !applied
            .toposort()
            .iter()
            .any(|n| n.op() == Ops::Range && matches!(range_kind(n), AxisKind::Reduce)),
        "a window loop is left"
    );
}

/// Per-channel partial sums over an `(N, C, P)` tensor, as BatchNorm's are scheduled:
/// `out[c][j] = sum over (i, p) of x[(2j + i) * C * P + c * P + p]`, outputs `(c, j)` with
/// sizes `(channels, parts)`, P = `pixels` contiguous.
fn channel_sums(channels: i64, parts: i64, pixels: i64) -> UOp {
    let c = UOp::range(channels, 0, AxisKind::Loop);
    let j = UOp::range(parts, 1, AxisKind::Loop);
    let i = UOp::range(2i64, 2, AxisKind::Reduce);
    let p = UOp::range(pixels, 3, AxisKind::Reduce);
    let xi = (&j * 2 + &i) * (channels * pixels) + &c * pixels + &p;
    let red = reduce_op(load_f32(1, xi), &[&i, &p], Ops::Add);
    store_sink(&c * parts + &j, red)
}

#[test]
fn contiguous_reductions_nest_their_outputs_in_memory_order() {
    // long rows (the vector-accumulator branch) and short ones (the short-dot branch):
    // the part axis, the larger stride, goes outermost
    for pixels in [400, 16] {
        let ast = channel_sums(32, 256, pixels);
        let opts = heuristic(&ast);
        assert_eq!(opts.order, Some(vec![1, 0]), "P = {pixels}: {opts}");
        apply_opts(&ast, &opts).expect("the heuristic's opts apply");
    }
    // already in memory order: unchanged
    let c = UOp::range(32i64, 0, AxisKind::Loop);
    let j = UOp::range(256i64, 1, AxisKind::Loop);
    let p = UOp::range(400i64, 2, AxisKind::Reduce);
    let red = reduce_op(
        load_f32(1, &c * (256 * 400) + &j * 400 + &p),
        &[&p],
        Ops::Add,
    );
    let ast = store_sink(&c * 256 + &j, red);
    assert_eq!(heuristic(&ast).order, None);
    // a new outermost range too short to split across threads: unchanged
    assert_eq!(heuristic(&channel_sums(128, 8, 400)).order, None);
}

#[test]
fn a_reduction_split_with_a_remainder_is_not_split_again() {
    let both_exact = KernelOpts::parse("s2:2 s3:2").expect("opts");
    assert!(apply_opts(&pooling_kernel(Ops::Add), &both_exact).is_ok());
    // sum over a 5x6 window
    let wide = {
        let i = UOp::range(4i64, 0, AxisKind::Loop);
        let (ry, rx) = (
            UOp::range(5i64, 2, AxisKind::Reduce),
            UOp::range(6i64, 3, AxisKind::Reduce),
        );
        let red = reduce_op(load_f32(1, &i * 30 + &ry * 6 + &rx), &[&ry, &rx], Ops::Add);
        store_sink(i, red)
    };
    // 5 = 2*2 + 1: a main part and a tail, which the second split would have to split alike
    let tail_then_split = KernelOpts::parse("s2:2 s3:3").expect("opts");
    assert!(apply_opts(&wide, &tail_then_split).is_err());
    let exact_then_tail = KernelOpts::parse("s3:3 s2:2").expect("opts");
    assert!(apply_opts(&wide, &exact_then_tail).is_ok());
}

#[test]
fn invalid_splits_are_rejected() {
    let r = UOp::range(3i64, 0, AxisKind::Loop);
    let ast = UOp::new(Ops::Sink, DType::VOID, vec![r.clone()], Arg::None);
    let too_big = KernelOpts {
        splits: vec![Split {
            axis: 0,
            lanes: vec![4],
            vector: true,
        }],
        order: None,
    };
    assert!(apply_opts(&ast, &too_big).is_err());
    let missing = KernelOpts {
        splits: vec![Split {
            axis: 7,
            lanes: vec![2],
            vector: false,
        }],
        order: None,
    };
    assert!(apply_opts(&ast, &missing).is_err());
}

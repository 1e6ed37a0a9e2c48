//! Kernel optimizations on awkward sizes: the CPU device (upcast/unroll tiles, 4-lane vectors,
//! overlapping last tiles, reduce tails) against the REF interpreter (no optimizations), for
//! sizes that are not multiples of any tile: 0, 1, 3, 7, 9, 17, 1023, ...

use tinygrad_tensor::{DType, Tensor};

fn data(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u64 + 1)
                .wrapping_mul(2654435761)
                .wrapping_add(seed * 97)
                % 2001;
            h as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn both(shape: &[usize], seed: u64) -> (Tensor, Tensor) {
    let d = data(shape.iter().product(), seed);
    (
        Tensor::from_slice_on(&d, shape, "CPU"),
        Tensor::from_slice_on(&d, shape, "REF"),
    )
}

/// CPU and REF agree within `tol` (relative to the largest magnitude, for reassociated sums).
fn check(cpu: &Tensor, reference: &Tensor, tol: f64, what: &str) {
    assert_eq!(cpu.shape(), reference.shape(), "{what}: shapes");
    let (c, r) = (cpu.to_f64_vec(), reference.to_f64_vec());
    let scale = r.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in c.iter().zip(&r).enumerate() {
        let same = (x.is_nan() && y.is_nan()) || (x - y).abs() <= tol * scale;
        assert!(same, "{what}: element {i}: CPU {x} vs REF {y}");
    }
}

const SIZES: [usize; 12] = [1, 2, 3, 4, 5, 7, 8, 9, 15, 17, 33, 1023];

#[test]
fn elementwise_on_odd_lengths() {
    for n in SIZES.iter().copied().chain([0, 4097]) {
        let (a, ar) = both(&[n], 1);
        let (b, br) = both(&[n], 2);
        let f = |x: &Tensor, y: &Tensor| ((x * y) + 0.5).relu().exp() - y.maximum(x);
        check(
            &f(&a, &b),
            &f(&ar, &br),
            1e-6,
            &format!("elementwise n={n}"),
        );
    }
}

#[test]
fn transcendentals_and_selects_vectorized() {
    for n in [5usize, 8, 19, 64] {
        let (a, ar) = both(&[n], 3);
        let f = |x: &Tensor| {
            let s = (x * 3.0).sin() + (x.abs() + 0.1).log() + x.lt(0.0).where_(x, &x.sqrt());
            x.lt(0.2).where_(&s, &(x * -2.0))
        };
        check(&f(&a), &f(&ar), 1e-5, &format!("transcendentals n={n}"));
    }
}

#[test]
fn two_d_views_gather_correctly() {
    for (r, c) in [(1usize, 1usize), (3, 5), (4, 4), (7, 9), (17, 8), (5, 33)] {
        let (a, ar) = both(&[r, c], 4);
        let f = |x: &Tensor| {
            let t = x.permute(&[1, 0]).flip(&[0]) * 2.0;
            t.pad(&[(1, 2), (0, 3)], 0.5) + 1.0
        };
        check(&f(&a), &f(&ar), 0.0, &format!("views {r}x{c}"));
    }
}

/// Transposed copies whose source is a cache line or more apart along the output's contiguous
/// axis (the heuristic unrolls the other axis by 4 and nests it innermost, overlapping its last
/// tile when 4 does not divide it), with an elementwise op, and a 3-D one (a GEMM's `C` read
/// back channel-major).
#[test]
fn transposed_copies_on_odd_sizes() {
    for (r, c) in [(16usize, 4usize), (17, 5), (33, 7), (64, 30), (1023, 9)] {
        let (a, ar) = both(&[r, c], 7);
        let f = |x: &Tensor| x.permute(&[1, 0]).contiguous() * 2.0 + 1.0;
        check(&f(&a), &f(&ar), 0.0, &format!("transpose {r}x{c}"));
    }
    let (a, ar) = both(&[5, 9, 33], 8);
    let f = |x: &Tensor| x.permute(&[2, 0, 1]).relu().contiguous();
    check(&f(&a), &f(&ar), 0.0, "channel-major 5x9x33");
}

/// Padded rows read as lane-gated vector loads (one vector load where all four lanes are
/// inside the row, lane by lane at the borders, nothing in a padding-only vector), with pads
/// shorter and longer than a vector on either side, and an op applied under the padding.
#[test]
fn padded_rows_on_odd_sizes() {
    for (shape, pads) in [
        ([2usize, 5, 13], [(0usize, 0usize), (1, 1), (1, 1)]),
        ([3, 4, 33], [(0, 0), (2, 3), (5, 6)]),
        ([1, 9, 56], [(0, 0), (1, 1), (1, 1)]),
        ([2, 3, 7], [(1, 0), (0, 2), (9, 4)]),
    ] {
        let (a, ar) = both(&shape, 9);
        let f = |x: &Tensor| (x * 2.0 + 1.0).relu().pad(&pads, 0.0) - 0.5;
        check(&f(&a), &f(&ar), 0.0, &format!("pad {shape:?} by {pads:?}"));
    }
}

#[test]
fn matmul_tile_remainders() {
    let shapes = [
        (1usize, 1usize, 1usize),
        (1, 7, 1),
        (3, 5, 7),
        (4, 4, 4),
        (7, 3, 9),
        (8, 8, 8),
        (9, 17, 13),
        (5, 16, 33),
        (33, 7, 65),
        (2, 64, 3),
        (16, 1, 16),
        (12, 40, 20),
    ];
    for (m, k, n) in shapes {
        let (a, ar) = both(&[m, k], 5);
        let (b, br) = both(&[k, n], 6);
        check(
            &a.matmul(&b),
            &ar.matmul(&br),
            1e-5,
            &format!("matmul {m}x{k}x{n}"),
        );
        // fused elementwise after the reduce
        check(
            &(a.matmul(&b) + 1.0).relu(),
            &(ar.matmul(&br) + 1.0).relu(),
            1e-5,
            &format!("matmul+relu {m}x{k}x{n}"),
        );
    }
}

#[test]
fn matmul_with_empty_dimensions() {
    for (m, k, n) in [(0usize, 3usize, 4usize), (3, 0, 4), (4, 3, 0)] {
        let (a, ar) = both(&[m, k], 7);
        let (b, br) = both(&[k, n], 8);
        check(
            &a.matmul(&b),
            &ar.matmul(&br),
            0.0,
            &format!("matmul {m}x{k}x{n}"),
        );
    }
}

#[test]
fn reductions_with_tails() {
    for n in SIZES.iter().copied().chain([0, 4100]) {
        let (a, ar) = both(&[n], 9);
        check(&a.sum(None), &ar.sum(None), 1e-5, &format!("sum n={n}"));
        if n > 0 {
            check(&a.max(None), &ar.max(None), 0.0, &format!("max n={n}"));
        }
    }
    for (r, c) in [
        (1usize, 1usize),
        (3, 5),
        (7, 9),
        (17, 4),
        (5, 33),
        (64, 3),
        (2, 1023),
    ] {
        let (a, ar) = both(&[r, c], 10);
        check(
            &a.sum(0isize),
            &ar.sum(0isize),
            1e-5,
            &format!("sum(0) {r}x{c}"),
        );
        check(
            &a.sum(1isize),
            &ar.sum(1isize),
            1e-5,
            &format!("sum(1) {r}x{c}"),
        );
        check(
            &a.max(1isize),
            &ar.max(1isize),
            0.0,
            &format!("max(1) {r}x{c}"),
        );
        check(
            &a.softmax(-1),
            &ar.softmax(-1),
            1e-5,
            &format!("softmax {r}x{c}"),
        );
    }
}

#[test]
fn integer_and_double_reductions() {
    for n in [1usize, 7, 17, 1023] {
        let ints: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % 201 - 100).collect();
        let a = Tensor::from_slice_on(&ints, &[n], "CPU");
        let ar = Tensor::from_slice_on(&ints, &[n], "REF");
        assert_eq!(
            a.sum(None).to_vec::<i32>(),
            ar.sum(None).to_vec::<i32>(),
            "int sum n={n}"
        );
        let a2 = (&a * 3 + 1).cast(DType::FLOAT64);
        let ar2 = (&ar * 3 + 1).cast(DType::FLOAT64);
        check(
            &a2.sum(None),
            &ar2.sum(None),
            1e-12,
            &format!("f64 sum n={n}"),
        );
        check(
            &(&a2 * 0.5),
            &(&ar2 * 0.5),
            0.0,
            &format!("f64 elementwise n={n}"),
        );
    }
}

#[test]
fn broadcast_and_gated_inputs() {
    for (r, c) in [(3usize, 7usize), (9, 4), (1, 9), (17, 17)] {
        let (a, ar) = both(&[r, c], 11);
        let (b, br) = both(&[c], 12);
        let (s, sr) = both(&[r, 1], 13);
        let f = |x: &Tensor, y: &Tensor, z: &Tensor| (x + y) * z - x.shrink(&[(0, r), (0, c)]);
        check(
            &f(&a, &b, &s),
            &f(&ar, &br, &sr),
            1e-6,
            &format!("broadcast {r}x{c}"),
        );
        let g = |x: &Tensor| x.pad(&[(2, 1), (3, 0)], -1.0).sum(1isize);
        check(&g(&a), &g(&ar), 1e-5, &format!("padded sum {r}x{c}"));
    }
}

/// Bool buffers (ReLU's saved masks) are stored and loaded 4 at a time on the CPU: masks of odd
/// lengths, a mask read through padding (gated vector loads) and a mask selecting between two
/// inputs agree with REF element for element.
#[test]
fn bool_masks_stored_and_loaded_as_vectors() {
    for n in SIZES.iter().copied().chain([0, 4097]) {
        let (a, ar) = both(&[n], 21);
        let (b, br) = both(&[n], 22);
        let mask = |x: &Tensor| x.gt(0.0).contiguous();
        let (m, mr) = (mask(&a), mask(&ar));
        m.realize();
        mr.realize();
        assert_eq!(m.to_vec::<bool>(), mr.to_vec::<bool>(), "stored mask n={n}");
        let pick = |m: &Tensor, x: &Tensor, y: &Tensor| m.where_(x, y) * 2.0;
        check(
            &pick(&m, &a, &b),
            &pick(&mr, &ar, &br),
            0.0,
            &format!("where n={n}"),
        );
        let padded = |m: &Tensor| m.pad(&[(3, 2)], false).cast(DType::FLOAT32) + 1.0;
        check(
            &padded(&m),
            &padded(&mr),
            0.0,
            &format!("padded mask n={n}"),
        );
        let negated = |m: &Tensor| m.logical_not().contiguous();
        assert_eq!(
            negated(&m).to_vec::<bool>(),
            negated(&mr).to_vec::<bool>(),
            "negated mask n={n}"
        );
    }
}

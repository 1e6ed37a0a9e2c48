//! Every layout this CPU runs against the definition computed in `i64` here: both signednesses
//! of each operand, every kind of zero point, sizes off the panels and groups, the extremes.

use super::*;

/// Every layout this CPU runs.
fn layouts() -> Vec<Layout> {
    [Layout::Portable, Layout::Avx2, Layout::Vnni]
        .into_iter()
        .filter(|l| l.runs_here())
        .collect()
}

/// Deterministic bytes.
fn bytes(len: usize, seed: u32) -> Vec<u8> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (s >> 16) as u8
        })
        .collect()
}

/// `sum_p (a[i,p] - za) * (b[p,j] - zb)` in i64, wrapped to i32 as int32 sums wrap.
#[allow(clippy::too_many_arguments)]
fn definition(
    a: &[u8],
    b: &[u8],
    (m, n, k): (usize, usize, usize),
    (a_signed, b_signed): (bool, bool),
    za: &[i64],
    zb: &[i64],
) -> Vec<i32> {
    let v = |x: u8, signed: bool| {
        if signed {
            i64::from(x as i8)
        } else {
            i64::from(x)
        }
    };
    let mut out = vec![0i32; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: i64 = (0..k)
                .map(|p| (v(a[i * k + p], a_signed) - za[i]) * (v(b[p * n + j], b_signed) - zb[j]))
                .sum();
            out[i * n + j] = s as i32;
        }
    }
    out
}

/// A zero point's raw bytes and its values for each of `per` rows/columns.
fn zero_point(kind: ZeroPoint, per: usize, signed: bool, seed: u32) -> (Option<Vec<u8>>, Vec<i64>) {
    let raw = match kind {
        ZeroPoint::None => return (None, vec![0; per]),
        ZeroPoint::One => bytes(1, seed),
        ZeroPoint::Each => bytes(per, seed),
    };
    let v = |x: u8| {
        if signed {
            i64::from(x as i8)
        } else {
            i64::from(x)
        }
    };
    let vals = (0..per)
        .map(|i| v(raw[if kind == ZeroPoint::One { 0 } else { i }]))
        .collect();
    (Some(raw), vals)
}

/// The product through `pack`, `Prepared` and `run_task` on the caller's thread, the output
/// split into two row blocks and the panels into two column groups (as the launch splits it).
#[allow(clippy::too_many_arguments)]
fn product(
    layout: Layout,
    a: &[u8],
    b: &[u8],
    (m, n, k): (usize, usize, usize),
    (a_signed, b_signed): (bool, bool),
    (a_zero, za): (ZeroPoint, Option<&[u8]>),
    (b_zero, zb): (ZeroPoint, Option<&[u8]>),
) -> Vec<i32> {
    let pk = IntPack {
        k,
        n,
        b_signed,
        b_zero,
        layout,
        id: 0,
    };
    let mut packed = vec![0xAAu8; layout.packed_bytes(k, n)];
    pack(&pk, b, zb, &mut packed);
    let pm = IntMatmul {
        m,
        n,
        k,
        a_signed,
        a_zero,
        layout,
        id: 0,
    };
    let prepared = Prepared::new(&pm, a, &packed, za);
    let mut out = vec![i32::MIN; m * n];
    let tile = OutTile {
        addr: out.as_mut_ptr() as usize,
        n,
    };
    let panel = layout.panel_cols().max(1);
    let half_cols = (n.div_ceil(panel) / 2) * panel;
    let half_rows = m / 2;
    for rows in [0..half_rows, half_rows..m] {
        for cols in [0..half_cols.min(n), half_cols.min(n)..n] {
            run_task(&pm, &prepared, &packed, rows.clone(), cols, &tile);
        }
    }
    out
}

#[test]
fn every_layout_equals_the_definition() {
    let kinds = [ZeroPoint::None, ZeroPoint::One, ZeroPoint::Each];
    let mut seed = 7;
    for layout in layouts() {
        for &(m, n, k) in &[
            (1, 1, 1),
            (3, 5, 7),
            (8, 32, 4),
            (9, 33, 13),
            (17, 70, 64),
            (2, 100, 130),
        ] {
            for signs in [(false, false), (false, true), (true, false), (true, true)] {
                for (za_kind, zb_kind) in kinds.iter().flat_map(|&x| kinds.map(|y| (x, y))) {
                    seed += 1;
                    let (a, b) = (bytes(m * k, seed), bytes(k * n, seed * 31));
                    let (za_raw, za) = zero_point(za_kind, m, signs.0, seed * 7);
                    let (zb_raw, zb) = zero_point(zb_kind, n, signs.1, seed * 13);
                    let want = definition(&a, &b, (m, n, k), signs, &za, &zb);
                    let got = product(
                        layout,
                        &a,
                        &b,
                        (m, n, k),
                        signs,
                        (za_kind, za_raw.as_deref()),
                        (zb_kind, zb_raw.as_deref()),
                    );
                    assert_eq!(
                        got, want,
                        "{layout:?} {m}x{n}x{k} signs {signs:?} zero points {za_kind:?} {zb_kind:?}"
                    );
                }
            }
        }
    }
}

/// The largest magnitudes everywhere (255 - 0 against -128 - 127 and the like) over a long `k`:
/// the 16-bit intermediates of both instructions and the int32 sums stay exact.
#[test]
fn extreme_values_stay_exact() {
    let (m, n, k) = (5, 40, 4099);
    for layout in layouts() {
        for signs in [(false, false), (false, true), (true, false), (true, true)] {
            let hi = |signed: bool| if signed { 0x80u8 } else { 0xFF };
            let lo = |signed: bool| if signed { 0x7Fu8 } else { 0x00 };
            let a = vec![hi(signs.0); m * k];
            let b = vec![lo(signs.1); k * n];
            let zb_raw = [hi(signs.1)];
            let v = |x: u8, s: bool| if s { i64::from(x as i8) } else { i64::from(x) };
            let want = definition(
                &a,
                &b,
                (m, n, k),
                signs,
                &vec![0; m],
                &vec![v(zb_raw[0], signs.1); n],
            );
            let got = product(
                layout,
                &a,
                &b,
                (m, n, k),
                signs,
                (ZeroPoint::None, None),
                (ZeroPoint::One, Some(&zb_raw)),
            );
            assert_eq!(got, want, "{layout:?} signs {signs:?}");
        }
    }
}

/// The kernels as the device launches them (slots checked, tasks on the pool) give the
/// definition's values, large enough to split over threads.
#[test]
fn launched_kernels_equal_the_definition() {
    let (m, n, k) = (37, 200, 300);
    let (a, b) = (bytes(m * k, 3), bytes(k * n, 5));
    let zb = bytes(n, 9);
    let want = definition(
        &a,
        &b,
        (m, n, k),
        (true, false),
        &vec![0; m],
        &zb.iter().map(|&z| i64::from(z)).collect::<Vec<_>>(),
    );
    for layout in layouts() {
        let buf = |dt: DType, data: &[u8]| {
            let b = Buffer::new("CPU", dt, data.len());
            b.copy_in(data);
            b
        };
        let (ab, bb, zbb) = (
            buf(DType::INT8, &a),
            buf(DType::UINT8, &b),
            buf(DType::UINT8, &zb),
        );
        let packed = Buffer::new("CPU", DType::UINT8, layout.packed_bytes(k, n));
        let pack_ast = int_pack_ast(k, n, false, ZeroPoint::Each, layout);
        let (pk, _, _) = compile(&pack_ast).expect("a pack AST").expect("compiles");
        pk.launch(&[packed.clone(), bb, zbb], &[]);
        let out = Buffer::new("CPU", DType::INT32, m * n);
        let mm_ast = int_matmul_ast(m, n, k, true, ZeroPoint::None, layout);
        let (mm, name, _) = compile(&mm_ast).expect("a product AST").expect("compiles");
        assert_eq!(name, format!("i8mm_{m}_{n}_{k}"));
        mm.launch(&[out.clone(), ab.clone(), packed], &[]);
        let got: Vec<i32> = out
            .to_bytes()
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(got, want, "{layout:?}");
    }
}

#[test]
#[should_panic(expected = "kernel launch")]
fn a_short_buffer_is_refused() {
    let ast = int_matmul_ast(4, 4, 4, false, ZeroPoint::None, Layout::Portable);
    let (mm, _, _) = compile(&ast).expect("a product AST").expect("compiles");
    let packed = Buffer::new("CPU", DType::UINT8, Layout::Portable.packed_bytes(4, 4));
    let a = Buffer::new("CPU", DType::UINT8, 15);
    mm.launch(&[Buffer::new("CPU", DType::INT32, 16), a, packed], &[]);
}

//! `Tensor::assign_in_place`: a write into the elements a view of a realized buffer shows,
//! into that same buffer (one kernel over the view's elements), on every backend; with a
//! symbolic position; with a value that reads the buffer it overwrites; and its refusals.

mod common;

use tinygrad_tensor::{DType, SInt, Tensor, Variable};

/// A realized `rows x cols` buffer holding `0, 1, 2, ...`.
fn counting(rows: usize, cols: usize, dev: &str) -> Tensor {
    let data: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let t = Tensor::from_slice(&data, &[rows, cols])
        .to(dev)
        .contiguous();
    t.realize();
    t
}

fn suite(dev: &str) {
    // a column block: only its elements change; every handle on the buffer sees them
    let t = counting(3, 4, dev);
    let alias = t.clone();
    let before = t.reshape(&[12]);
    let block = t.shrink(&[(1, 3), (1, 3)]);
    block
        .assign_in_place(&Tensor::from_slice(&[-1.0f32, -2.0, -3.0, -4.0], &[2, 2]).to(dev))
        .unwrap();
    let want = [
        0.0, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 7.0, 8.0, -3.0, -4.0, 11.0,
    ];
    assert_eq!(t.to_vec::<f32>(), want, "{dev}: the base");
    assert_eq!(alias.to_vec::<f32>(), want, "{dev}: a clone of the handle");
    assert_eq!(
        before.to_vec::<f32>(),
        want,
        "{dev}: a view taken before the write"
    );
    assert_eq!(
        block.to_vec::<f32>(),
        vec![-1.0, -2.0, -3.0, -4.0],
        "{dev}: the view"
    );

    // a broadcast value, through a permute and a flip
    let t = counting(2, 3, dev);
    t.permute(&[1, 0])
        .flip(&[0])
        .shrink(&[(0, 1), (0, 2)])
        .assign_in_place(&Tensor::from_slice(&[9.0f32], &[1]).to(dev))
        .unwrap();
    assert_eq!(
        t.to_vec::<f32>(),
        vec![0.0, 1.0, 9.0, 3.0, 4.0, 9.0],
        "{dev}: permuted and flipped"
    );

    // a value read from the buffer it overwrites, overlapping: computed before the write
    let t = counting(1, 6, dev);
    t.shrink(&[(0, 1), (1, 6)])
        .assign_in_place(&(t.shrink(&[(0, 1), (0, 5)]) * 10.0))
        .unwrap();
    assert_eq!(
        t.to_vec::<f32>(),
        vec![0.0, 0.0, 10.0, 20.0, 30.0, 40.0],
        "{dev}: a shifted copy of itself"
    );

    // a symbolic position (a KV cache's row `len - 1`): one kernel for every position
    let cache = Tensor::zeros(&[2, 8, 3], DType::FLOAT32)
        .to(dev)
        .contiguous();
    cache.realize();
    let var = Variable::new("len", 1, 8);
    for pos in [0usize, 5, 7, 2] {
        let end: SInt = (&var.bind(pos + 1)).into();
        let row: Vec<f32> = (0..6).map(|i| (pos * 10 + i) as f32).collect();
        cache
            .shrink_sym(&[
                (0.into(), 2.into()),
                (end.clone() - 1, end),
                (0.into(), 3.into()),
            ])
            .assign_in_place(&Tensor::from_slice(&row, &[2, 1, 3]).to(dev))
            .unwrap();
    }
    let got = cache.to_vec::<f32>();
    for h in 0..2 {
        for p in 0..8 {
            for d in 0..3 {
                let want = if [0, 5, 7, 2].contains(&p) {
                    (p * 10 + h * 3 + d) as f32
                } else {
                    0.0
                };
                assert_eq!(
                    got[(h * 8 + p) * 3 + d],
                    want,
                    "{dev}: cache[{h}][{p}][{d}]"
                );
            }
        }
    }

    // integers
    let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[4])
        .to(dev)
        .contiguous();
    t.realize();
    t.shrink(&[(2, 4)])
        .assign_in_place(&Tensor::from_slice(&[7i32, 8], &[2]).to(dev))
        .unwrap();
    assert_eq!(t.to_vec::<i32>(), vec![1, 2, 7, 8], "{dev}: int32");
}

#[test]
fn writes_only_the_view_on_cpu() {
    suite("CPU");
}

#[test]
fn writes_only_the_view_on_ref() {
    suite("REF");
}

#[test]
fn writes_only_the_view_on_webgpu() {
    common::on_webgpu("writes_only_the_view_on_webgpu", suite);
}

#[test]
fn a_fresh_buffer_written_in_part_is_zero_elsewhere() {
    // a large freed buffer of the same size goes to the buffer pool: the fresh buffer must not
    // take it (its ones would show through the elements not written)
    let n = 1 << 20;
    for _ in 0..3 {
        let ones = Tensor::ones(&[n], DType::FLOAT32).contiguous();
        ones.realize();
        drop(ones);
        let t = Tensor::empty(&[n], DType::FLOAT32);
        t.shrink(&[(5, 6)])
            .assign_in_place(&Tensor::from_slice(&[3.0f32], &[1]))
            .unwrap();
        let v = t.to_vec::<f32>();
        assert_eq!(v[5], 3.0);
        assert!(
            v.iter().enumerate().all(|(i, &x)| i == 5 || x == 0.0),
            "the elements not written are zero"
        );
    }
}

fn panic_of(f: impl FnOnce()) -> String {
    common::install_quiet_hook();
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("it panics");
    common::panic_message(e.as_ref())
}

#[test]
fn misuse_is_refused_naming_the_op() {
    let lazy = Tensor::from_slice(&[1.0f32, 2.0], &[2]) + 1.0;
    let m = panic_of(move || {
        lazy.assign_in_place(&Tensor::from_slice(&[0.0f32, 0.0], &[2]))
            .unwrap();
    });
    assert!(
        m.contains("assign_in_place") && m.contains("realized buffer"),
        "{m}"
    );
    let base = counting(2, 2, "CPU");
    let padded = base.pad(&[(0, 1), (0, 0)], 0.0);
    let m = panic_of(move || {
        padded
            .assign_in_place(&Tensor::zeros(&[3, 2], DType::FLOAT32))
            .unwrap();
    });
    assert!(m.contains("assign_in_place") && m.contains("PAD"), "{m}");
    let base = counting(2, 2, "CPU");
    let m = panic_of(move || {
        base.assign_in_place(&Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]))
            .unwrap();
    });
    assert!(m.contains("assign_in_place: dtype mismatch"), "{m}");
    let base = counting(2, 2, "CPU");
    let m = panic_of(move || {
        base.assign_in_place(&Tensor::zeros(&[3], DType::FLOAT32))
            .unwrap();
    });
    assert!(m.contains("assign_in_place: shape mismatch"), "{m}");
}

#[test]
fn several_writes_run_together_each_at_its_own_variable() {
    // two caches, each written at its own symbolic position (two variables in one schedule),
    // and a third write whose value reads the first cache as it was before the call
    let (a, b, c) = (
        counting(1, 6, "CPU"),
        counting(1, 6, "CPU"),
        counting(1, 3, "CPU"),
    );
    let at = |t: &Tensor, name: &str, pos: usize| {
        let end = SInt::from(&Variable::new(name, 1, 6).bind(pos + 1));
        t.shrink_sym(&[(0.into(), 1.into()), (end.clone() - 1, end)])
    };
    let (va, vb) = (
        Tensor::from_slice(&[-1.0f32], &[1, 1]),
        Tensor::from_slice(&[-2.0f32], &[1, 1]),
    );
    let from_a = a.shrink(&[(0, 1), (0, 3)]) * 10.0;
    Tensor::assign_in_place_all(&[
        (&at(&a, "pos_a", 1), &va),
        (&at(&b, "pos_b", 4), &vb),
        (&c, &from_a),
    ])
    .unwrap();
    assert_eq!(a.to_vec::<f32>(), vec![0.0, -1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(b.to_vec::<f32>(), vec![0.0, 1.0, 2.0, 3.0, -2.0, 5.0]);
    assert_eq!(c.to_vec::<f32>(), vec![0.0, 10.0, 20.0], "a as it was");
    Tensor::assign_in_place_all(&[]).unwrap();

    let a = counting(1, 4, "CPU");
    let m = panic_of(move || {
        let one = Tensor::from_slice(&[1.0f32], &[1, 1]);
        Tensor::assign_in_place_all(&[
            (&a.shrink(&[(0, 1), (0, 1)]), &one),
            (&a.shrink(&[(0, 1), (2, 3)]), &one),
        ])
        .unwrap();
    });
    assert!(
        m.contains("assign_in_place_all: write 1") && m.contains("buffer of its own"),
        "{m}"
    );
}

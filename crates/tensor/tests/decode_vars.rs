//! A decode-style loop over a growing KV cache, with the attention over a `Variable` length:
//! after the first steps no kernel is compiled any more (one kernel for every length), and the
//! results equal the same attention computed with concrete shapes. (Alone in its binary: it
//! counts the process's compiles.)

use std::sync::Mutex;

use tinygrad_tensor::{
    BoundVar, DType, Jit, SInt, Tensor, Variable, compile_count, schedule_cache_hits,
    thread_run_counts,
};

/// The tests count the process's compiles: one at a time.
static ONE: Mutex<()> = Mutex::new(());

const MAX: usize = 48;
const DIM: usize = 8;

fn row(step: usize, salt: usize) -> Vec<f32> {
    (0..DIM)
        .map(|i| (((step * 7 + i * 3 + salt * 5) % 13) as f32 - 6.0) * 0.125)
        .collect()
}

/// One decode step: write row `pos` of both caches (a masked select: one kernel of constant
/// cost), then attend over the first `len` rows.
fn step(
    (cache_k, cache_v): (&Tensor, &Tensor),
    pos: usize,
    len: SInt,
    [q, k, v]: [&Tensor; 3],
    shrink: &dyn Fn(&Tensor, &SInt) -> Tensor,
) -> Tensor {
    let p = Tensor::from_slice(&[pos as i32], &[1, 1]);
    let at = Tensor::arange(0, MAX as i32, 1)
        .reshape(&[MAX as isize, 1])
        .eq(&p);
    cache_k.assign(&at.where_(&k.expand(&[MAX as isize, DIM as isize]), cache_k));
    cache_v.assign(&at.where_(&v.expand(&[MAX as isize, DIM as isize]), cache_v));
    Tensor::try_realize_all(&[cache_k, cache_v]).unwrap();
    let (keys, values) = (shrink(cache_k, &len), shrink(cache_v, &len));
    let scores = q.matmul(&keys.transpose(0, 1)) * (1.0 / (DIM as f64).sqrt());
    scores.softmax(-1).matmul(&values)
}

/// The variable, two caches for the symbolic loop and two for the concrete reference.
fn setup() -> (Variable, [Tensor; 4]) {
    let zeros = || Tensor::zeros(&[MAX, DIM], DType::FLOAT32).contiguous();
    (
        Variable::new("len", 1, MAX),
        [zeros(), zeros(), zeros(), zeros()],
    )
}

fn sym_shrink(c: &Tensor, len: &SInt) -> Tensor {
    c.shrink_sym(&[(0.into(), len.clone()), (0.into(), DIM.into())])
}

#[test]
fn a_decode_loop_compiles_nothing_after_its_first_steps_and_matches_concrete_shapes() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (var, [ck, cv, rk, rv]) = setup();
    let mut compiled_after = vec![];
    for pos in 0..MAX {
        let (q, k, v) = (
            Tensor::from_slice(&row(pos, 0), &[1, DIM]),
            Tensor::from_slice(&row(pos, 1), &[1, DIM]),
            Tensor::from_slice(&row(pos, 2), &[1, DIM]),
        );
        let (before, hits) = (compile_count(), schedule_cache_hits());
        let out = step(
            (&ck, &cv),
            pos,
            var.bind(pos + 1).into(),
            [&q, &k, &v],
            &sym_shrink,
        );
        assert_eq!(out.shape(), vec![1, DIM]);
        let got = out.to_vec::<f32>();
        if pos >= 2 {
            // the schedule cache keys on the unbound graph: every length is a hit (the cache
            // update and the attention)
            assert!(
                schedule_cache_hits() >= hits + 2,
                "step {pos}: schedule cache missed"
            );
        }
        compiled_after.push(compile_count() - before);
        // the same step with concrete shapes (a new kernel per length)
        let concrete = |c: &Tensor, len: &SInt| c.shrink(&[(0, len.bound_value()), (0, DIM)]);
        let want = step((&rk, &rv), pos, (pos + 1).into(), [&q, &k, &v], &concrete).to_vec::<f32>();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "step {pos}[{i}]: {g} vs {w}"
            );
        }
    }
    println!("kernels compiled per step: {compiled_after:?}");
    assert!(compiled_after[0] > 0, "the first step compiles its kernels");
    assert!(
        compiled_after[2..].iter().all(|&c| c == 0),
        "kernels compiled per step: {compiled_after:?}"
    );
}

#[test]
fn the_decode_step_through_a_jit_with_a_variable_replays_every_length() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (var, [ck, cv, rk, rv]) = setup();
    // the position of the new row comes in as a tensor (the cache update); the length as the
    // variable (the attention)
    let mut jit = Jit::with_vars(|io: &[Tensor], v: &[BoundVar]| {
        let p = &io[3];
        let at = Tensor::arange(0, MAX as i32, 1)
            .reshape(&[MAX as isize, 1])
            .eq(p);
        ck.assign(&at.where_(&io[1].expand(&[MAX as isize, DIM as isize]), &ck));
        cv.assign(&at.where_(&io[2].expand(&[MAX as isize, DIM as isize]), &cv));
        Tensor::try_realize_all(&[&ck, &cv]).unwrap();
        let len: SInt = (&v[0]).into();
        let (keys, values) = (sym_shrink(&ck, &len), sym_shrink(&cv, &len));
        let scores = io[0].matmul(&keys.transpose(0, 1)) * (1.0 / (DIM as f64).sqrt());
        vec![scores.softmax(-1).matmul(&values)]
    });
    let mut compiled = vec![];
    for pos in 0..MAX {
        let (q, k, v) = (
            Tensor::from_slice(&row(pos, 0), &[1, DIM]),
            Tensor::from_slice(&row(pos, 1), &[1, DIM]),
            Tensor::from_slice(&row(pos, 2), &[1, DIM]),
        );
        let p = Tensor::from_slice(&[pos as i32], &[1, 1]);
        let (before, runs) = (compile_count(), thread_run_counts());
        let out = jit
            .call_vars(&[q.clone(), k.clone(), v.clone(), p], &[var.bind(pos + 1)])
            .unwrap_or_else(|e| panic!("step {pos}: {e}"));
        if pos >= 3 {
            assert_eq!(
                thread_run_counts().0,
                runs.0,
                "step {pos}: a replay schedules nothing"
            );
        }
        let got = out[0].to_vec::<f32>();
        compiled.push(compile_count() - before);
        let concrete = |c: &Tensor, len: &SInt| c.shrink(&[(0, len.bound_value()), (0, DIM)]);
        let want = step((&rk, &rv), pos, (pos + 1).into(), [&q, &k, &v], &concrete).to_vec::<f32>();
        assert_eq!(out[0].shape(), vec![1, DIM]);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "step {pos}[{i}]: {g} vs {w}"
            );
        }
    }
    assert_eq!(
        jit.replays(),
        MAX - 3,
        "captured at the third call (the first has length 1)"
    );
    assert!(
        compiled[3..].iter().all(|&c| c == 0),
        "compiles per step: {compiled:?}"
    );
    // another variable than the capture's is refused
    let other = Variable::new("len2", 1, MAX);
    let io = [
        Tensor::from_slice(&row(0, 0), &[1, DIM]),
        Tensor::from_slice(&row(0, 1), &[1, DIM]),
        Tensor::from_slice(&row(0, 2), &[1, DIM]),
        Tensor::from_slice(&[0i32], &[1, 1]),
    ];
    let e = jit.call_vars(&io, &[other.bind(3)]).unwrap_err();
    assert!(e.to_string().contains("len2"), "{e}");
}

#[test]
fn the_jitted_step_writes_one_row_in_place_at_the_variables_position() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (var, [ck, cv, rk, rv]) = setup();
    for c in [&ck, &cv] {
        c.realize();
    }
    // the position is the variable's value minus one: each step writes its one row into the
    // caches' own buffers (no kernel over the whole cache), then attends over the first `len`
    let mut jit = Jit::with_vars(|io: &[Tensor], v: &[BoundVar]| {
        let len: SInt = (&v[0]).into();
        let row_of =
            |c: &Tensor| c.shrink_sym(&[(len.clone() - 1, len.clone()), (0.into(), DIM.into())]);
        row_of(&ck).assign_in_place(&io[1]).unwrap();
        row_of(&cv).assign_in_place(&io[2]).unwrap();
        let (keys, values) = (sym_shrink(&ck, &len), sym_shrink(&cv, &len));
        let scores = io[0].matmul(&keys.transpose(0, 1)) * (1.0 / (DIM as f64).sqrt());
        vec![scores.softmax(-1).matmul(&values)]
    });
    let (k_buf, v_buf) = (ck.uop(), cv.uop());
    for pos in 0..MAX {
        let (q, k, v) = (
            Tensor::from_slice(&row(pos, 0), &[1, DIM]),
            Tensor::from_slice(&row(pos, 1), &[1, DIM]),
            Tensor::from_slice(&row(pos, 2), &[1, DIM]),
        );
        let (before, runs) = (compile_count(), thread_run_counts());
        let out = jit
            .call_vars(&[q.clone(), k.clone(), v.clone()], &[var.bind(pos + 1)])
            .unwrap_or_else(|e| panic!("step {pos}: {e}"));
        if pos >= 3 {
            assert_eq!(
                thread_run_counts().0,
                runs.0,
                "step {pos}: a replay schedules nothing"
            );
            assert_eq!(
                compile_count(),
                before,
                "step {pos}: a replay compiles nothing"
            );
        }
        let concrete = |c: &Tensor, len: &SInt| c.shrink(&[(0, len.bound_value()), (0, DIM)]);
        let want = step((&rk, &rv), pos, (pos + 1).into(), [&q, &k, &v], &concrete).to_vec::<f32>();
        for (i, (g, w)) in out[0].to_vec::<f32>().iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "step {pos}[{i}]: {g} vs {w}"
            );
        }
    }
    assert_eq!(jit.replays(), MAX - 3, "captured at the third call");
    // the caches kept their buffers, and hold every row the steps wrote
    assert_eq!((ck.uop(), cv.uop()), (k_buf, v_buf), "written in place");
    assert_eq!(ck.to_vec::<f32>(), rk.to_vec::<f32>(), "keys");
    assert_eq!(cv.to_vec::<f32>(), rv.to_vec::<f32>(), "values");
}

#[test]
fn a_variable_bound_outside_its_bounds_panics_naming_them() {
    let v = Variable::new("len", 1, 8);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| v.bind(9)));
    let msg = r.unwrap_err();
    let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("len = 9 is outside its bounds [1, 8]"),
        "{msg}"
    );
}

#[test]
fn a_jitted_function_that_takes_a_size_from_a_variables_value_is_refused() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    // the sizes come from `value()` (numbers), not from the variable: the kernels look alike
    // for every length, but the graphs differ, and a replay would read the capture's length
    let data = Tensor::arange(0, 48, 1)
        .float()
        .reshape(&[4, 12])
        .contiguous();
    let n = Variable::new("n", 1, 12);
    // `sym` has the variable's size; `con` the same size as a number: the matmul's kernel reads
    // both with the variable's loop, so its AST is the same for every length
    let mut jit = Jit::with_vars(|_x: &[Tensor], v: &[BoundVar]| {
        let sym = data.shrink_sym(&[(0.into(), 4.into()), (0.into(), (&v[0]).into())]);
        let con = data.shrink(&[(0, 4), (0, v[0].value())]);
        vec![sym.matmul(&con.transpose(0, 1))]
    });
    let mut err = None;
    for k in 2..8 {
        match jit.call_vars(&[], &[n.bind(k)]) {
            Ok(out) => {
                let con = data.shrink(&[(0, 4), (0, k)]);
                let want = con.matmul(&con.transpose(0, 1)).to_vec::<f32>();
                assert_eq!(out[0].to_vec::<f32>(), want, "a normal call is right");
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let e = err.expect("refused");
    assert!(e.to_string().contains("graphs of another structure"), "{e}");
    assert_eq!(jit.replays(), 0, "never replayed");
}

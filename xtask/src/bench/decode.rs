//! The `decode_loop` row: a 512-step decode loop over a growing KV cache (12 heads of 32, as
//! the MiniLM-shaped encoder), its step through a `Jit` with the cache length as a `Variable`:
//! the kernels compiled after step 2 (must be 0), the time per step early and late in the loop
//! (flat up to the attention's own cost, which grows with the length), vs the same loop with
//! concrete shapes (a new kernel per length) measured in the same run.

use super::*;

use tinygrad_tensor::{BoundVar, DType, SInt, Variable};

const MAX: usize = 512;
const HEADS: usize = 12;
const HD: usize = 32;

fn row(step: usize, salt: u64) -> Vec<f32> {
    rand_vec(HEADS * HD, salt * 1000 + step as u64)
}

/// One step on caches of shape `(HEADS, MAX, HD)`: write row `pos`, attend over `len` rows.
fn step(
    cache: &(Tensor, Tensor),
    io: &[Tensor],
    len: &SInt,
    shrink: &dyn Fn(&Tensor, &SInt) -> Tensor,
) -> Tensor {
    let (ck, cv) = cache;
    let at = Tensor::arange(0, MAX as i32, 1)
        .reshape(&[1, MAX as isize, 1])
        .eq(&io[3]);
    let k = io[1].reshape(&[HEADS as isize, 1, HD as isize]);
    let v = io[2].reshape(&[HEADS as isize, 1, HD as isize]);
    ck.assign(&at.where_(&k, ck));
    cv.assign(&at.where_(&v, cv));
    Tensor::try_realize_all(&[ck, cv]).expect("the cache update runs");
    let (keys, values) = (shrink(ck, len), shrink(cv, len));
    let q = io[0].reshape(&[HEADS as isize, 1, HD as isize]);
    let scores = q.matmul(&keys.transpose(1, 2)) * (1.0 / (HD as f64).sqrt());
    scores
        .softmax(-1)
        .matmul(&values)
        .reshape(&[1, (HEADS * HD) as isize])
}

fn inputs(pos: usize) -> Vec<Tensor> {
    vec![
        Tensor::from_slice(&row(pos, 1), &[HEADS * HD]),
        Tensor::from_slice(&row(pos, 2), &[HEADS * HD]),
        Tensor::from_slice(&row(pos, 3), &[HEADS * HD]),
        Tensor::from_slice(&[pos as i32], &[1, 1, 1]),
    ]
}

fn caches() -> (Tensor, Tensor) {
    let z = || {
        let t = Tensor::zeros(&[HEADS, MAX, HD], DType::FLOAT32).contiguous();
        t.realize();
        t
    };
    (z(), z())
}

/// Runs the loop for `steps` steps: per-step seconds, compiles per step, the last output.
fn run(steps: usize, symbolic: bool) -> (Vec<f64>, Vec<usize>, Vec<f32>) {
    let cache = caches();
    let var = Variable::new("len", 1, MAX);
    let sym = |c: &Tensor, len: &SInt| {
        c.shrink_sym(&[
            (0.into(), HEADS.into()),
            (0.into(), len.clone()),
            (0.into(), HD.into()),
        ])
    };
    let concrete =
        |c: &Tensor, len: &SInt| c.shrink(&[(0, HEADS), (0, len.bound_value()), (0, HD)]);
    let mut jit = Jit::with_vars(|io: &[Tensor], v: &[BoundVar]| {
        vec![step(&cache, io, &(&v[0]).into(), &sym)]
    });
    let (mut times, mut compiles, mut last) = (vec![], vec![], vec![]);
    for pos in 0..steps {
        let io = inputs(pos);
        let (t0, c0) = (Instant::now(), compile_count());
        let out = if symbolic {
            jit.call_vars(&io, &[var.bind(pos + 1)])
                .expect("the decode step replays")
                .remove(0)
        } else {
            step(&cache, &io, &(pos + 1).into(), &concrete)
        };
        last = out.to_vec::<f32>();
        times.push(t0.elapsed().as_secs_f64());
        compiles.push(compile_count() - c0);
    }
    (times, compiles, last)
}

pub(super) fn bench_decode_loop(o: &Opts) -> Row {
    let steps = if o.quick { 64 } else { MAX };
    let (t_sym, c_sym, out_sym) = run(steps, true);
    let (t_con, c_con, out_con) = run(steps, false);
    let window = |t: &[f64], at: usize| median(t[at.saturating_sub(16)..at].to_vec());
    let late = steps;
    let early = 32.min(steps);
    let after2: usize = c_sym[2..].iter().sum();
    let ok = max_rel_err(&out_sym, &out_con) < 1e-4;
    let note = format!(
        "{}kernels compiled after step 2: {after2} (concrete shapes: {} over the loop); ms/step \
         at length {early}: {:.2}, at {late}: {:.2} (concrete: {:.2}, {:.2})",
        if ok {
            String::new()
        } else {
            check(false, "differs from concrete shapes") + "; "
        },
        c_con.iter().sum::<usize>(),
        window(&t_sym, early) * 1e3,
        window(&t_sym, late) * 1e3,
        window(&t_con, early) * 1e3,
        window(&t_con, late) * 1e3,
    );
    Row {
        name: format!("decode loop, {steps} steps over a KV cache, Variable length + Jit"),
        secs: median(t_sym[2..].to_vec()),
        unit: Unit::Ms,
        refs: vec![Reference::timed(
            "concrete shapes (same run)",
            median(t_con[2..].to_vec()),
            Unit::Ms,
            ok,
        )],
        note,
    }
}

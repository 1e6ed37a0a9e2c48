//! Differential testing: random graphs of elementwise, movement, reduce and gather ops on random
//! shapes give the same values on `CPU` and `REF` and match a tiny eager evaluator written here.
//! The graphs read three buffers and reuse nodes (two indexings of one node, a node broadcast
//! inside a reduction), so the scheduler's realize rules and its gather collapse are exercised.
//! The same graphs through a `Jit` replay give the normal run's bits on new inputs.

use proptest::prelude::*;
use tinygrad_tensor::Tensor;

/// A tiny eager n-d array in f64: the independent reference.
#[derive(Clone, Debug)]
struct Arr {
    shape: Vec<usize>,
    data: Vec<f64>,
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

impl Arr {
    fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    fn at(&self, idx: &[usize]) -> f64 {
        let st = strides(&self.shape);
        self.data[idx.iter().zip(&st).map(|(a, b)| a * b).sum::<usize>()]
    }
    fn map_index(&self, shape: Vec<usize>, f: impl Fn(&[usize]) -> f64) -> Arr {
        let n: usize = shape.iter().product();
        Arr {
            data: (0..n).map(|i| f(&unravel(i, &shape))).collect(),
            shape,
        }
    }
    fn zip(&self, o: &Arr, f: impl Fn(f64, f64) -> f64) -> Arr {
        Arr {
            shape: self.shape.clone(),
            data: self
                .data
                .iter()
                .zip(&o.data)
                .map(|(a, b)| f(*a, *b))
                .collect(),
        }
    }
    fn unary(&self, f: impl Fn(f64) -> f64) -> Arr {
        Arr {
            shape: self.shape.clone(),
            data: self.data.iter().map(|a| f(*a)).collect(),
        }
    }
}

/// One random step applied to both the tensor and the reference.
fn step(t: &Tensor, a: &Arr, other: (&Tensor, &Arr), choice: u8, arg: u8) -> (Tensor, Arr) {
    let nd = a.shape.len();
    let ax = if nd == 0 { 0 } else { arg as usize % nd };
    match choice % 15 {
        0 if other.1.shape == a.shape => (t + other.0, a.zip(other.1, |x, y| x + y)),
        1 if other.1.shape == a.shape => (t * other.0, a.zip(other.1, |x, y| x * y)),
        2 if other.1.shape == a.shape => (t.maximum(other.0), a.zip(other.1, f64::max)),
        3 => (t.relu(), a.unary(|x| x.max(0.0))),
        4 => (t * 0.5 - 1.0, a.unary(|x| x * 0.5 - 1.0)),
        5 if nd >= 2 => {
            let mut order: Vec<isize> = (0..nd as isize).collect();
            order.rotate_left(1 + arg as usize % (nd - 1));
            let shape: Vec<usize> = order.iter().map(|&o| a.shape[o as usize]).collect();
            let r = a.map_index(shape, |idx| {
                let mut src = vec![0; nd];
                for (i, &o) in order.iter().enumerate() {
                    src[o as usize] = idx[i];
                }
                a.at(&src)
            });
            (t.permute(&order), r)
        }
        6 if nd >= 1 => {
            let r = a.map_index(a.shape.clone(), |idx| {
                let mut s = idx.to_vec();
                s[ax] = a.shape[ax] - 1 - s[ax];
                a.at(&s)
            });
            (t.flip(&[ax as isize]), r)
        }
        7 if nd >= 1 => {
            let (b, e) = (arg as usize % 2, (arg as usize / 2) % 3);
            let mut p = vec![(0, 0); nd];
            p[ax] = (b, e);
            let mut shape = a.shape.clone();
            shape[ax] += b + e;
            let r = a.map_index(shape, |idx| {
                let i = idx[ax] as isize - b as isize;
                if i < 0 || i >= a.shape[ax] as isize {
                    return 0.0;
                }
                let mut s = idx.to_vec();
                s[ax] = i as usize;
                a.at(&s)
            });
            (t.pad(&p, 0.0), r)
        }
        8 if nd >= 1 && a.shape[ax] >= 2 => {
            let s = arg as usize % 2;
            let e = a.shape[ax] - (arg as usize / 2) % 2;
            let mut b: Vec<(usize, usize)> = a.shape.iter().map(|&d| (0, d)).collect();
            b[ax] = (s, e.max(s));
            let mut shape = a.shape.clone();
            shape[ax] = e.max(s) - s;
            let r = a.map_index(shape, |idx| {
                let mut i = idx.to_vec();
                i[ax] += s;
                a.at(&i)
            });
            (t.shrink(&b), r)
        }
        9 if nd >= 1 => {
            let mut shape = a.shape.clone();
            shape[ax] = 1;
            let r = a.map_index(shape, |idx| {
                (0..a.shape[ax])
                    .map(|k| {
                        let mut i = idx.to_vec();
                        i[ax] = k;
                        a.at(&i)
                    })
                    .sum()
            });
            (t.sum_keepdim(ax as isize), r)
        }
        10 if nd >= 1 && a.shape[ax] >= 1 => {
            let mut shape = a.shape.clone();
            shape[ax] = 1;
            let r = a.map_index(shape, |idx| {
                (0..a.shape[ax])
                    .map(|k| {
                        let mut i = idx.to_vec();
                        i[ax] = k;
                        a.at(&i)
                    })
                    .fold(f64::NEG_INFINITY, f64::max)
            });
            (t.max_keepdim(ax as isize), r)
        }
        11 => {
            // reshape to the flattened size split differently
            let n = a.numel();
            let shape = if n.is_multiple_of(2) && n > 0 {
                vec![2, n / 2]
            } else {
                vec![n]
            };
            let is: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
            (
                t.reshape(&is),
                Arr {
                    shape,
                    data: a.data.clone(),
                },
            )
        }
        12 if nd >= 1 => {
            // the same node at two indexings in one kernel (realized when it is expensive)
            let r = a.map_index(a.shape.clone(), |idx| {
                let mut s = idx.to_vec();
                s[ax] = a.shape[ax] - 1 - s[ax];
                a.at(idx) + a.at(&s)
            });
            (t + t.flip(&[ax as isize]), r)
        }
        13 => {
            // broadcast inside a reduction: each element evaluated 3 times per output
            let mut big = vec![3isize];
            big.extend(a.shape.iter().map(|&d| d as isize));
            let r = a.unary(|x| 3.0 * x);
            (t.unsqueeze(0).expand(&big).sum(0isize), r)
        }
        14 if nd >= 1 => {
            // a gather along `ax`, some indices out of range (those select nothing: 0)
            let n = a.shape[ax];
            let index: Vec<i32> = (0..a.numel())
                .map(|i| ((i * 7 + arg as usize) % (n + 1)) as i32)
                .collect();
            let it = Tensor::from_slice_on(&index, &a.shape, t.device());
            let st = strides(&a.shape);
            let r = a.map_index(a.shape.clone(), |idx| {
                let flat: usize = idx.iter().zip(&st).map(|(i, s)| i * s).sum();
                let v = index[flat] as usize;
                if v >= n {
                    return 0.0;
                }
                let mut s = idx.to_vec();
                s[ax] = v;
                a.at(&s)
            });
            (t.gather(ax as isize, &it), r)
        }
        _ => (t.clone(), a.clone()),
    }
}

fn input(shape: &[usize], seed: u64, device: &str) -> (Tensor, Arr) {
    let n: usize = shape.iter().product();
    // small integers: every intermediate is exact in f32, so results must match exactly-ish
    let data: Vec<f32> = (0..n)
        .map(|i| ((seed.wrapping_mul(31).wrapping_add(i as u64 * 17)) % 9) as f32 - 4.0)
        .collect();
    let t = Tensor::from_slice_on(&data, shape, device);
    (
        t,
        Arr {
            shape: shape.to_vec(),
            data: data.iter().map(|&x| x as f64).collect(),
        },
    )
}

fn run(shape: &[usize], seed: u64, steps: &[(u8, u8)], device: &str) -> (Vec<f32>, Arr) {
    // three input buffers: a node computed from all of them is "expensive" to the realize rules
    let (t0, a0) = input(shape, seed, device);
    let (t1, a1) = input(shape, seed + 2, device);
    let (mut t, mut a) = (&t0 + &t1 * 0.5, a0.zip(&a1, |x, y| x + y * 0.5));
    let (o, oa) = input(shape, seed + 1, device);
    for &(c, arg) in steps {
        // the second operand only combines while shapes still match
        let (nt, na) = step(&t, &a, (&o, &oa), c, arg);
        t = nt;
        a = na;
    }
    assert_eq!(t.shape(), a.shape, "shape mismatch on {device}");
    (t.to_vec::<f32>(), a)
}

/// The device named by `DEV` when it is neither `CPU` nor `REF` (`DEV=CUDA` in
/// `scripts/gpu-check.sh`): the random graphs run there too. Panics if it is unavailable.
fn dev_under_test() -> Option<String> {
    let dev = tinygrad_tensor::default_device();
    if std::env::var("DEV").map_or(true, |d| d.is_empty()) || dev == "CPU" || dev == "REF" {
        return None;
    }
    if let Err(e) = tinygrad_tensor::get_device(&dev) {
        panic!("DEV={dev} asked for, but: {e}");
    }
    Some(dev)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn random_graphs_match_on_cpu_ref_and_eager(
        shape in prop::collection::vec(1usize..5, 1..4),
        seed in 0u64..1000,
        steps in prop::collection::vec((any::<u8>(), any::<u8>()), 1..9),
    ) {
        let (cpu, reference) = run(&shape, seed, &steps, "CPU");
        let (refdev, _) = run(&shape, seed, &steps, "REF");
        if let Some(dev) = dev_under_test() {
            let (got, _) = run(&shape, seed, &steps, &dev);
            prop_assert_eq!(got.len(), reference.data.len());
            for (i, (g, e)) in got.iter().zip(&reference.data).enumerate() {
                let tol = 1e-6 + 1e-3 * e.abs();
                prop_assert!((*g as f64 - e).abs() <= tol, "{}[{}] = {} expected {} (steps {:?})", dev, i, g, e, steps);
            }
        }
        prop_assert_eq!(cpu.len(), reference.data.len());
        for (i, ((c, r), e)) in cpu.iter().zip(&refdev).zip(&reference.data).enumerate() {
            let tol = 1e-6 + 1e-3 * e.abs();
            prop_assert!((*c as f64 - e).abs() <= tol, "CPU[{}] = {} expected {} (steps {:?})", i, c, e, steps);
            prop_assert!((*r as f64 - e).abs() <= tol, "REF[{}] = {} expected {} (steps {:?})", i, r, e, steps);
        }
    }
}

/// The graph of [`run`] on given inputs (`ts` and their eager values `arrs`: t0, t1, other).
fn build(ts: &[Tensor], arrs: &[Arr], steps: &[(u8, u8)]) -> Tensor {
    let (mut t, mut a) = (
        &ts[0] + &ts[1] * 0.5,
        arrs[0].zip(&arrs[1], |x, y| x + y * 0.5),
    );
    for &(c, arg) in steps {
        let (nt, na) = step(&t, &a, (&ts[2], &arrs[2]), c, arg);
        t = nt;
        a = na;
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// A `Jit` replaying a random graph on new inputs gives the normal run's bits. (Gathers
    /// upload their index tensor inside the function, which the JIT refuses: they become relu.)
    #[test]
    fn jit_replays_of_random_graphs_equal_normal_runs_bit_for_bit(
        shape in prop::collection::vec(1usize..5, 1..4),
        seed in 0u64..1000,
        steps in prop::collection::vec((any::<u8>(), any::<u8>()), 1..9),
    ) {
        let steps: Vec<(u8, u8)> = steps
            .iter()
            .map(|&(c, a)| (if c % 15 == 14 { 3 } else { c }, a))
            .collect();
        let inputs = |k: u64| {
            let (t0, a0) = input(&shape, seed + 10 * k, "CPU");
            let (t1, a1) = input(&shape, seed + 10 * k + 2, "CPU");
            let (o, ao) = input(&shape, seed + 10 * k + 1, "CPU");
            (vec![t0, t1, o], vec![a0, a1, ao])
        };
        let (_, proto) = inputs(0);
        let mut jit = tinygrad_tensor::Jit::new(|ts: &[Tensor]| vec![build(ts, &proto, &steps)]);
        for k in 0..5 {
            let (ts, arrs) = inputs(k);
            let got = jit.call(&ts).map_err(|e| TestCaseError::fail(format!("{e}")))?;
            let want = build(&ts, &arrs, &steps);
            let bits = |t: &Tensor| t.to_vec::<f32>().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&got[0]), bits(&want), "call {} (steps {:?})", k, &steps);
        }
        prop_assert_eq!(jit.replays(), 3);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// The same random graphs on inputs whose first dim is cut to a bound `Variable`
    /// (`shrink_sym`) give the values of the graphs on the same inputs cut to a number: symbolic
    /// sizes carried through every op of the generator. (A graph that would split the symbolic
    /// dim with a reshape is refused with a panic: such cases are skipped.)
    #[test]
    fn random_graphs_on_symbolic_sizes_match_concrete_ones(
        shape in prop::collection::vec(2usize..5, 1..4),
        seed in 0u64..1000,
        cut in 0usize..8,
        steps in prop::collection::vec((any::<u8>(), any::<u8>()), 1..7),
    ) {
        let keep = 1 + cut % shape[0];
        let var = tinygrad_tensor::Variable::new("n", 1, shape[0]);
        let mut cut_shape = shape.clone();
        cut_shape[0] = keep;
        let cut_arr = |a: Arr| Arr {
            data: a.data[..keep * a.shape[1..].iter().product::<usize>()].to_vec(),
            shape: cut_shape.clone(),
        };
        let make = |symbolic: bool| {
            let (mut ts, mut arrs) = (vec![], vec![]);
            for salt in [0u64, 2, 1] {
                let (t, a) = input(&shape, seed + salt, "CPU");
                let t = if symbolic {
                    let mut b: Vec<(tinygrad_tensor::SInt, tinygrad_tensor::SInt)> =
                        shape.iter().map(|&d| (0.into(), d.into())).collect();
                    b[0] = (0.into(), var.bind(keep).into());
                    t.shrink_sym(&b)
                } else {
                    let b: Vec<(usize, usize)> =
                        cut_shape.iter().map(|&d| (0, d)).collect();
                    t.shrink(&b)
                };
                ts.push(t);
                arrs.push(cut_arr(a));
            }
            build(&ts, &arrs, &steps).to_vec::<f32>()
        };
        let want = make(false);
        let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| make(true)));
        let got = match got {
            Ok(g) => g,
            Err(e) => {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_default();
                // only the documented refusals are skips; any other panic fails the case:
                // - a reshape that would split the symbolic dim;
                // - a kernel whose index is negative for part of the variable's declared range:
                //   the generator's shrinks take concrete bounds from the bound value, so
                //   `shrink(1, 3)` of a dim `n` in [1, 3] leaves `n - 2` elements, negative
                //   below n = 3, and the launcher (which checks extents over the whole range)
                //   refuses instead of reading out of bounds
                prop_assert!(
                    msg.contains("cannot be split") || msg.contains("may be negative"),
                    "panicked: {}",
                    msg
                );
                prop_assume!(false, "a refused graph on the symbolic dim");
                return Ok(());
            }
        };
        prop_assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let tol = 1e-6 + 1e-5 * w.abs();
            prop_assert!((g - w).abs() <= tol, "[{}] = {} expected {} (steps {:?})", i, g, w, &steps);
        }
    }
}

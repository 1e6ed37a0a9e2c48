//! Accuracy and structure tests for `tinygrad_codegen::decomp`.
//!
//! A small evaluator runs a UOp graph for one input value with exact C semantics per dtype:
//! float32 ops round to float32 at every step (no FMA, no wider intermediates), unsigned integers
//! wrap, and anything that is undefined or implementation-defined behaviour in C (signed overflow, out-of-range shifts, float ->
//! int casts out of range, division by zero, shifts of negative values, `Max` of a NaN) panics. The decompositions are
//! evaluated over sweeps, random values, powers of two, denormals and special values, and compared
//! with Rust's std (libm) functions: float32 results against the float64 function (fractional
//! ulps of float32), float64 results against the float64 function (ulps of float64, so libm's own
//! error is included).

use std::collections::HashMap;

use tinygrad_codegen::decomp::{decomp_rules, xexp2, xlog2, xsin};
use tinygrad_codegen::late::{fma_rules, late_rules};
use tinygrad_dtype::{ConstValue, DType};
use tinygrad_uop::{Arg, Ops, UOp, graph_rewrite};

// ---------------------------------------------------------------------------------------------
// evaluator

/// Values are held as raw bits: float32 bits, float64 bits, the exact value as float64 bits for
/// float16/bfloat16, integers masked to their width, bools as 0/1.
struct Prog {
    nodes: Vec<Node>,
}

struct Node {
    op: Ops,
    dt: DType,
    src: Vec<usize>,
    /// The kinds of the sources.
    skinds: Vec<Kind>,
    cbits: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    F32,
    F64,
    Half,
    SInt(u32),
    UInt(u32),
    Bool,
}

fn kind(dt: DType) -> Kind {
    let s = dt.scalar();
    if s == DType::FLOAT32 {
        Kind::F32
    } else if s == DType::FLOAT64 {
        Kind::F64
    } else if s == DType::FLOAT16 || s == DType::BFLOAT16 {
        Kind::Half
    } else if s.is_bool() {
        Kind::Bool
    } else if s.is_unsigned() {
        Kind::UInt(s.bitsize())
    } else if s.is_int() {
        Kind::SInt(s.bitsize())
    } else {
        panic!("evaluator: unsupported dtype {dt}")
    }
}

fn mask(w: u32) -> u64 {
    if w == 64 { u64::MAX } else { (1u64 << w) - 1 }
}

fn sext(v: u64, w: u32) -> i64 {
    let s = 64 - w;
    ((v << s) as i64) >> s
}

/// The value as f64 (floats exactly; used for casts and compares).
fn as_f64(k: Kind, b: u64) -> f64 {
    match k {
        Kind::F32 => f32::from_bits(b as u32) as f64,
        Kind::F64 | Kind::Half => f64::from_bits(b),
        Kind::SInt(w) => sext(b, w) as f64,
        Kind::UInt(_) | Kind::Bool => b as f64,
    }
}

impl Prog {
    fn new(root: &UOp, input: &UOp) -> Prog {
        let order = root.toposort();
        let idx: HashMap<UOp, usize> = order
            .iter()
            .enumerate()
            .map(|(i, u)| (u.clone(), i))
            .collect();
        let nodes = order
            .iter()
            .map(|u| {
                let cbits = if u.op() == Ops::Const {
                    let c = u.arg().as_const().expect("const arg");
                    match kind(u.dtype()) {
                        Kind::F32 => (c.as_f64() as f32).to_bits() as u64,
                        Kind::F64 | Kind::Half => c.as_f64().to_bits(),
                        Kind::SInt(w) | Kind::UInt(w) => c.as_u64() & mask(w),
                        Kind::Bool => c.as_bool() as u64,
                    }
                } else {
                    0
                };
                let op = if u == input { Ops::DefineVar } else { u.op() };
                assert!(
                    op != Ops::DefineVar || u == input,
                    "evaluator: unexpected variable {u:?}"
                );
                Node {
                    op,
                    dt: u.dtype(),
                    src: u.src().iter().map(|s| idx[s]).collect(),
                    skinds: u.src().iter().map(|s| kind(s.dtype())).collect(),
                    cbits,
                }
            })
            .collect();
        Prog { nodes }
    }

    fn run(&self, x: u64, vals: &mut Vec<u64>) -> u64 {
        vals.clear();
        for n in &self.nodes {
            let v = eval_node(n, x, vals);
            vals.push(v);
        }
        *vals.last().expect("empty program")
    }
}

fn eval_node(n: &Node, x: u64, vals: &[u64]) -> u64 {
    let k = kind(n.dt);
    let sk = |i: usize| (n.skinds[i], vals[n.src[i]]);
    match n.op {
        Ops::DefineVar => x,
        Ops::Const => n.cbits,
        Ops::Where => {
            if vals[n.src[0]] != 0 {
                vals[n.src[1]]
            } else {
                vals[n.src[2]]
            }
        }
        Ops::CmpLt | Ops::CmpNe | Ops::CmpEq => {
            let (ka, a) = sk(0);
            let (_, b) = sk(1);
            let r = match ka {
                Kind::F32 | Kind::F64 | Kind::Half => {
                    let (a, b) = (as_f64(ka, a), as_f64(ka, b));
                    match n.op {
                        Ops::CmpLt => a < b,
                        Ops::CmpNe => a != b,
                        _ => a == b,
                    }
                }
                Kind::SInt(w) => {
                    let (a, b) = (sext(a, w), sext(b, w));
                    match n.op {
                        Ops::CmpLt => a < b,
                        Ops::CmpNe => a != b,
                        _ => a == b,
                    }
                }
                Kind::UInt(_) | Kind::Bool => match n.op {
                    Ops::CmpLt => a < b,
                    Ops::CmpNe => a != b,
                    _ => a == b,
                },
            };
            r as u64
        }
        Ops::Cast => {
            let (ka, a) = sk(0);
            cast(ka, a, n.dt)
        }
        Ops::Bitcast => {
            let (ka, a) = sk(0);
            assert_eq!(
                bitwidth(ka),
                bitwidth(k),
                "bitcast between different widths"
            );
            assert!(ka != Kind::Half && k != Kind::Half, "bitcast of half");
            a
        }
        op if op.is_alu() => {
            let args: Vec<u64> = n.src.iter().map(|&s| vals[s]).collect();
            match k {
                Kind::F32 => {
                    let f = |i: usize| f32::from_bits(args[i] as u32);
                    f32_op(op, &f).to_bits() as u64
                }
                Kind::F64 => {
                    let f = |i: usize| f64::from_bits(args[i]);
                    f64_op(op, &f).to_bits()
                }
                Kind::SInt(w) => sint_op(op, sext(args[0], w), args.get(1).map(|&b| sext(b, w)), w),
                Kind::UInt(w) => uint_op(op, args[0], args.get(1).copied(), w),
                Kind::Half | Kind::Bool => panic!("evaluator: {op} on {}", n.dt),
            }
        }
        op => panic!("evaluator: unsupported op {op}"),
    }
}

fn bitwidth(k: Kind) -> u32 {
    match k {
        Kind::F32 => 32,
        Kind::F64 => 64,
        Kind::Half => 16,
        Kind::SInt(w) | Kind::UInt(w) => w,
        Kind::Bool => 1,
    }
}

fn cast(from: Kind, a: u64, to_dt: DType) -> u64 {
    let is_float = matches!(from, Kind::F32 | Kind::F64 | Kind::Half);
    match kind(to_dt) {
        Kind::Bool => {
            (if is_float {
                as_f64(from, a) != 0.0
            } else {
                a != 0
            }) as u64
        }
        Kind::F32 => match from {
            Kind::SInt(w) => (sext(a, w) as f32).to_bits() as u64,
            Kind::UInt(_) | Kind::Bool => (a as f32).to_bits() as u64,
            _ => (as_f64(from, a) as f32).to_bits() as u64,
        },
        Kind::F64 => match from {
            Kind::SInt(w) => (sext(a, w) as f64).to_bits(),
            Kind::UInt(_) | Kind::Bool => (a as f64).to_bits(),
            _ => as_f64(from, a).to_bits(),
        },
        Kind::Half => {
            assert!(is_float, "evaluator: int -> half cast not supported");
            // One rounding from an f32/f64 value (tinygrad's cast semantics).
            ConstValue::Float(as_f64(from, a))
                .cast(to_dt)
                .as_f64()
                .to_bits()
        }
        Kind::SInt(w) => {
            if is_float {
                let t = as_f64(from, a).trunc();
                let lim = 2f64.powi(w as i32 - 1);
                assert!(t >= -lim && t < lim, "UB: float {t} cast to int{w}");
                (t as i64 as u64) & mask(w)
            } else {
                let v = if let Kind::SInt(fw) = from {
                    sext(a, fw) as u64
                } else {
                    a
                };
                v & mask(w)
            }
        }
        Kind::UInt(w) => {
            if is_float {
                let t = as_f64(from, a).trunc();
                assert!(
                    t >= 0.0 && t < 2f64.powi(w as i32),
                    "UB: float {t} cast to uint{w}"
                );
                (t as u64) & mask(w)
            } else {
                let v = if let Kind::SInt(fw) = from {
                    sext(a, fw) as u64
                } else {
                    a
                };
                v & mask(w)
            }
        }
    }
}

fn f32_op(op: Ops, f: &dyn Fn(usize) -> f32) -> f32 {
    match op {
        Ops::Add => f(0) + f(1),
        Ops::Sub => f(0) - f(1),
        Ops::Mul => f(0) * f(1),
        Ops::FDiv => f(0) / f(1),
        Ops::Max => {
            assert!(!f(0).is_nan() && !f(1).is_nan(), "Max of NaN");
            if f(0) > f(1) { f(0) } else { f(1) }
        }
        Ops::Trunc => f(0).trunc(),
        Ops::Round => f(0).round_ties_even(),
        Ops::Sqrt => f(0).sqrt(),
        Ops::Neg => -f(0),
        Ops::Recip => 1.0 / f(0),
        Ops::MulAcc => f(0).mul_add(f(1), f(2)),
        op => panic!("evaluator: float32 {op} not supported (not allowed in decompositions)"),
    }
}

fn f64_op(op: Ops, f: &dyn Fn(usize) -> f64) -> f64 {
    match op {
        Ops::Add => f(0) + f(1),
        Ops::Sub => f(0) - f(1),
        Ops::Mul => f(0) * f(1),
        Ops::FDiv => f(0) / f(1),
        Ops::Max => {
            assert!(!f(0).is_nan() && !f(1).is_nan(), "Max of NaN");
            if f(0) > f(1) { f(0) } else { f(1) }
        }
        Ops::Trunc => f(0).trunc(),
        Ops::Round => f(0).round_ties_even(),
        Ops::Sqrt => f(0).sqrt(),
        Ops::Neg => -f(0),
        Ops::Recip => 1.0 / f(0),
        Ops::MulAcc => f(0).mul_add(f(1), f(2)),
        op => panic!("evaluator: float64 {op} not supported (not allowed in decompositions)"),
    }
}

fn sint_op(op: Ops, a: i64, b: Option<i64>, w: u32) -> u64 {
    let lo = -(1i128 << (w - 1));
    let hi = (1i128 << (w - 1)) - 1;
    let checked = |r: i128| {
        assert!(r >= lo && r <= hi, "UB: int{w} overflow in {op}: {r}");
        (r as i64 as u64) & mask(w)
    };
    let b = || b.expect("binary op");
    match op {
        Ops::Add => checked(a as i128 + b() as i128),
        Ops::Sub => checked(a as i128 - b() as i128),
        Ops::Mul => checked(a as i128 * b() as i128),
        Ops::IDiv | Ops::Mod => {
            assert!(b() != 0, "UB: division by zero");
            let r = if op == Ops::IDiv {
                a as i128 / b() as i128
            } else {
                a as i128 % b() as i128
            };
            checked(r)
        }
        Ops::Max => (a.max(b()) as u64) & mask(w),
        Ops::Shl => {
            assert!(
                b() >= 0 && (b() as u32) < w && a >= 0,
                "UB: int{w} {a} << {}",
                b()
            );
            checked((a as i128) << b())
        }
        Ops::Shr => {
            assert!(
                b() >= 0 && (b() as u32) < w && a >= 0,
                "UB/impl-defined: int{w} {a} >> {}",
                b()
            );
            ((a >> b()) as u64) & mask(w)
        }
        Ops::And => ((a & b()) as u64) & mask(w),
        Ops::Or => ((a | b()) as u64) & mask(w),
        Ops::Xor => ((a ^ b()) as u64) & mask(w),
        op => panic!("evaluator: int {op} not supported"),
    }
}

fn uint_op(op: Ops, a: u64, b: Option<u64>, w: u32) -> u64 {
    let b = || b.expect("binary op");
    let m = mask(w);
    match op {
        Ops::Add => a.wrapping_add(b()) & m,
        Ops::Sub => a.wrapping_sub(b()) & m,
        Ops::Mul => a.wrapping_mul(b()) & m,
        Ops::IDiv => {
            assert!(b() != 0, "UB: division by zero");
            a / b()
        }
        Ops::Mod => {
            assert!(b() != 0, "UB: division by zero");
            a % b()
        }
        Ops::Max => a.max(b()),
        Ops::Shl => {
            assert!(b() < w as u64, "UB: uint{w} << {}", b());
            (a << b()) & m
        }
        Ops::Shr => {
            assert!(b() < w as u64, "UB: uint{w} >> {}", b());
            a >> b()
        }
        Ops::And => a & b(),
        Ops::Or => a | b(),
        Ops::Xor => (a ^ b()) & m,
        op => panic!("evaluator: uint {op} not supported"),
    }
}

// ---------------------------------------------------------------------------------------------
// harness

fn input(dt: DType) -> UOp {
    UOp::new(Ops::DefineVar, dt, vec![], Arg::Var("x".into(), 0, 0))
}

type Decomp = fn(&UOp) -> UOp;

/// A float64 reference function.
type Reference = fn(f64) -> f64;

/// A compiled decomposition for one dtype.
struct Fun {
    prog: Prog,
    vals: Vec<u64>,
}

impl Fun {
    fn new(f: Decomp, dt: DType) -> Fun {
        let x = input(dt);
        Fun {
            prog: Prog::new(&f(&x), &x),
            vals: Vec::new(),
        }
    }

    /// The graph as a target with FMA runs it: the codegen's late rewrites (`Sub`, `Neg`), then
    /// `a*b + c` contracted into `MulAcc` (evaluated with one rounding).
    fn contracted(f: Decomp, dt: DType) -> Fun {
        let x = input(dt);
        let g = graph_rewrite(&f(&x), late_rules(), &mut (), false);
        let g = graph_rewrite(&g, fma_rules(), &mut (), false);
        assert!(
            g.toposort().iter().any(|u| u.op() == Ops::MulAcc),
            "contraction found nothing to fuse"
        );
        Fun {
            prog: Prog::new(&g, &x),
            vals: Vec::new(),
        }
    }

    /// The plain graph and the contracted one, named.
    fn both(f: Decomp, dt: DType) -> [(&'static str, Fun); 2] {
        [("", Fun::new(f, dt)), (" (fma)", Fun::contracted(f, dt))]
    }

    fn f32(&mut self, x: f32) -> f32 {
        f32::from_bits(self.prog.run(x.to_bits() as u64, &mut self.vals) as u32)
    }

    fn f64(&mut self, x: f64) -> f64 {
        f64::from_bits(self.prog.run(x.to_bits(), &mut self.vals))
    }

    /// For float16/bfloat16 graphs: the input and output as exact f64 values.
    fn half(&mut self, x: f64) -> f64 {
        f64::from_bits(self.prog.run(x.to_bits(), &mut self.vals))
    }
}

/// xorshift64*: deterministic random bits.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// A float format for ulp measurement: explicit mantissa bits and minimum normal exponent.
#[derive(Clone, Copy)]
struct Format {
    mbits: i32,
    emin: i32,
    max: f64,
}

const F16: Format = Format {
    mbits: 10,
    emin: -14,
    max: 65504.0,
};
const BF16: Format = Format {
    mbits: 7,
    emin: -126,
    max: 3.3895313892515355e38,
};
const F32: Format = Format {
    mbits: 23,
    emin: -126,
    max: f32::MAX as f64,
};
const F64: Format = Format {
    mbits: 52,
    emin: -1022,
    max: f64::MAX,
};

/// `|got - want|` in ulps of `want` in format `fm` (`want` may carry more precision than `fm`).
/// Overflowed or special references must be matched exactly.
fn ulps(got: f64, want: f64, fm: Format) -> f64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    // Round the reference's magnitude to the format's range: beyond max + ulp/2 it is inf.
    let ulp_max = pow2(((fm.max.to_bits() >> 52) & 0x7ff) as i32 - 1023 - fm.mbits);
    let want = if want.abs() >= fm.max + ulp_max / 2.0 {
        want.signum() * f64::INFINITY
    } else {
        want
    };
    if want.is_infinite() || got.is_infinite() {
        return if want == got { 0.0 } else { f64::INFINITY };
    }
    let e = if want == 0.0 {
        fm.emin
    } else {
        ((((want.to_bits() >> 52) & 0x7ff) as i32) - 1023).max(fm.emin)
    };
    (got - want).abs() / pow2(e - fm.mbits)
}

/// Worst error seen, with its input, for the assertion message.
struct Worst {
    name: String,
    err: f64,
    at: f64,
    got: f64,
    want: f64,
    n: usize,
}

impl Worst {
    fn new(name: &str) -> Worst {
        Worst {
            name: name.into(),
            err: -1.0,
            at: 0.0,
            got: 0.0,
            want: 0.0,
            n: 0,
        }
    }

    fn add(&mut self, x: f64, got: f64, want: f64, fm: Format) {
        let e = ulps(got, want, fm);
        self.n += 1;
        if e > self.err || e.is_nan() {
            *self = Worst {
                name: std::mem::take(&mut self.name),
                err: e,
                at: x,
                got,
                want,
                n: self.n,
            };
        }
    }

    fn check(&self, limit: f64) {
        let msg = format!(
            "{}: max error {:.3} ulp over {} inputs, at x = {:e} ({:#x}): got {:e}, want {:e}",
            self.name,
            self.err,
            self.n,
            self.at,
            self.at.to_bits(),
            self.got,
            self.want
        );
        eprintln!("{msg}");
        assert!(self.err <= limit, "{msg} (limit {limit} ulp)");
    }
}

/// `2^k` exactly (also for denormal and out-of-range `k`, where `powi` is not exact).
fn pow2(k: i32) -> f64 {
    if k < -1074 {
        0.0
    } else if k < -1022 {
        f64::from_bits(1u64 << (k + 1074))
    } else if k > 1023 {
        f64::INFINITY
    } else {
        f64::from_bits(((k + 1023) as u64) << 52)
    }
}

fn next_f32(x: f32, d: i32) -> f32 {
    f32::from_bits((x.to_bits() as i64 + d as i64) as u32)
}

fn next_f64(x: f64, d: i64) -> f64 {
    f64::from_bits((x.to_bits() as i64 + d) as u64)
}

/// Runs a float32 decomposition over `xs`, measuring against the float64 reference `exact`
/// and against the float32 std function `std32`.
fn measure_f32(
    name: &str,
    f: Decomp,
    xs: &[f32],
    exact: fn(f64) -> f64,
    std32: fn(f32) -> f32,
    limit: f64,
) {
    for (form, mut fun) in Fun::both(f, DType::FLOAT32) {
        let mut w_exact = Worst::new(&format!("{name}{form} float32 vs f64 libm"));
        let mut w_std = Worst::new(&format!("{name}{form} float32 vs f32 libm"));
        for &x in xs {
            let got = fun.f32(x) as f64;
            w_exact.add(x as f64, got, exact(x as f64), F32);
            w_std.add(x as f64, got, std32(x) as f64, F32);
        }
        w_exact.check(limit);
        // libm's float32 functions are themselves up to ~0.5 ulp off (or more).
        w_std.check(limit + 1.0);
    }
}

fn measure_f64(name: &str, f: Decomp, xs: &[f64], std64: fn(f64) -> f64, limit: f64) {
    for (form, mut fun) in Fun::both(f, DType::FLOAT64) {
        let mut w = Worst::new(&format!("{name}{form} float64 vs f64 libm"));
        for &x in xs {
            w.add(x, fun.f64(x), std64(x), F64);
        }
        w.check(limit);
    }
}

fn random_f32_bits(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| f32::from_bits(rng.next() as u32)).collect()
}

fn random_f64_bits(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| f64::from_bits(rng.next())).collect()
}

fn specials_f32() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::from_bits(0x007f_ffff),
        f32::EPSILON,
        1.0,
        -1.0,
    ];
    for e in -149..=127 {
        let p = pow2(e) as f32;
        v.extend([p, -p, next_f32(p, 1), next_f32(p, -1)]);
    }
    v
}

fn specials_f64() -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        f64::from_bits(1),
        f64::from_bits(0x8000_0000_0000_0001),
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::EPSILON,
        1.0,
        -1.0,
    ];
    for e in -1074..=1023 {
        let p = pow2(e);
        v.extend([p, -p, next_f64(p, 1), next_f64(p, -1)]);
    }
    v
}

// ---------------------------------------------------------------------------------------------
// exp2

#[test]
fn exp2_float32() {
    let mut rng = Rng(0x5eed_0001);
    let mut xs = specials_f32();
    xs.extend((0..=320 * 256).map(|i| -160.0 + i as f32 / 256.0));
    xs.extend((0..100_000).map(|_| rng.uniform(-151.0, 129.0) as f32));
    xs.extend((0..20_000).map(|_| rng.uniform(-1.0, 1.0) as f32));
    xs.extend(random_f32_bits(&mut rng, 50_000));
    for k in -200..=200 {
        for h in [0.0f32, 0.5, -0.5] {
            let v = k as f32 + h;
            xs.extend([v, next_f32(v, 1), next_f32(v, -1)]);
        }
    }
    measure_f32("exp2", xexp2, &xs, f64::exp2, f32::exp2, 1.0);
}

#[test]
fn exp2_float64() {
    let mut rng = Rng(0x5eed_0002);
    let mut xs = specials_f64();
    xs.extend((0..=2200 * 16).map(|i| -1100.0 + i as f64 / 16.0));
    xs.extend((0..100_000).map(|_| rng.uniform(-1076.0, 1025.0)));
    xs.extend((0..20_000).map(|_| rng.uniform(-1.0, 1.0)));
    xs.extend(random_f64_bits(&mut rng, 30_000));
    for k in -1100..=1100 {
        for h in [0.0f64, 0.5, -0.5] {
            let v = k as f64 + h;
            xs.extend([v, next_f64(v, 1), next_f64(v, -1)]);
        }
    }
    measure_f64("exp2", xexp2, &xs, f64::exp2, 2.0);
}

// ---------------------------------------------------------------------------------------------
// log2

#[test]
fn log2_float32() {
    let mut rng = Rng(0x5eed_0003);
    let mut xs = specials_f32();
    // Every exponent, denormals included (positive bit patterns), and some negatives.
    xs.extend(random_f32_bits(&mut rng, 150_000).into_iter().map(f32::abs));
    xs.extend(random_f32_bits(&mut rng, 5_000));
    for d in -20_000..=20_000 {
        xs.push(next_f32(1.0, d));
    }
    xs.extend((0..50_000).map(|_| rng.uniform(0.5, 2.0) as f32));
    let sqrt_half = std::f32::consts::FRAC_1_SQRT_2;
    for d in -50..=50 {
        xs.extend([next_f32(sqrt_half, d), next_f32(sqrt_half * 2.0, d)]);
    }
    measure_f32("log2", xlog2, &xs, f64::log2, f32::log2, 1.0);
}

#[test]
fn log2_float64() {
    let mut rng = Rng(0x5eed_0004);
    let mut xs = specials_f64();
    xs.extend(random_f64_bits(&mut rng, 100_000).into_iter().map(f64::abs));
    xs.extend(random_f64_bits(&mut rng, 5_000));
    for d in -20_000..=20_000 {
        xs.push(next_f64(1.0, d));
    }
    xs.extend((0..50_000).map(|_| rng.uniform(0.5, 2.0)));
    let sqrt_half = std::f64::consts::FRAC_1_SQRT_2;
    for d in -50..=50 {
        xs.extend([next_f64(sqrt_half, d), next_f64(sqrt_half * 2.0, d)]);
    }
    measure_f64("log2", xlog2, &xs, f64::log2, 2.0);
}

// ---------------------------------------------------------------------------------------------
// sin

#[test]
fn sin_float32() {
    let mut rng = Rng(0x5eed_0005);
    let mut xs = specials_f32();
    xs.extend((0..=40_000).map(|i| -20.0 + i as f32 / 1000.0));
    xs.extend((0..40_000).map(|_| rng.uniform(-1e5, 1e5) as f32));
    xs.extend(random_f32_bits(&mut rng, 60_000));
    // Near multiples of pi/2, where the reduction cancels most.
    for k in (1..200_000i64)
        .step_by(7)
        .chain((0..2_000).map(|_| (rng.next() >> 40) as i64))
    {
        let v = (k as f64 * std::f64::consts::FRAC_PI_2) as f32;
        xs.extend([v, next_f32(v, 1), next_f32(v, -1), -v]);
    }
    // The float32 closest to a multiple of pi/2 (Muller, Elementary Functions).
    xs.push(16367173.0 * 2f32.powi(72));
    xs.extend([1e30, -1e30, 1e20, 3.0e38, 1e10, 123456.79]);
    measure_f32("sin", xsin, &xs, f64::sin, f32::sin, 1.0);
}

#[test]
fn sin_float64() {
    let mut rng = Rng(0x5eed_0006);
    let mut xs = specials_f64();
    xs.extend((0..=40_000).map(|i| -20.0 + i as f64 / 1000.0));
    xs.extend((0..30_000).map(|_| rng.uniform(-1e6, 1e6)));
    xs.extend(random_f64_bits(&mut rng, 60_000));
    for k in (1..200_000i64)
        .step_by(7)
        .chain((0..2_000).map(|_| (rng.next() >> 20) as i64))
    {
        let v = k as f64 * std::f64::consts::FRAC_PI_2;
        xs.extend([v, next_f64(v, 1), next_f64(v, -1), -v]);
    }
    // The float64 closest to a multiple of pi/2 (Muller, Elementary Functions).
    xs.push(6381956970095103.0 * 2f64.powi(797));
    xs.extend([1e300, -1e300, 1e22, 1e100, 1e15]);
    measure_f64("sin", xsin, &xs, f64::sin, 2.0);
}

// ---------------------------------------------------------------------------------------------
// float16 / bfloat16: every value, against the f64 function rounded once (so 0.5 ulp is exact
// rounding; the f32 computation and the final cast add at most a little more)

fn exhaustive_half(dt: DType, fm: Format, from_bits: fn(u16) -> f64) {
    let funs: [(&str, Decomp, Reference); 3] = [
        ("exp2", xexp2, f64::exp2),
        ("log2", xlog2, f64::log2),
        ("sin", xsin, f64::sin),
    ];
    for (name, f, reference) in funs {
        let mut fun = Fun::new(f, dt);
        let mut w = Worst::new(&format!("{name} {dt}"));
        for b in 0..=u16::MAX {
            let x = from_bits(b);
            w.add(x, fun.half(x), reference(x), fm);
        }
        // Correctly rounded but for rare double roundings (float32, then the half type).
        w.check(0.51);
    }
}

#[test]
fn float16_and_bfloat16_exhaustive() {
    let f16 = |b: u16| {
        let sign = if b & 0x8000 != 0 { -1.0 } else { 1.0 };
        let e = ((b >> 10) & 0x1f) as i32;
        let m = (b & 0x3ff) as f64;
        sign * match e {
            0 => m * pow2(-24),
            31 if m == 0.0 => f64::INFINITY,
            31 => f64::NAN,
            _ => (1.0 + m / 1024.0) * pow2(e - 15),
        }
    };
    let bf16 = |b: u16| f32::from_bits((b as u32) << 16) as f64;
    exhaustive_half(DType::FLOAT16, F16, f16);
    exhaustive_half(DType::BFLOAT16, BF16, bf16);
}

// ---------------------------------------------------------------------------------------------
// special values, exactly

#[test]
fn special_values() {
    for (dt, is64) in [(DType::FLOAT32, false), (DType::FLOAT64, true)] {
        let mut e = Fun::new(xexp2, dt);
        let mut l = Fun::new(xlog2, dt);
        let mut s = Fun::new(xsin, dt);
        let ev = |f: &mut Fun, x: f64| {
            if is64 {
                f.f64(x)
            } else {
                f.f32(x as f32) as f64
            }
        };
        let bits = |v: f64| v.to_bits();
        assert_eq!(ev(&mut e, f64::NEG_INFINITY), 0.0, "{dt} exp2(-inf)");
        assert_eq!(ev(&mut e, f64::INFINITY), f64::INFINITY, "{dt} exp2(inf)");
        assert!(ev(&mut e, f64::NAN).is_nan(), "{dt} exp2(nan)");
        assert_eq!(ev(&mut e, 2000.0), f64::INFINITY, "{dt} exp2 overflow");
        assert_eq!(ev(&mut e, -2000.0), 0.0, "{dt} exp2 underflow");
        assert_eq!(bits(ev(&mut e, 0.0)), bits(1.0), "{dt} exp2(0)");
        assert_eq!(bits(ev(&mut e, -0.0)), bits(1.0), "{dt} exp2(-0)");
        let (lo, hi) = if is64 { (-1074, 1023) } else { (-149, 127) };
        for k in lo..=hi {
            assert_eq!(ev(&mut e, k as f64), pow2(k), "{dt} exp2({k})");
            assert_eq!(ev(&mut l, pow2(k)), k as f64, "{dt} log2(2^{k})");
        }
        assert_eq!(ev(&mut l, 0.0), f64::NEG_INFINITY, "{dt} log2(0)");
        assert_eq!(ev(&mut l, -0.0), f64::NEG_INFINITY, "{dt} log2(-0)");
        assert!(ev(&mut l, -1.0).is_nan(), "{dt} log2(-1)");
        assert!(ev(&mut l, -1e-40).is_nan(), "{dt} log2(-denormal)");
        assert!(ev(&mut l, f64::NEG_INFINITY).is_nan(), "{dt} log2(-inf)");
        assert_eq!(ev(&mut l, f64::INFINITY), f64::INFINITY, "{dt} log2(inf)");
        assert!(ev(&mut l, f64::NAN).is_nan(), "{dt} log2(nan)");
        assert_eq!(bits(ev(&mut l, 1.0)), bits(0.0), "{dt} log2(1) = +0");
        assert!(ev(&mut s, f64::INFINITY).is_nan(), "{dt} sin(inf)");
        assert!(ev(&mut s, f64::NEG_INFINITY).is_nan(), "{dt} sin(-inf)");
        assert!(ev(&mut s, f64::NAN).is_nan(), "{dt} sin(nan)");
        assert_eq!(bits(ev(&mut s, -0.0)), bits(-0.0), "{dt} sin(-0)");
        assert_eq!(bits(ev(&mut s, 0.0)), bits(0.0), "{dt} sin(0)");
        let tiny = if is64 {
            f64::from_bits(1)
        } else {
            f32::from_bits(1) as f64
        };
        assert_eq!(ev(&mut s, tiny), tiny, "{dt} sin(denormal)");
        assert_eq!(ev(&mut s, -tiny), -tiny, "{dt} sin(-denormal)");
    }
}

// ---------------------------------------------------------------------------------------------
// structure

const ALLOWED: [Ops; 19] = [
    Ops::Add,
    Ops::Mul,
    Ops::FDiv,
    Ops::Where,
    Ops::CmpLt,
    Ops::CmpNe,
    Ops::CmpEq,
    Ops::Cast,
    Ops::Bitcast,
    Ops::Shl,
    Ops::Shr,
    Ops::And,
    Ops::Or,
    Ops::Xor,
    Ops::Round,
    Ops::Max,
    Ops::IDiv,
    Ops::Mod,
    Ops::Const,
];

#[test]
fn only_simple_ops() {
    let dts = [
        DType::FLOAT16,
        DType::BFLOAT16,
        DType::FLOAT32,
        DType::FLOAT64,
    ];
    let funs: [(&str, Decomp); 3] = [("exp2", xexp2), ("log2", xlog2), ("sin", xsin)];
    for dt in dts {
        for (name, f) in funs {
            let x = input(dt);
            let g = f(&x);
            assert_eq!(g.dtype(), dt, "{name} {dt}: result dtype");
            let nodes = g.toposort();
            for n in &nodes {
                assert!(
                    n == &x || ALLOWED.contains(&n.op()),
                    "{name} {dt}: op {} in the decomposition",
                    n.op()
                );
                if matches!(n.op(), Ops::IDiv | Ops::Mod) {
                    assert!(
                        n.dtype().is_int(),
                        "{name} {dt}: {} on {}",
                        n.op(),
                        n.dtype()
                    );
                }
                if n.op() == Ops::Bitcast {
                    assert_eq!(
                        n.dtype().bitsize(),
                        n.s(0).dtype().bitsize(),
                        "{name} {dt}: bitcast width"
                    );
                }
            }
            if dt == DType::FLOAT32 || dt == DType::FLOAT16 || dt == DType::BFLOAT16 {
                assert!(
                    nodes.iter().all(|n| n.dtype().bitsize() <= 32),
                    "{name} {dt}: a 64-bit value in a float32 computation"
                );
            }
            eprintln!("{name} {dt}: {} nodes", nodes.len());
        }
    }
}

#[test]
fn rewrite_with_decomp_rules() {
    for dt in [DType::FLOAT32, DType::FLOAT64] {
        let x = input(dt);
        let e = UOp::new(Ops::Exp2, dt, vec![x.clone()], Arg::None);
        let l = UOp::new(Ops::Log2, dt, vec![&e + 1.0], Arg::None);
        let s = UOp::new(Ops::Sin, dt, vec![&l * 3.0], Arg::None);
        let root = &s + &l;
        let out = graph_rewrite(&root, decomp_rules(), &mut (), false);
        let nodes = out.toposort();
        for n in &nodes {
            assert!(
                !matches!(n.op(), Ops::Exp2 | Ops::Log2 | Ops::Sin | Ops::Pow),
                "{dt}: {} left after the rewrite",
                n.op()
            );
        }
        let prog = Prog::new(&out, &x);
        let mut vals = Vec::new();
        for i in 0..=400 {
            let xv = -20.0 + i as f64 / 10.0;
            let want = {
                let l = (xv.exp2() + 1.0).log2();
                (3.0 * l).sin() + l
            };
            let got = if dt == DType::FLOAT64 {
                f64::from_bits(prog.run(xv.to_bits(), &mut vals))
            } else {
                f32::from_bits(prog.run((xv as f32).to_bits() as u64, &mut vals) as u32) as f64
            };
            // A composition: compare with a loose relative tolerance.
            let tol = if dt == DType::FLOAT64 { 1e-13 } else { 1e-5 };
            assert!(
                (got - want).abs() <= tol * want.abs().max(1.0),
                "{dt} x={xv}: got {got}, want {want}"
            );
        }
    }
    // Each op of each float dtype becomes exactly the decomposition.
    let funs: [(Ops, Decomp); 3] = [(Ops::Exp2, xexp2), (Ops::Log2, xlog2), (Ops::Sin, xsin)];
    for dt in [
        DType::FLOAT16,
        DType::BFLOAT16,
        DType::FLOAT32,
        DType::FLOAT64,
    ] {
        let x = input(dt);
        for (op, f) in funs {
            let u = UOp::new(op, dt, vec![x.clone()], Arg::None);
            assert_eq!(
                graph_rewrite(&u, decomp_rules(), &mut (), false),
                f(&x),
                "{op} {dt}"
            );
        }
    }
    // Nothing else is rewritten.
    let i = input(DType::INT32);
    let ig = &i + 1i64;
    assert_eq!(graph_rewrite(&ig, decomp_rules(), &mut (), false), ig);
}

#[test]
fn vector_inputs_build() {
    let x = input(DType::FLOAT32.vec(4));
    for f in [xexp2 as Decomp, xlog2, xsin] {
        let g = f(&x);
        assert_eq!(g.dtype(), DType::FLOAT32.vec(4));
        for n in g.toposort() {
            assert_eq!(
                n.dtype().count(),
                4,
                "a scalar node in a vector decomposition: {n:?}"
            );
        }
    }
}

/// The symbolic simplifier runs over these graphs in the pipeline: it must not change a single
/// result (no float reassociation, no unsound integer folding).
#[test]
fn unchanged_by_symbolic() {
    let mut rng = Rng(0x5eed_0007);
    let funs: [(&str, Decomp); 3] = [("exp2", xexp2), ("log2", xlog2), ("sin", xsin)];
    for dt in [DType::FLOAT32, DType::FLOAT64] {
        for (name, f) in funs {
            let x = input(dt);
            let g = f(&x);
            let simplified = graph_rewrite(&g, tinygrad_uop::sym(), &mut (), false);
            let (before, after) = (Prog::new(&g, &x), Prog::new(&simplified, &x));
            eprintln!(
                "{name} {dt}: {} nodes, {} after sym",
                g.toposort().len(),
                simplified.toposort().len()
            );
            let (mut v1, mut v2) = (Vec::new(), Vec::new());
            for i in 0..30_000 {
                let bits = if dt == DType::FLOAT32 {
                    let v = if i % 2 == 0 {
                        rng.uniform(-200.0, 200.0) as f32
                    } else {
                        f32::from_bits(rng.next() as u32)
                    };
                    v.to_bits() as u64
                } else if i % 2 == 0 {
                    rng.uniform(-1100.0, 1100.0).to_bits()
                } else {
                    rng.next()
                };
                let (a, b) = (before.run(bits, &mut v1), after.run(bits, &mut v2));
                assert!(
                    a == b || is_nan_bits(a, dt) && is_nan_bits(b, dt),
                    "{name} {dt}: input {bits:#x} gives {a:#x}, {b:#x} after sym"
                );
            }
        }
    }
}

fn is_nan_bits(b: u64, dt: DType) -> bool {
    if dt == DType::FLOAT32 {
        f32::from_bits(b as u32).is_nan()
    } else {
        f64::from_bits(b).is_nan()
    }
}

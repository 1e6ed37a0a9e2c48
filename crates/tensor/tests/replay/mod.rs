//! The harness of the replays of tinygrad's own test files (`replay_<file>.rs`): each test
//! method of the tinygrad file is a Rust case of the same name (`Class.test_name`) written
//! against our API, or an exclusion with its reason in the data. `tests/golden/replay/<stem>.json`
//! (written by `tests/golden/replay/gen_<stem>.py` from tinygrad's source at the pinned commit)
//! lists every method of the file, the excluded ones with their reasons, and the expected
//! values the generator computed with torch/numpy.
//!
//! [`replay`] fails when a method is neither replayed nor excluded (or both), or when a replayed
//! case fails; it prints per file and device: methods / excluded / replayed / passed.
#![allow(dead_code)] // each replay binary uses a part of it

use std::cell::Cell;
use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use serde_json::Value;
use tinygrad_tensor::jit::JitFn;
use tinygrad_tensor::{BoundVar, DType, Idx, Jit, SInt, Tensor, Variable};

#[path = "../common/mod.rs"]
mod common;

/// Runs a suite on `WEBGPU`, or skips it saying why (see `common::on_webgpu`).
#[allow(unused_imports)] // not every replay runs on WEBGPU
pub use common::on_webgpu;

/// What a case sees: the device it runs on and the values its generator stored.
pub struct Ctx<'a> {
    /// The device the suite runs on (also the default device while the case runs).
    pub device: &'a str,
    name: &'a str,
    values: &'a Value,
}

impl Ctx<'_> {
    /// The stored value `key` of this case.
    pub fn value(&self, key: &str) -> &Value {
        let v = &self.values[key];
        assert!(
            !v.is_null(),
            "{}: no stored value {key:?} (regenerate the data)",
            self.name
        );
        v
    }

    /// A stored array (`{"shape": [...], "data": [...]}`) as its shape and values.
    pub fn array(&self, key: &str) -> (Vec<usize>, Vec<f64>) {
        stored_array(self.value(key))
    }

    /// A stored array as a float32 tensor on the case's device.
    pub fn tensor(&self, key: &str) -> Tensor {
        let (shape, data) = self.array(key);
        let data: Vec<f32> = data.iter().map(|&x| x as f32).collect();
        Tensor::from_slice_on(&data, &shape, self.device)
    }

    /// Asserts `got` equals the stored array `key` within numpy's `assert_allclose(atol, rtol)`.
    pub fn assert_close(&self, got: &Tensor, key: &str, atol: f64, rtol: f64) {
        let (shape, want) = self.array(key);
        assert_eq!(got.shape(), shape.as_slice(), "{key}: shape");
        assert_allclose(&values_f64(got), &want, atol, rtol, key);
    }
}

/// A stored array (`{"shape": [...], "data": [...]}`) as its shape and values.
pub fn stored_array(v: &Value) -> (Vec<usize>, Vec<f64>) {
    let shape = v["shape"]
        .as_array()
        .unwrap_or_else(|| panic!("a stored array has no shape: {v}"))
        .iter()
        .map(|d| d.as_u64().expect("a dimension") as usize)
        .collect();
    (shape, stored_floats(&v["data"]))
}

/// A stored list of numbers (see [`number`]).
pub fn stored_floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a stored list of numbers, got {v}"))
        .iter()
        .map(number)
        .collect()
}

/// A stored array as a float32 tensor on `device` (not realized).
pub fn stored_tensor(v: &Value, device: &str) -> Tensor {
    let (shape, data) = stored_array(v);
    let data: Vec<f32> = data.iter().map(|&x| x as f32).collect();
    Tensor::from_slice_on(&data, &shape, device)
}

/// `t`, realized (tinygrad's `t.realize()`, which returns the tensor).
pub fn realized(t: Tensor) -> Tensor {
    t.realize();
    t
}

/// tinygrad's `f"{Device.DEFAULT}:{n}"` on the suite's device: `CPU:1`, `REF:2`.
pub fn dev(ctx: &Ctx, n: usize) -> String {
    format!("{}:{n}", ctx.device)
}

/// tinygrad's `(d_a, d_b, ...)` for the indices `ns` (see [`dev`]).
pub fn devs(ctx: &Ctx, ns: &[usize]) -> Vec<String> {
    ns.iter().map(|&n| dev(ctx, n)).collect()
}

/// The device names as the `&str`s `shard` takes.
pub fn refs(devices: &[String]) -> Vec<&str> {
    devices.iter().map(String::as_str).collect()
}

/// The name of a tuple of devices, as `to` takes it: `(CPU:1, CPU:2)`.
pub fn tuple(devices: &[String]) -> String {
    format!("({})", devices.join(", "))
}

/// Sets environment variables while `f` runs (tinygrad's `Context(RING=..)`), then restores
/// them, also when `f` panics.
///
/// # Panics
/// Outside a case of [`replay`] (only there is it known that no other thread runs).
pub fn with_env<R>(vars: &[(&str, &str)], f: impl FnOnce() -> R) -> R {
    assert!(
        IN_SUITE.with(Cell::get),
        "with_env: only inside a replayed case (replay holds SUITES)"
    );
    let old: Vec<(String, Option<String>)> = vars
        .iter()
        .map(|(k, _)| (k.to_string(), std::env::var(k).ok()))
        .collect();
    for (k, v) in vars {
        // SAFETY: every test of a replay binary runs its cases through `replay`, which holds
        // `SUITES` while they run, and the assert above checks this call is inside one: no
        // other test thread of the process runs (or reads the environment) meanwhile.
        unsafe { std::env::set_var(k, v) };
    }
    let r = catch_unwind(AssertUnwindSafe(f));
    for (k, v) in old {
        // SAFETY: as above.
        unsafe {
            match v {
                Some(v) => std::env::set_var(&k, v),
                None => std::env::remove_var(&k),
            }
        }
    }
    r.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// numpy's `assert_allclose(got, want, atol, rtol)` with `want` a stored array (its shape too).
pub fn assert_close_to(got: &Tensor, want: &Value, atol: f64, rtol: f64, what: &str) {
    let (shape, want) = stored_array(want);
    assert_eq!(got.shape(), shape, "{what}: shape");
    assert_allclose(&values_f64(got), &want, atol, rtol, what);
}

/// `np.testing.assert_allclose(got.numpy(), want.numpy(), atol, rtol)` of two tensors (their
/// shapes too).
pub fn close(got: &Tensor, want: &Tensor, atol: f64, rtol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_allclose(&values_f64(got), &values_f64(want), atol, rtol, what);
}

/// A jitted call that must succeed.
pub fn call<F: JitFn>(jit: &mut Jit<F>, inputs: &[Tensor], what: &str) -> Vec<Tensor> {
    jit.call(inputs)
        .unwrap_or_else(|e| panic!("{what}: the jitted call failed: {e}"))
}

/// The single output of a jitted call.
pub fn only(mut v: Vec<Tensor>) -> Tensor {
    assert_eq!(v.len(), 1, "one output");
    v.remove(0)
}

/// tinygrad's `Variable(name, 1, 10).bind(v)`, the symbolic tests' variable.
pub fn bind(name: &str, v: usize) -> BoundVar {
    Variable::new(name, 1, 10).bind(v)
}

/// tinygrad's `:` in an index.
pub fn all() -> Idx {
    Idx::all()
}

/// tinygrad's `:stop` in an index.
pub fn to(stop: usize) -> Idx {
    Idx::slice(None, Some(stop as isize), 1)
}

/// tinygrad's `:v` with a symbolic stop.
pub fn sym_to(v: impl Into<SInt>) -> Idx {
    Idx::SymSlice {
        start: 0.into(),
        stop: v.into(),
    }
}

/// One suite at a time per test binary: the random generator's seed and counters and the
/// environment are process-wide (as tinygrad's), so the CPU and REF suites would otherwise
/// interleave their draws (a `manual_seed` then a `randperm` could see the other's numbers).
static SUITES: Mutex<()> = Mutex::new(());

thread_local! {
    /// Whether this thread is running a suite's cases (holding [`SUITES`]).
    static IN_SUITE: Cell<bool> = const { Cell::new(false) };
}

/// A JSON number, or one of the strings `nan`, `inf`, `-inf`.
pub fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("a number"),
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        Value::Bool(b) => f64::from(u8::from(*b)),
        _ => panic!("expected a number, got {v}"),
    }
}

/// A tensor's values as float64, whatever its dtype.
pub fn values_f64(t: &Tensor) -> Vec<f64> {
    t.cast(DType::FLOAT64).to_vec::<f64>()
}

/// numpy's `assert_allclose`: `|got - want| <= atol + rtol * |want|` element-wise, NaN equal to
/// NaN, infinities equal to themselves.
pub fn assert_allclose(got: &[f64], want: &[f64], atol: f64, rtol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of elements");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= atol + rtol * w.abs()
        };
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {w} (atol {atol}, rtol {rtol})"
        );
    }
}

thread_local! {
    /// The [`assert_panics`] checks that passed on this thread (counted per suite run).
    static REJECTIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Asserts that `f` panics with a message containing every one of `needles` (the op the user
/// called, what was wrong): the replay of tinygrad's `assertRaises`.
pub fn assert_panics(what: &str, needles: &[&str], f: impl FnOnce()) {
    let msg = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => panic!("{what}: expected a panic, none came"),
        Err(p) => common::panic_message(&*p),
    };
    for n in needles {
        assert!(
            msg.contains(n),
            "{what}: the panic should name {n:?}, it says: {msg}"
        );
    }
    REJECTIONS.with(|r| r.set(r.get() + 1));
}

/// A replayed case: the tinygrad method's name and its body on our API.
pub type Case = (&'static str, fn(&Ctx));

/// Replays `cases` for `tests/golden/replay/<stem>.json` on `device`: checks every method of the
/// tinygrad file is replayed or excluded (not both), runs each replayed case with `device` as
/// the default device, prints the counts and fails listing every failed case.
pub fn replay(stem: &str, device: &str, cases: &[Case]) {
    let path = format!(
        "{}/../../tests/golden/replay/{stem}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"));
    let source = doc["source"].as_str().expect("source");
    let methods: Vec<&str> = doc["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .map(|m| m.as_str().expect("a method name"))
        .collect();
    let excluded = doc["excluded"].as_object().expect("excluded");
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let unique: HashSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "{stem}: a case is listed twice");
    let known: HashSet<&str> = methods.iter().copied().collect();
    let mut problems = Vec::new();
    for n in &names {
        if !known.contains(n) {
            problems.push(format!("{n}: not a method of {source}"));
        }
        if excluded.contains_key(*n) {
            problems.push(format!("{n}: replayed and excluded"));
        }
    }
    for m in &methods {
        if !unique.contains(m) && !excluded.contains_key(*m) {
            problems.push(format!("{m}: neither replayed nor excluded"));
        }
    }
    for (m, why) in excluded {
        if why.as_str().is_none_or(str::is_empty) {
            problems.push(format!("{m}: excluded without a reason"));
        }
    }
    assert!(problems.is_empty(), "{stem}:\n  {}", problems.join("\n  "));

    let _one = SUITES.lock().unwrap_or_else(|e| e.into_inner());
    struct InSuite;
    impl Drop for InSuite {
        fn drop(&mut self) {
            IN_SUITE.with(|s| s.set(false));
        }
    }
    IN_SUITE.with(|s| s.set(true));
    let _in_suite = InSuite;
    let only = std::env::var("REPLAY_FILTER").unwrap_or_default();
    common::install_quiet_hook();
    let empty = Value::Null;
    let mut failures = Vec::new();
    let mut ran = 0;
    REJECTIONS.with(|r| r.set(0));
    for &(name, run) in cases {
        if !only.is_empty() && !only.split(',').any(|f| name.contains(f)) {
            continue;
        }
        ran += 1;
        let ctx = Ctx {
            device,
            name,
            values: doc["values"].get(name).unwrap_or(&empty),
        };
        common::set_in_case(true);
        let r = catch_unwind(AssertUnwindSafe(|| {
            tinygrad_tensor::with_default_device(device, || run(&ctx))
        }));
        common::set_in_case(false);
        if let Err(p) = r {
            let msg: String = common::panic_message(&*p).chars().take(600).collect();
            failures.push(format!("{name}: {msg}"));
        }
    }
    let replayable = methods.len() - excluded.len();
    eprintln!(
        "{source} on {device}: {} methods, {} excluded (reasons in tests/golden/replay/{stem}.json), {replayable} replayed, {} passed ({} misuses checked to panic naming the op){}",
        methods.len(),
        excluded.len(),
        ran - failures.len(),
        REJECTIONS.with(|r| r.get()),
        if ran < replayable {
            format!(" (REPLAY_FILTER ran {ran})")
        } else {
            String::new()
        }
    );
    assert!(
        failures.is_empty(),
        "{source} on {device}: {} cases failed:\n  {}",
        failures.len(),
        failures.join("\n  ")
    );
}

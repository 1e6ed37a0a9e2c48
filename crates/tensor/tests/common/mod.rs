//! What the golden-case suites share: loading a case file of `tests/golden/`, keeping panics
//! inside a case quiet (a failing case is reported in the suite's summary instead), reading
//! convolution/pool arguments, and running a suite on `WEBGPU` or saying why not; and for the
//! suites that read the crate's sources, listing them.
//!
//! Each test binary compiles this module on its own and uses a part of it.
#![allow(dead_code)]

use std::cell::Cell;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Once;

use serde_json::Value;
use tinygrad_tensor::{Dims, Padding};

thread_local! {
    static IN_CASE: Cell<bool> = const { Cell::new(false) };
}

/// Installs (once) a panic hook that stays silent inside a case (see [`set_in_case`]).
pub fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_CASE.with(Cell::get) {
                default(info);
            }
        }));
    });
}

/// Marks the start (`true`) or end (`false`) of a case whose panics stay quiet.
pub fn set_in_case(on: bool) {
    IN_CASE.with(|c| c.set(on));
}

/// The message of a caught panic.
pub fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// The cases of `tests/golden/<file>` (a JSON array).
pub fn load_cases(file: &str) -> Vec<Value> {
    let path = format!("{}/../../tests/golden/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    match serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}")) {
        Value::Array(cases) => cases,
        _ => panic!("{path}: expected a JSON array of cases"),
    }
}

/// An integer argument.
pub fn int(v: &Value) -> i64 {
    v.as_i64()
        .unwrap_or_else(|| panic!("expected an integer, got {v}"))
}

/// A list of non-negative integers.
pub fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap_or_else(|| panic!("expected a list, got {v}"))
        .iter()
        .map(|x| int(x) as usize)
        .collect()
}

/// A kernel/stride/dilation argument: `null` (the default), one integer, or one per dim.
pub fn dims(v: &Value) -> Dims {
    match v {
        Value::Null => Dims::Default,
        Value::Array(_) => Dims::Each(usizes(v)),
        _ => Dims::All(int(v) as usize),
    }
}

/// A padding argument in any of tinygrad's forms.
pub fn padding(v: &Value) -> Padding {
    match v {
        Value::Array(a) => Padding::Flat(a.iter().map(|x| int(x) as isize).collect()),
        _ => Padding::All(int(v) as isize),
    }
}

/// Runs `suite` on the device named by `DEV` (`DEV=CUDA` in `scripts/gpu-check.sh`) unless it
/// is one of `already_run` (the suite's own device tests); skipped, saying so, when `DEV` is
/// unset; fails when the named device is missing.
pub fn on_dev_device(test: &str, already_run: &[&str], suite: impl FnOnce(&str)) {
    let dev = tinygrad_tensor::default_device();
    if std::env::var("DEV").map_or(true, |d| d.is_empty()) || already_run.contains(&dev.as_str()) {
        eprintln!("{test}: SKIPPED: DEV names no device besides {already_run:?}");
        return;
    }
    if let Err(e) = tinygrad_tensor::get_device(&dev) {
        panic!("{test}: DEV={dev} asked for, but: {e}");
    }
    suite(&dev);
}

/// Runs `suite` on `WEBGPU` (in CI the software Vulkan driver). Without an adapter it is
/// skipped, saying why — unless `TINYGRAD_REQUIRE_WEBGPU=1` (CI), which makes a missing adapter
/// fail.
pub fn on_webgpu(test: &str, suite: impl FnOnce(&str)) {
    match tinygrad_tensor::get_device("WEBGPU") {
        Ok(_) => suite("WEBGPU"),
        Err(e) => {
            assert!(
                std::env::var("TINYGRAD_REQUIRE_WEBGPU").map_or(true, |v| v.is_empty() || v == "0"),
                "TINYGRAD_REQUIRE_WEBGPU is set, but: {e}"
            );
            eprintln!("{test}: SKIPPED: {e}");
        }
    }
}

/// Whether a case's panic is a multi-device op refusing the axis its input is sharded on, as
/// tinygrad refuses it (a pad or flip of that axis, a shrink across shards, a reshape moving
/// elements between shards) — not an op missing its multi-device form.
#[allow(dead_code)] // not every test crate runs multi-device suites
pub fn refused_on_sharded_axis(panic: &str) -> bool {
    panic.contains("of a multi-device tensor:") && !panic.contains("has no multi-device form")
}

/// Runs a suite with [`refused_on_sharded_axis`] as its refusal rule and asserts it refused
/// exactly `expected` cases (unless `filter_var` narrows the suite): an op that starts or stops
/// refusing the sharded axis changes the count.
#[allow(dead_code)] // not every test crate runs multi-device suites
pub fn expect_refusals(
    what: &str,
    expected: usize,
    filter_var: &str,
    run: impl FnOnce(&dyn Fn(&str) -> bool),
) {
    let n = std::cell::Cell::new(0usize);
    let rule = |e: &str| {
        let r = refused_on_sharded_axis(e);
        n.set(n.get() + usize::from(r));
        r
    };
    run(&rule);
    if std::env::var(filter_var).map_or(true, |f| f.is_empty()) {
        assert_eq!(
            n.get(),
            expected,
            "{what}: cases refused on the sharded axis"
        );
    }
}

/// Runs `check` on each case (named by its `"name"`), a panic inside one counting as its
/// failure (quietly, see [`set_in_case`]); then fails listing every failed case, or prints
/// `{device}: {n} {what} cases passed`.
pub fn run_cases(
    device: &str,
    what: &str,
    cases: &[&Value],
    check: impl Fn(&Value) -> Result<(), String>,
) {
    install_quiet_hook();
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("case name");
        set_in_case(true);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(case)));
        set_in_case(false);
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(format!("{name}: {e}")),
            Err(p) => failures.push(format!("{name}: panicked: {}", panic_message(&*p))),
        }
    }
    assert!(
        failures.is_empty(),
        "{device}: {} of {} {what} cases failed:\n  {}",
        failures.len(),
        cases.len(),
        failures.join("\n  ")
    );
    eprintln!("{device}: {} {what} cases passed", cases.len());
}

/// Appends every `.rs` file under `dir` (recursively) to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

//! BEAM search (tinygrad's `BEAM=n`, opt-in): instead of the hand-coded heuristic, a kernel's
//! opts are found by timing candidates on the kernel's own buffers.
//!
//! The search starts from no opts and the heuristic's, and repeatedly extends every opts in the
//! beam by one move ([`tinygrad_codegen::beam_candidates`]: one more split, or another loop
//! order), keeping the `n` fastest; it stops when a round finds nothing faster, after
//! [`MAX_ROUNDS`] rounds, or when the kernel's time budget (`BEAM_TIMEOUT` seconds, default 10)
//! is spent. Each candidate is compiled, run once to warm up, then timed several times (the
//! minimum counts: this machine is noisy). Running a kernel on its real buffers is safe because
//! a kernel's output never aliases its inputs, and the real launch rewrites the output after.
//!
//! Winners are cached on disk, one file per (device, kernel AST) under `BEAM_CACHE_DIR`
//! (default `$XDG_CACHE_HOME/tinygrad-rs/beam` or `~/.cache/tinygrad-rs/beam`): the file
//! holds a format version, the device, the opts and the AST's text, which a lookup compares,
//! so a hash collision or a stale entry is a miss. A corrupt or stale entry is ignored with a
//! warning and replaced. Entries are written to a temporary file and renamed into place, so
//! processes sharing the directory only ever read whole entries.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tinygrad_codegen::opt::KernelOpts;
use tinygrad_codegen::{beam_candidates, to_program_with, to_program_with_opts};
use tinygrad_uop::UOp;

use crate::Buffer;
use crate::device::{Device, debug_level};

/// Rounds of extension at most.
pub const MAX_ROUNDS: usize = 4;

const FORMAT: &str = "tinygrad-rs beam 1";

static WIDTH_OVERRIDE: Mutex<Option<usize>> = Mutex::new(None);
static DIR_OVERRIDE: Mutex<Option<PathBuf>> = Mutex::new(None);
static SEARCHES: AtomicUsize = AtomicUsize::new(0);
static DISK_HITS: AtomicUsize = AtomicUsize::new(0);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The beam width: [`set_beam`]'s value if set, else the `BEAM` environment variable, else 0
/// (off).
pub fn beam_width() -> usize {
    if let Some(n) = *lock(&WIDTH_OVERRIDE) {
        return n;
    }
    std::env::var("BEAM")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Sets the beam width for this process (`Some(0)` turns BEAM off), overriding `BEAM`; `None`
/// goes back to the environment.
pub fn set_beam(width: Option<usize>) {
    *lock(&WIDTH_OVERRIDE) = width;
}

/// Sets the cache directory for this process, overriding `BEAM_CACHE_DIR`; `None` goes back to
/// the environment and the default.
pub fn set_beam_cache_dir(dir: Option<PathBuf>) {
    *lock(&DIR_OVERRIDE) = dir;
}

/// How many searches ran, and how many kernels came from the disk cache instead, in this
/// process (for tests and `DEBUG`).
pub fn beam_stats() -> (usize, usize) {
    (
        SEARCHES.load(Ordering::Relaxed),
        DISK_HITS.load(Ordering::Relaxed),
    )
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = lock(&DIR_OVERRIDE).clone() {
        return Some(d);
    }
    if let Some(d) = std::env::var_os("BEAM_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("tinygrad-rs").join("beam"))
}

/// FNV-1a, 64 bits: a stable file name for a (device, AST) pair.
fn fnv64(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The path of the entry for `ast_text` on `device` in `dir`.
pub fn entry_path(dir: &Path, device: &str, ast_text: &str) -> PathBuf {
    dir.join(format!(
        "{:016x}.beam",
        fnv64(&format!("{device}\n{ast_text}"))
    ))
}

/// An entry's contents.
fn entry_text(device: &str, ast_text: &str, opts: &KernelOpts) -> String {
    format!("{FORMAT}\ndevice {device}\nopts {opts}\nast\n{ast_text}\n")
}

/// Parses an entry: the opts if it is well-formed and for this device and AST, else why not.
fn parse_entry(text: &str, device: &str, ast_text: &str) -> Result<KernelOpts, String> {
    let mut lines = text.splitn(5, '\n');
    let mut next = |what: &str| lines.next().ok_or(format!("truncated before the {what}"));
    let format = next("format line")?;
    if format != FORMAT {
        return Err(format!("format {format:?}, expected {FORMAT:?}"));
    }
    let dev = next("device")?;
    if dev != format!("device {device}") {
        return Err(format!("{dev:?} is not for device {device}"));
    }
    let opts_line = next("opts")?;
    let opts = opts_line
        .strip_prefix("opts ")
        .ok_or(format!("bad opts line {opts_line:?}"))
        .and_then(KernelOpts::parse)?;
    if next("ast")? != "ast" {
        return Err("no ast line".into());
    }
    let stored = next("ast text")?;
    if stored.strip_suffix('\n') != Some(ast_text) {
        return Err("stale: written for another kernel (hash collision or changed AST)".into());
    }
    Ok(opts)
}

/// The cached opts for `ast_text` on `device` in `dir`, if a valid entry exists. A corrupt or
/// stale entry is reported on stderr and ignored (the caller's search replaces it).
pub fn load(dir: &Path, device: &str, ast_text: &str) -> Option<KernelOpts> {
    let path = entry_path(dir, device, ast_text);
    let bytes = std::fs::read(&path).ok()?;
    let parsed = String::from_utf8(bytes)
        .map_err(|_| "not UTF-8".to_string())
        .and_then(|t| parse_entry(&t, device, ast_text));
    match parsed {
        Ok(opts) => Some(opts),
        Err(why) => {
            eprintln!(
                "warning: BEAM cache: ignoring {} ({why}); searching again",
                path.display()
            );
            None
        }
    }
}

/// Writes the entry for `ast_text` on `device` into `dir` (created if needed): to a temporary
/// file first, renamed into place, so concurrent readers and writers never see a partial
/// entry. Failures are reported on stderr, not fatal: the cache is an optimization.
pub fn store(dir: &Path, device: &str, ast_text: &str, opts: &KernelOpts) {
    let path = entry_path(dir, device, ast_text);
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, entry_text(device, ast_text, opts)))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("warning: BEAM cache: cannot write {}: {e}", path.display());
    }
}

/// The kernel's best opts: from the disk cache, else by searching with `width` and caching the
/// winner. `bufs` are the kernel's buffers (inputs already computed).
pub(crate) fn best_opts(
    dev: &dyn Device,
    ast: &UOp,
    bufs: &[Arc<Buffer>],
    width: usize,
) -> KernelOpts {
    let ast_text = ast.pretty();
    let dir = cache_dir();
    if let Some(dir) = &dir
        && let Some(opts) = load(dir, dev.name(), &ast_text)
    {
        // an entry whose opts no longer apply is stale too
        if to_program_with_opts(ast, dev.caps(), &opts).opts == opts {
            DISK_HITS.fetch_add(1, Ordering::Relaxed);
            return opts;
        }
        eprintln!(
            "warning: BEAM cache: opts {opts} no longer apply to their kernel; searching again"
        );
    }
    let opts = search(dev, ast, bufs, width);
    if let Some(dir) = &dir {
        store(dir, dev.name(), &ast_text, &opts);
    }
    opts
}

/// The best time (seconds) of the kernel built with `opts`, or `None` if they don't apply or
/// it does not compile.
fn time_opts(dev: &dyn Device, ast: &UOp, bufs: &[Arc<Buffer>], opts: &KernelOpts) -> Option<f64> {
    let prog = to_program_with_opts(ast, dev.caps(), opts);
    if prog.opts != *opts {
        return None;
    }
    let kernel = dev.compile(&prog).ok()?;
    kernel.launch(bufs, &[]); // warm up: caches, page faults
    let mut best = f64::INFINITY;
    let start = Instant::now();
    for run in 0..10 {
        let t0 = Instant::now();
        let dt = kernel
            .launch_timed(bufs, &[])
            .unwrap_or_else(|| t0.elapsed().as_secs_f64());
        best = best.min(dt);
        // at least 3 runs; more while they are cheap
        if run >= 2 && start.elapsed() > Duration::from_millis(50) {
            break;
        }
    }
    Some(best)
}

/// BEAM search (see the module docs).
fn search(dev: &dyn Device, ast: &UOp, bufs: &[Arc<Buffer>], width: usize) -> KernelOpts {
    SEARCHES.fetch_add(1, Ordering::Relaxed);
    let budget = std::env::var("BEAM_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .unwrap_or(10.0);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(budget);
    let caps = dev.caps();
    let heuristic = to_program_with(ast, caps, true).opts;
    let mut seen: Vec<KernelOpts> = Vec::new();
    let mut beam: Vec<(f64, KernelOpts)> = Vec::new();
    for o in [KernelOpts::default(), heuristic] {
        if !seen.contains(&o) {
            seen.push(o.clone());
            if let Some(t) = time_opts(dev, ast, bufs, &o) {
                beam.push((t, o));
            }
        }
    }
    let mut tried = beam.len();
    let by_time = |a: &(f64, KernelOpts), b: &(f64, KernelOpts)| a.0.total_cmp(&b.0);
    beam.sort_by(by_time);
    for _ in 0..MAX_ROUNDS {
        let best_before = beam.first().map(|b| b.0);
        let mut next = beam.clone();
        'round: for (_, from) in &beam {
            for cand in beam_candidates(ast, caps, from) {
                if Instant::now() > deadline {
                    break 'round;
                }
                if seen.contains(&cand) {
                    continue;
                }
                seen.push(cand.clone());
                tried += 1;
                if let Some(t) = time_opts(dev, ast, bufs, &cand) {
                    next.push((t, cand));
                }
            }
        }
        next.sort_by(by_time);
        next.truncate(width.max(1));
        beam = next;
        if beam.first().map(|b| b.0) == best_before || Instant::now() > deadline {
            break;
        }
    }
    let (t, best) = beam
        .into_iter()
        .next()
        .unwrap_or((f64::NAN, KernelOpts::default()));
    if debug_level() >= 2 {
        eprintln!(
            "BEAM {width}: {best} at {:.2}us after {tried} candidates in {:.2}s",
            t * 1e6,
            start.elapsed().as_secs_f64()
        );
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_reject_corruption() {
        let opts = KernelOpts::parse("s1:4x2:v s0:4 o1,0").expect("parse");
        let text = entry_text("CPU", "AST\nline 2", &opts);
        assert_eq!(parse_entry(&text, "CPU", "AST\nline 2"), Ok(opts.clone()));
        assert!(parse_entry(&text, "CPU", "another AST").is_err(), "stale");
        assert!(
            parse_entry(&text, "REF", "AST\nline 2").is_err(),
            "other device"
        );
        assert!(
            parse_entry(&text[..20], "CPU", "AST\nline 2").is_err(),
            "truncated"
        );
        assert!(parse_entry("garbage", "CPU", "AST\nline 2").is_err());
        let bad = text.replace("s1:4x2:v", "s1:4xx2");
        assert!(parse_entry(&bad, "CPU", "AST\nline 2").is_err());
    }
}

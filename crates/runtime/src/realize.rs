//! Running a schedule: each kernel AST is lowered, compiled (once per device and structure —
//! the kernel cache) and launched on its buffers. `DEBUG=2` prints one line per kernel with its
//! time, `DEBUG=4` the generated code, `DEBUG=5` the kernel AST, `DEBUG=6` the linear program,
//! `DEBUG=7` the CPU's machine code.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tinygrad_codegen::program::slot_extents;
use tinygrad_codegen::{to_program_with, to_program_with_opts};
use tinygrad_schedule::ScheduleItem;
use tinygrad_uop::{Ops, UOp};

use crate::Buffer;
use crate::device::{Device, DeviceError, Kernel, debug_level};

/// A compiled kernel, its name, its flop estimate per launch, the least size of each slot's
/// buffer ([`tinygrad_codegen::program::slot_extents`]), checked before every launch, and its
/// variables (`Program::vars`: name and bounds, the order their values are passed in).
pub(crate) type Entry = Arc<(Arc<dyn Kernel>, String, f64, Arc<[usize]>, Vars)>;

/// A kernel's variables: name and inclusive bounds, sorted by name.
pub(crate) type Vars = Arc<[(Arc<str>, i64, i64)]>;

/// Compiled kernels by device, kernel AST and beam width (0: the heuristic's opts), at most
/// `cap` of them: when full, the least recently used tenth is evicted (its compiled code is
/// freed once no schedule holds the kernel). Without a bound, a program whose graphs differ
/// only in a constant (a learning rate written as a Rust scalar) compiles and keeps a kernel
/// per value.
struct KernelCache {
    map: HashMap<(&'static str, UOp, usize), (Entry, u64)>,
    tick: u64,
    cap: usize,
}

impl KernelCache {
    fn get(&mut self, key: &(&'static str, UOp, usize)) -> Option<Entry> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(key).map(|(e, used)| {
            *used = tick;
            e.clone()
        })
    }

    fn insert(&mut self, key: (&'static str, UOp, usize), entry: Entry) {
        if self.map.len() >= self.cap {
            let keep = self.cap - self.cap.div_ceil(10);
            let mut ticks: Vec<u64> = self.map.values().map(|(_, t)| *t).collect();
            let nth = self.map.len() - keep - 1;
            let (_, &mut cut, _) = ticks.select_nth_unstable(nth);
            self.map.retain(|_, (_, t)| *t > cut);
        }
        self.tick += 1;
        self.map.insert(key, (entry, self.tick));
    }
}

/// The kernel cache's capacity: `KERNEL_CACHE_SIZE` (kernels, at least 1), default 4096.
pub fn kernel_cache_capacity() -> usize {
    static CAP: OnceLock<usize> = OnceLock::new();
    *CAP.get_or_init(|| {
        std::env::var("KERNEL_CACHE_SIZE")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(4096)
            .max(1)
    })
}

/// How many compiled kernels the kernel cache holds now (for tests and tools).
pub fn kernel_cache_len() -> usize {
    cache().lock().unwrap_or_else(|e| e.into_inner()).map.len()
}

fn cache() -> &'static Mutex<KernelCache> {
    static CACHE: OnceLock<Mutex<KernelCache>> = OnceLock::new();
    CACHE.get_or_init(|| {
        Mutex::new(KernelCache {
            map: HashMap::new(),
            tick: 0,
            cap: kernel_cache_capacity(),
        })
    })
}

static COMPILES: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Schedules run and items launched by this thread (replays included), for tests.
    static THREAD_RUNS: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// How many schedules this thread has run with [`run_schedule`], and how many items (kernels
/// and copies) it has launched, replays ([`crate::capture::replay`]) included: a JIT replay
/// launches without scheduling. For tests (other threads' work is not counted).
pub fn thread_run_counts() -> (usize, usize) {
    THREAD_RUNS.with(std::cell::Cell::get)
}

/// How many kernels have been compiled in this process (cache misses), for tests.
pub fn compile_count() -> usize {
    COMPILES.load(Ordering::Relaxed)
}

/// Compiles (or finds in the cache) the kernel for `ast` on `dev`. Returns the kernel, its name
/// and its flop estimate per launch.
pub fn get_kernel(
    dev: &dyn Device,
    ast: &UOp,
) -> Result<(Arc<dyn Kernel>, String, f64), DeviceError> {
    get_kernel_for(dev, ast, None).map(|e| (e.0.clone(), e.1.clone(), e.2))
}

/// [`get_kernel`]; with `beam = Some((bufs, width))` and a device that takes kernel opts, the
/// opts come from BEAM search on `bufs` ([`crate::beam`]) instead of the heuristic.
fn get_kernel_for(
    dev: &dyn Device,
    ast: &UOp,
    beam: Option<(&[Arc<Buffer>], usize)>,
) -> Result<Entry, DeviceError> {
    // (kernels with variables take no opts: nothing to search)
    let beam = beam.filter(|(_, w)| *w > 0 && dev.optimizes() && !has_vars(ast));
    let key = (dev.name(), ast.clone(), beam.map_or(0, |(_, w)| w));
    if let Some(k) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(k);
    }
    if debug_level() >= 5 {
        eprintln!("kernel AST:\n{}", ast.pretty());
    }
    if let Some(compiled) = dev.compile_ast(ast) {
        let (kernel, name, flops) = compiled?;
        let vars = tinygrad_codegen::program::kernel_vars(ast).into();
        let entry = Arc::new((kernel, name, flops, slot_extents(ast).into(), vars));
        COMPILES.fetch_add(1, Ordering::Relaxed);
        if debug_level() >= 4 {
            eprintln!("{}", entry.0.source());
        }
        cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, entry.clone());
        return Ok(entry);
    }
    let prog = match beam {
        Some((bufs, width)) => {
            // BEAM times candidates on `bufs`: they must fit before anything runs
            check_extents(&slot_extents(ast), bufs, "beam search")?;
            let opts = crate::beam::best_opts(dev, ast, bufs, width);
            to_program_with_opts(ast, dev.caps(), &opts)
        }
        None => to_program_with(ast, dev.caps(), dev.optimizes()),
    };
    if debug_level() >= 3 && !prog.opts.is_empty() {
        eprintln!("{}: {:?}", prog.name, prog.opts);
    }
    if debug_level() >= 6 {
        for (i, u) in prog.uops.iter().enumerate() {
            eprintln!(
                "{i:4} {:<12} {:<10} {}",
                u.op().name(),
                u.dtype().to_string(),
                u.arg()
            );
        }
    }
    let kernel = dev.compile(&prog)?;
    COMPILES.fetch_add(1, Ordering::Relaxed);
    if debug_level() >= 4 {
        eprintln!("{}", kernel.source());
    }
    let flops = estimate_flops(&prog.uops);
    let entry = Arc::new((
        kernel,
        prog.name.clone(),
        flops,
        prog.extents.clone().into(),
        prog.vars.clone().into(),
    ));
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, entry.clone());
    Ok(entry)
}

/// Whether each buffer covers its slot's extent (what the kernel's index arithmetic reaches):
/// the one check `run_schedule`, BEAM and the CPU launchers share.
pub(crate) fn check_extents(
    extents: &[usize],
    bufs: &[Arc<Buffer>],
    kernel: &str,
) -> Result<(), DeviceError> {
    for (slot, b) in bufs.iter().enumerate() {
        let need = extents.get(slot).copied().unwrap_or(0);
        if b.size < need {
            return Err(DeviceError::Launch {
                kernel: kernel.to_string(),
                message: if need == usize::MAX {
                    format!("slot {slot}'s index may be negative or is unbounded ({b:?})")
                } else {
                    format!(
                        "slot {slot} reaches {need} elements, but its buffer {b:?} has {}",
                        b.size
                    )
                },
            });
        }
    }
    Ok(())
}

/// A rough count of ALU operations per launch: each ALU op times its enclosing loop sizes (a
/// fused multiply-add counts two).
fn estimate_flops(uops: &[UOp]) -> f64 {
    let mut mult = vec![1.0f64];
    let mut total = 0.0;
    for u in uops {
        match u.op() {
            Ops::Range => {
                let n = u.s(0).as_int().unwrap_or(1) as f64;
                let top = *mult.last().expect("outer scope");
                mult.push(top * n);
            }
            Ops::End => {
                mult.pop();
            }
            op if op.is_alu() && !u.dtype().is_int() => {
                let n = if op == Ops::MulAcc { 2.0 } else { 1.0 };
                total += n * *mult.last().expect("scope");
            }
            _ => {}
        }
    }
    total
}

/// A schedule item made ready to run: its buffers, its kernel (`None`: a copy) and the values of
/// the kernel's variables.
pub(crate) type Prepared = (Vec<Arc<Buffer>>, Option<Entry>, Vec<i64>);

fn has_vars(ast: &UOp) -> bool {
    ast.toposort().iter().any(|u| u.op() == Ops::DefineVar)
}

/// The values of `vars` (a kernel's) from `var_vals`, each checked against its bounds.
pub(crate) fn var_values(
    kernel: &str,
    vars: &[(Arc<str>, i64, i64)],
    var_vals: &HashMap<Arc<str>, i64>,
) -> Result<Vec<i64>, DeviceError> {
    vars.iter()
        .map(|(name, lo, hi)| {
            let v = *var_vals.get(name).ok_or_else(|| DeviceError::Launch {
                kernel: kernel.to_string(),
                message: format!("variable {name} has no value (bind it)"),
            })?;
            if !(*lo..=*hi).contains(&v) {
                return Err(DeviceError::Launch {
                    kernel: kernel.to_string(),
                    message: format!("variable {name} = {v} is outside its bounds [{lo}, {hi}]"),
                });
            }
            Ok(v)
        })
        .collect()
}

/// Runs `items` in order on `dev`: kernels on `dev`, copies (`Copy` items: slot 0 on `dev`,
/// slot 1 on any device) the way the two devices allow.
///
/// Before anything runs, every buffer is checked to be on the device and within its limits, and
/// allocated, and every kernel compiled, so that a buffer of another device or too large, an
/// allocation refused or a kernel that does not compile is an `Err` with nothing half done.
/// (BEAM, on the CPU, times its candidates then, on inputs that earlier kernels have not
/// computed yet: the timings may differ from the real run's, the results cannot.) Kernels are queued without waiting
/// (on GPU devices the host waits only when it reads data).
///
/// # Errors
/// [`DeviceError`] for a buffer over a limit, an allocation or compilation that fails, or a
/// copy that fails.
pub fn run_schedule(dev: &dyn Device, items: &[ScheduleItem]) -> Result<(), DeviceError> {
    run_schedule_with_vars(dev, items, &HashMap::new())
}

/// [`run_schedule`] for kernels with variables (tinygrad's `var_vals`): each kernel gets the
/// values `var_vals` gives its variables (by name).
///
/// # Errors
/// As [`run_schedule`], and a variable without a value or with a value outside its bounds.
pub fn run_schedule_with_vars(
    dev: &dyn Device,
    items: &[ScheduleItem],
    var_vals: &HashMap<Arc<str>, i64>,
) -> Result<(), DeviceError> {
    THREAD_RUNS.with(|c| c.set((c.get().0 + 1, c.get().1)));
    let width = crate::beam::beam_width();
    let start = Instant::now();
    let mut prepared: Vec<Prepared> = Vec::with_capacity(items.len());
    for item in items {
        let bufs: Vec<Arc<Buffer>> = item
            .bufs
            .iter()
            .map(|b| {
                Buffer::of(b).unwrap_or_else(|| panic!("schedule item bound to a non-buffer {b:?}"))
            })
            .collect();
        let is_copy = item.ast.op() == Ops::Copy;
        let name = if is_copy { "copy" } else { "" };
        // a kernel runs on `dev`'s buffers only (a copy reads another device's)
        let own = if is_copy { &bufs[..1] } else { &bufs[..] };
        if let Some(b) = own.iter().find(|b| *b.device != *dev.name()) {
            return Err(DeviceError::Launch {
                kernel: name.to_string(),
                message: format!(
                    "{b:?} is on {}, the kernel runs on {}",
                    b.device,
                    dev.name()
                ),
            });
        }
        // limits first: a buffer the device cannot bind is not allocated at all
        for b in own {
            dev.check_buffer(b.dtype, b.size).map_err(|e| match e {
                DeviceError::Launch { message, .. } => DeviceError::Launch {
                    kernel: name.to_string(),
                    message,
                },
                e => e,
            })?;
        }
        // Allocate first, so that running out of memory is an `Err` (the output is overwritten
        // whole unless the kernel also reads it).
        for (i, b) in bufs.iter().enumerate() {
            let read = bufs[1..].iter().any(|o| o.id() == b.id());
            b.try_allocate(i == 0 && !read)?;
        }
        if is_copy {
            assert!(
                bufs.len() == 2,
                "run_schedule: a copy item binds 2 buffers, not {}",
                bufs.len()
            );
            prepared.push((bufs, None, Vec::new()));
            continue;
        }
        let entry = get_kernel_for(dev, &item.ast, Some((&bufs, width)))?;
        // Every device (the CPU checks again at launch; a GPU would read out of bounds): each
        // buffer covers what the kernel's index arithmetic reaches.
        check_extents(&entry.3, &bufs, &entry.1)?;
        let values = var_values(&entry.1, &entry.4, var_vals)?;
        prepared.push((bufs, Some(entry), values));
    }
    crate::capture::record(dev.name(), items, &prepared);
    launch_prepared(dev, &prepared, start)
}

/// Launches prepared items in order on `dev` (buffers allocated, kernels compiled), then
/// flushes the device: the second half of [`run_schedule`], and what a captured schedule
/// replays ([`crate::capture`]). `start` is when the caller began (for `DEBUG=2`'s total).
pub(crate) fn launch_prepared(
    dev: &dyn Device,
    prepared: &[Prepared],
    start: Instant,
) -> Result<(), DeviceError> {
    THREAD_RUNS.with(|c| c.set((c.get().0, c.get().1 + prepared.len())));
    let mut in_kernels = 0.0f64;
    for (bufs, entry, values) in prepared {
        let t0 = Instant::now();
        let Some(entry) = entry else {
            bufs[0].copy_from(&bufs[1])?;
            if debug_level() >= 2 {
                // the copy's own time: wait for both devices
                dev.synchronize()?;
                crate::device::get_device(&bufs[1].device)?.synchronize()?;
                let dt = t0.elapsed().as_secs_f64();
                eprintln!(
                    "*** {:<4} {:<24} arg  2 tm {:9.2}us {:7.2} GB/s  {} <- {}, {} bytes",
                    dev.name(),
                    "copy",
                    dt * 1e6,
                    bufs[0].nbytes() as f64 / dt / 1e9,
                    bufs[0].device,
                    bufs[1].device,
                    bufs[0].nbytes()
                );
            }
            in_kernels += t0.elapsed().as_secs_f64();
            continue;
        };
        let (kernel, name, flops, _, _) = &**entry;
        if debug_level() >= 2 {
            // The device's own timing where it has one (GPU events), else wall time.
            let timed = kernel.launch_timed(bufs, values);
            let clock = if timed.is_some() { "" } else { " (wall)" };
            let dt = timed.unwrap_or_else(|| t0.elapsed().as_secs_f64());
            let bytes: usize = bufs.iter().map(|b| b.nbytes()).sum();
            eprintln!(
                "*** {:<4} {:<24} arg {:2} tm {:9.2}us {:8.2} GFLOPS {:7.2} GB/s{}",
                dev.name(),
                name,
                bufs.len(),
                dt * 1e6,
                flops / dt / 1e9,
                bytes as f64 / dt / 1e9,
                clock
            );
        } else {
            kernel.launch(bufs, values);
        }
        in_kernels += t0.elapsed().as_secs_f64();
    }
    // the device starts on what is queued (nothing waits)
    dev.flush()?;
    if debug_level() >= 2 && prepared.len() > 1 {
        let total = start.elapsed().as_secs_f64();
        eprintln!(
            "*** schedule of {} kernels: {:.2} ms, {:.2} ms of it outside kernels",
            prepared.len(),
            total * 1e3,
            (total - in_kernels) * 1e3
        );
    }
    Ok(())
}

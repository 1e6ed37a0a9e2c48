//! The `CPU` device: programs rendered to Cranelift IR, JIT-compiled, and run on host buffers.

use std::sync::{Arc, Mutex};

use cranelift_codegen::Context;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};
use tinygrad_codegen::cranelift::CraneliftRenderer;
use tinygrad_codegen::{Program, Renderer, TargetCaps};

use crate::Buffer;
use crate::device::{Device, DeviceError, Kernel};
use crate::thread_pool::global_pool;

/// The kernel ABI: `(bufs, start, end)` — see [`CraneliftRenderer`]. `f(slot addresses, lo,
/// hi)` runs outer iterations `lo..hi`; calling it is unsafe: the addresses must be valid for
/// every element those iterations touch.
pub(crate) type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

/// The Cranelift JIT device.
pub struct CpuDevice {
    name: &'static str,
    renderer: CraneliftRenderer,
    flags: settings::Flags,
}

impl CpuDevice {
    /// Sets up the JIT for the host ISA, for the device called `name` (`CPU`, `CPU:1`: each
    /// its own device with its own buffers, sharing the host's cores).
    pub fn new(name: &'static str) -> Result<CpuDevice, DeviceError> {
        let unavailable = |reason: String| DeviceError::Unavailable {
            name: name.into(),
            reason,
        };
        let mut fb = settings::builder();
        // opt_level=none: measured faster to compile *and* to run for these loops (the
        // optimizer's reordering spills), see shared/notes/toolchain.md.
        fb.set("opt_level", "none")
            .map_err(|e| unavailable(e.to_string()))?;
        fb.set("use_colocated_libcalls", "false")
            .map_err(|e| unavailable(e.to_string()))?;
        fb.set("is_pic", "false")
            .map_err(|e| unavailable(e.to_string()))?;
        let flags = settings::Flags::new(fb);
        let isa = cranelift_native::builder()
            .map_err(|e| unavailable(e.to_string()))?
            .finish(flags.clone())
            .map_err(|e| unavailable(e.to_string()))?;
        // aarch64 always has FMA; x86-64 says so in the ISA flags cranelift_native detected.
        let fma = cfg!(target_arch = "aarch64")
            || isa
                .isa_flags()
                .iter()
                .any(|f| f.name == "has_fma" && f.as_bool() == Some(true));
        // CPU_TWO_STREAMS=0 keeps every outer loop a single stream
        let two_streams = std::env::var("CPU_TWO_STREAMS").map_or(true, |v| v != "0");
        let renderer = CraneliftRenderer::new(isa.frontend_config())
            .with_fma(fma)
            .with_two_streams(two_streams);
        Ok(CpuDevice {
            name,
            renderer,
            flags,
        })
    }

    fn jit(&self, prog: &Program) -> Result<(KernelFn, String, JITModule), String> {
        let func = self.renderer.render(prog).map_err(|e| e.message)?;
        let source = func.display().to_string();
        let isa = cranelift_native::builder()
            .map_err(|e| e.to_string())?
            .finish(self.flags.clone())
            .map_err(|e| e.to_string())?;
        let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        let id = module
            .declare_function(&prog.name, Linkage::Export, &self.renderer.signature())
            .map_err(|e| e.to_string())?;
        let mut ctx = Context::for_function(func);
        // DEBUG=7: the machine code as Cranelift emitted it (tinygrad's level for assembly).
        let disasm = crate::device::debug_level() >= 7;
        ctx.set_disasm(disasm);
        module
            .define_function(id, &mut ctx)
            .map_err(|e| format!("{e:?}\n{source}"))?;
        if disasm && let Some(code) = ctx.compiled_code().and_then(|c| c.vcode.as_ref()) {
            eprintln!("{}: machine code\n{code}", prog.name);
        }
        module.finalize_definitions().map_err(|e| e.to_string())?;
        let ptr = module.get_finalized_function(id);
        // SAFETY: `ptr` is the entry of a function just compiled with the kernel signature
        // `(i64, i64, i64)` under the host calling convention, which is `KernelFn`'s ABI. The
        // module owning the code is returned with it and owned by the `CpuKernel` that holds
        // `f`, which frees the code only when it is dropped.
        let f: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(ptr) };
        Ok((f, source, module))
    }
}

pub(crate) struct CpuKernel {
    /// The compiled code of `f` (freed when the kernel is dropped: the kernel cache is bounded,
    /// and BEAM search compiles many candidates). A `Mutex` only to be `Sync`: it is touched
    /// only by `drop`.
    module: Mutex<Option<JITModule>>,
    f: KernelFn,
    source: String,
    outer: Option<usize>,
    globals: Vec<(tinygrad_dtype::DType, usize)>,
    /// The least size of each slot's buffer (`Program::extents`).
    extents: Vec<usize>,
    /// Estimated operations per launch (decides whether to use the thread pool).
    work: f64,
    name: String,
    /// The kernel's variables (`Program::vars`): their values follow the buffer addresses.
    vars: Vec<(Arc<str>, i64, i64)>,
}

/// Kernels estimated below this many operations run on the calling thread: waking the pool's
/// workers costs more than it saves.
const PARALLEL_MIN_WORK: f64 = 65_536.0;

/// A rough count of the operations a launch executes: every instruction times the trip counts
/// of its enclosing loops.
fn estimate_work(prog: &Program) -> f64 {
    let mut mult = vec![1.0f64];
    let mut total = 0.0;
    for u in &prog.uops {
        let top = *mult.last().expect("outer scope");
        match u.op() {
            tinygrad_uop::Ops::Range => {
                // a variable's range: its largest size
                let n = u.s(0).as_int().unwrap_or_else(|| u.s(0).vmax()).max(0) as f64;
                mult.push(top * n);
            }
            tinygrad_uop::Ops::End => {
                mult.pop();
            }
            _ => total += top,
        }
    }
    total
}

impl CpuDevice {
    /// JIT-compiles `prog` into a kernel of this device.
    pub(crate) fn compile_cpu(&self, prog: &Program) -> Result<CpuKernel, DeviceError> {
        let (f, source, module) = self.jit(prog).map_err(|message| DeviceError::Compile {
            kernel: prog.name.clone(),
            message,
        })?;
        let globals = prog.globals.iter().map(|d| (*d, d.itemsize())).collect();
        Ok(CpuKernel {
            module: Mutex::new(Some(module)),
            f,
            source,
            outer: prog.outer_size,
            globals,
            extents: prog.extents.clone(),
            work: estimate_work(prog),
            name: prog.name.clone(),
            vars: prog.vars.clone(),
        })
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &'static str {
        self.name
    }

    fn optimizes(&self) -> bool {
        // NOOPT=1 turns the kernel optimizations off (tinygrad's flag).
        static NOOPT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        !*NOOPT.get_or_init(|| std::env::var("NOOPT").is_ok_and(|v| !v.is_empty() && v != "0"))
    }

    fn caps(&self) -> TargetCaps {
        self.renderer.caps()
    }

    fn compile(&self, prog: &Program) -> Result<Arc<dyn Kernel>, DeviceError> {
        Ok(Arc::new(self.compile_cpu(prog)?))
    }

    fn compile_ast(
        &self,
        ast: &tinygrad_uop::UOp,
    ) -> Option<Result<crate::device::CompiledAst, DeviceError>> {
        if let Some(q) = crate::quant::compile(ast) {
            return Some(q);
        }
        if let Some(a) = crate::attention::compile(ast) {
            return Some(a);
        }
        if let Some(i) = crate::int_matmul::compile(ast) {
            return Some(i);
        }
        if let Some(d) = crate::depthwise::compile(ast) {
            return Some(d);
        }
        if let Some(p) = crate::pad::compile(ast) {
            return Some(p);
        }
        if ast
            .toposort()
            .iter()
            .any(|u| u.op() == tinygrad_uop::Ops::DefineVar)
        {
            return None; // the GEMM path's panels have constant sizes
        }
        crate::gemm::compile(self, ast).or_else(|| crate::row_reduce::compile(ast))
    }
}

/// Locked host memory of a launch's buffers: the guards (held until dropped) and each slot's
/// address.
pub(crate) struct LockedBuffers<'a> {
    _guards: Vec<(u64, crate::buffer::HostLock<'a>)>,
    /// The address of each slot's memory, in slot order.
    pub addrs: Vec<usize>,
}

/// Locks each distinct buffer of `bufs` once (a kernel may read and write the same buffer),
/// checking them against the kernel's `globals`. The output (slot 0) is overwritten entirely,
/// so unless it is also read it may take a reused allocation instead of fresh zeroed memory.
///
/// # Panics
/// If the number of buffers, a dtype, or a buffer's size (below the slot's extent: what the
/// kernel's index arithmetic can reach) does not fit the kernel: native code must never run on
/// buffers it would read or write past.
pub(crate) fn lock_buffers<'a>(
    bufs: &'a [Arc<Buffer>],
    globals: &[tinygrad_dtype::DType],
    extents: &[usize],
) -> LockedBuffers<'a> {
    assert_eq!(
        bufs.len(),
        globals.len(),
        "kernel launch: wrong number of buffers"
    );
    for (b, dt) in bufs.iter().zip(globals) {
        assert_eq!(
            b.dtype, *dt,
            "kernel launch: buffer {b:?} bound to a {dt} slot"
        );
    }
    if let Err(e) = crate::realize::check_extents(extents, bufs, "") {
        panic!("kernel launch: {e}");
    }
    let mut order: Vec<usize> = (0..bufs.len()).collect();
    order.sort_by_key(|&i| bufs[i].id());
    order.dedup_by_key(|i| bufs[*i].id());
    let out_is_read = bufs[1..].iter().any(|b| b.id() == bufs[0].id());
    let mut guards: Vec<_> = order
        .iter()
        .map(|&i| {
            let g = if i == 0 && !out_is_read {
                bufs[i].lock_for_overwrite()
            } else {
                bufs[i].lock()
            };
            (bufs[i].id(), g)
        })
        .collect();
    let mut addrs = Vec::with_capacity(bufs.len());
    for b in bufs {
        let g = guards
            .iter_mut()
            .find(|(id, _)| *id == b.id())
            .expect("locked above");
        addrs.push(g.1.as_mut_ptr() as usize);
    }
    LockedBuffers {
        _guards: guards,
        addrs,
    }
}

impl CpuKernel {
    /// The element dtype of each slot.
    pub(crate) fn slot_dtypes(&self) -> Vec<tinygrad_dtype::DType> {
        self.globals.iter().map(|(d, _)| *d).collect()
    }

    /// The compiled entry point, `f(slot addresses, lo, hi)` running outer iterations
    /// `lo..hi`, for callers that split a kernel into their own pool tasks. Valid while `self`
    /// lives.
    pub(crate) fn entry(&self) -> KernelFn {
        self.f
    }

    /// The size of the outermost output loop (1 when there is none).
    pub(crate) fn outer_len(&self) -> usize {
        self.outer.unwrap_or(1)
    }

    /// Runs iterations `lo..hi` of the outer loop with slot addresses `addrs`, split into tasks
    /// on the thread pool when the work is large enough.
    ///
    /// # Safety
    /// Each address must point to live memory that stays valid (and is not accessed by anything
    /// else) until this returns, large enough for every element the kernel's index arithmetic
    /// reaches in iterations `lo..hi` (which the scheduler's shapes and the callers guarantee).
    pub(crate) unsafe fn run_range(&self, addrs: &[usize], lo: usize, hi: usize) {
        if hi <= lo {
            return;
        }
        let pool = global_pool();
        let work = self.work * (hi - lo) as f64 / self.outer_len().max(1) as f64;
        let tasks = match self.outer {
            Some(_) if work >= PARALLEL_MIN_WORK => (hi - lo).min(pool.threads() * 4),
            _ => 1,
        };
        let (f, addrs) = (self.f, addrs.to_vec());
        pool.run(
            tasks,
            Box::new(move |t| {
                let n = hi - lo;
                let (a, b) = (lo + n * t / tasks, lo + n * (t + 1) / tasks);
                // SAFETY: the caller guarantees every address is valid for the iterations
                // `lo..hi`; tasks run disjoint slices of them, and iterations of the outer loop
                // write disjoint output elements.
                unsafe { f(addrs.as_ptr().cast::<*mut u8>(), a as i64, b as i64) };
            }),
        );
    }
}

impl Drop for CpuKernel {
    fn drop(&mut self) {
        let module = self
            .module
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(module) = module {
            // SAFETY: the module holds only this kernel's code. `f` is called only through
            // `&self` (`launch`, `run_range`; `entry()` hands it to `GemmKernel::run`, which
            // calls it while it borrows the kernel), and those calls return (the pool's tasks
            // finish) before the borrow ends; `drop` has `&mut self`, so no call is running
            // and none can start afterwards.
            unsafe { module.free_memory() };
        }
    }
}

impl Kernel for CpuKernel {
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
        crate::device::check_var_values(&self.name, &self.vars, vars);
        let locked = lock_buffers(bufs, &self.slot_dtypes(), &self.extents);
        let mut words = locked.addrs.clone();
        words.extend(vars.iter().map(|&v| v as usize));
        // SAFETY: `locked` holds every buffer's memory locked until it is dropped after the
        // run; `lock_buffers` checked each buffer's dtype and that its size covers every index
        // the kernel's ungated accesses can reach (the index bounds, which take each variable
        // within its bounds: `check_var_values` checked the values are, and `words` passes
        // them after the addresses, where the renderer reads them); gated accesses are only
        // performed where their gate (the scheduler's in-bounds condition) holds.
        unsafe { self.run_range(&words, 0, self.outer_len()) };
        drop(locked);
    }

    fn source(&self) -> &str {
        &self.source
    }
}

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

/// The kernel ABI: `(bufs, start, end)` — see [`CraneliftRenderer`].
type KernelFn = extern "C" fn(*const *mut u8, i64, i64);

/// The Cranelift JIT device.
pub struct CpuDevice {
    renderer: CraneliftRenderer,
    flags: settings::Flags,
    /// Modules of compiled kernels are kept alive (their code must not be freed while a kernel
    /// can still run); the kernel cache above makes each compile once.
    modules: Mutex<Vec<JITModule>>,
}

impl CpuDevice {
    /// Sets up the JIT for the host ISA.
    pub fn new() -> Result<CpuDevice, DeviceError> {
        let unavailable = |reason: String| DeviceError::Unavailable {
            name: "CPU".into(),
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
        let renderer = CraneliftRenderer::new(isa.frontend_config());
        Ok(CpuDevice {
            renderer,
            flags,
            modules: Mutex::new(Vec::new()),
        })
    }

    fn jit(&self, prog: &Program) -> Result<(KernelFn, String), String> {
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
        module
            .define_function(id, &mut ctx)
            .map_err(|e| format!("{e:?}\n{source}"))?;
        module.finalize_definitions().map_err(|e| e.to_string())?;
        let ptr = module.get_finalized_function(id);
        // SAFETY: `ptr` is the entry of a function just compiled with the kernel signature
        // `(i64, i64, i64)` under the host calling convention, which is `KernelFn`'s ABI. The
        // module owning the code is kept alive in `self.modules` for the life of the device.
        let f: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(ptr) };
        self.modules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(module);
        Ok((f, source))
    }
}

struct CpuKernel {
    f: KernelFn,
    source: String,
    outer: Option<usize>,
    globals: Vec<(tinygrad_dtype::DType, usize)>,
}

impl Device for CpuDevice {
    fn name(&self) -> &'static str {
        "CPU"
    }

    fn caps(&self) -> TargetCaps {
        self.renderer.caps()
    }

    fn compile(&self, prog: &Program) -> Result<Arc<dyn Kernel>, DeviceError> {
        let (f, source) = self.jit(prog).map_err(|message| DeviceError::Compile {
            kernel: prog.name.clone(),
            message,
        })?;
        let globals = prog.globals.iter().map(|d| (*d, d.itemsize())).collect();
        Ok(Arc::new(CpuKernel {
            f,
            source,
            outer: prog.outer_size,
            globals,
        }))
    }
}

impl Kernel for CpuKernel {
    fn launch(&self, bufs: &[Arc<Buffer>]) {
        assert_eq!(
            bufs.len(),
            self.globals.len(),
            "kernel launch: wrong number of buffers"
        );
        for (b, (dt, _)) in bufs.iter().zip(&self.globals) {
            assert_eq!(
                b.dtype, *dt,
                "kernel launch: buffer {b:?} bound to a {dt} slot"
            );
        }
        // Lock each distinct buffer once (a kernel may read and write the same buffer).
        let mut order: Vec<usize> = (0..bufs.len()).collect();
        order.sort_by_key(|&i| bufs[i].id());
        order.dedup_by_key(|i| bufs[*i].id());
        let mut guards: Vec<_> = order
            .iter()
            .map(|&i| (bufs[i].id(), bufs[i].lock()))
            .collect();
        let mut ptrs: Vec<*mut u8> = Vec::with_capacity(bufs.len());
        for b in bufs {
            let g = guards
                .iter_mut()
                .find(|(id, _)| *id == b.id())
                .expect("locked above");
            let mem = g.1.as_mut().expect("allocated by lock");
            ptrs.push(mem.as_mut_ptr().cast::<u8>());
        }
        let end = self.outer.unwrap_or(1) as i64;
        // SAFETY: `ptrs` holds one pointer per global slot, each to a live allocation of at
        // least `size * itemsize` bytes of the slot's dtype (checked above, held locked by
        // `guards` for the duration of the call). The generated code only indexes within the
        // buffers' shapes (the scheduler's index math) and gates loads outside them.
        (self.f)(ptrs.as_ptr(), 0, end);
        drop(guards);
    }

    fn source(&self) -> &str {
        &self.source
    }
}

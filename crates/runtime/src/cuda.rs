//! The `CUDA` device: programs rendered to PTX ([`tinygrad_codegen::ptx`]), loaded by the CUDA
//! driver and launched on an NVIDIA GPU, through `cudarc` with the driver library loaded at run
//! time (nothing CUDA is needed to build).
//!
//! The device needs the cargo feature `cuda` (off by default). Without it, or without the
//! driver library or a GPU, [`open`] returns [`DeviceError::Unavailable`] with the reason; it
//! never panics.
//!
//! Memory, as a first step: buffers live in host memory like on every other device. A launch
//! copies the kernel's distinct buffers to device memory, runs the kernel and copies the output
//! (slot 0) back. Device allocations are stream-ordered (`cuMemAllocAsync` where the GPU has
//! memory pools), so the driver's pool caches and reuses them from launch to launch. Keeping
//! buffers resident on the GPU (device-side storage in `Buffer`) is the next step.
//!
//! `DEBUG=2` times each kernel with CUDA events recorded around the launch (the kernel alone,
//! without the copies).

use std::sync::Arc;

use crate::device::{Device, DeviceError};

/// The `CUDA` device, or why it is unavailable.
pub fn open() -> Result<Arc<dyn Device>, DeviceError> {
    #[cfg(feature = "cuda")]
    {
        imp::CudaDevice::new().map(|d| Arc::new(d) as Arc<dyn Device>)
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(unavailable(
            "this build has no CUDA support (build with `--features cuda`)".into(),
        ))
    }
}

fn unavailable(reason: String) -> DeviceError {
    DeviceError::Unavailable {
        name: "CUDA".into(),
        reason,
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::Arc;

    use cudarc::driver::{
        CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
        sys,
    };
    use cudarc::nvrtc::Ptx;
    use tinygrad_codegen::ptx::{LaunchDims, PtxRenderer, entry_name, launch_dims};
    use tinygrad_codegen::{Program, Renderer, TargetCaps};
    use tinygrad_dtype::DType;

    use super::unavailable;
    use crate::Buffer;
    use crate::device::{Device, DeviceError, Kernel};

    /// GPU 0 through the CUDA driver.
    pub struct CudaDevice {
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
        renderer: PtxRenderer,
    }

    impl CudaDevice {
        /// Opens GPU 0: checks for the driver library first (creating a context without it
        /// panics inside cudarc), then for a device.
        pub fn new() -> Result<CudaDevice, DeviceError> {
            // SAFETY: `is_culib_present` only tries to load the driver library (dlopen) and
            // reports whether that worked; it has no preconditions.
            if !unsafe { sys::is_culib_present() } {
                return Err(unavailable(
                    "the CUDA driver library (libcuda.so) was not found: no NVIDIA driver".into(),
                ));
            }
            let opened = catch_unwind(AssertUnwindSafe(|| -> Result<_, DriverError> {
                let count = CudaContext::device_count()?;
                if count < 1 {
                    return Ok(None);
                }
                let ctx = CudaContext::new(0)?;
                let (major, minor) = ctx.compute_capability()?;
                let name = ctx.name()?;
                Ok(Some((ctx, major, minor, name)))
            }));
            let (ctx, major, minor, _name) = match opened {
                Ok(Ok(Some(v))) => v,
                Ok(Ok(None)) => return Err(unavailable("no CUDA GPU found".into())),
                Ok(Err(e)) => return Err(unavailable(format!("CUDA driver error: {e}"))),
                Err(_) => return Err(unavailable("the CUDA driver panicked on start-up".into())),
            };
            let sm = (major * 10 + minor) as u32;
            let renderer = PtxRenderer::new(sm);
            let stream = ctx.default_stream();
            Ok(CudaDevice {
                ctx,
                stream,
                renderer,
            })
        }
    }

    impl Device for CudaDevice {
        fn name(&self) -> &'static str {
            "CUDA"
        }

        fn caps(&self) -> TargetCaps {
            self.renderer.caps()
        }

        fn compile(&self, prog: &Program) -> Result<Arc<dyn Kernel>, DeviceError> {
            let compile_err = |message: String| DeviceError::Compile {
                kernel: prog.name.clone(),
                message,
            };
            let source = self
                .renderer
                .render(prog)
                .map_err(|e| compile_err(e.message))?;
            let module = self
                .ctx
                .load_module(Ptx::from_src(source.clone()))
                .map_err(|e| compile_err(format!("the driver rejected the PTX: {e}\n{source}")))?;
            let func = module
                .load_function(&entry_name(prog))
                .map_err(|e| compile_err(format!("kernel entry not found: {e}")))?;
            Ok(Arc::new(CudaKernel {
                func,
                stream: self.stream.clone(),
                dims: launch_dims(prog),
                globals: prog.globals.clone(),
                source,
            }))
        }
    }

    struct CudaKernel {
        func: CudaFunction,
        stream: Arc<CudaStream>,
        dims: LaunchDims,
        globals: Vec<DType>,
        source: String,
    }

    impl CudaKernel {
        /// Copies the buffers in, launches, copies the output back; the kernel's own time in
        /// seconds when `timed`.
        fn run(&self, bufs: &[Arc<Buffer>], timed: bool) -> Result<Option<f64>, DriverError> {
            // One device allocation per distinct buffer (a kernel may read its output).
            let mut distinct: Vec<usize> = Vec::new();
            let mut slot_to: Vec<usize> = Vec::with_capacity(bufs.len());
            for (i, b) in bufs.iter().enumerate() {
                match distinct.iter().position(|&j| bufs[j].id() == b.id()) {
                    Some(k) => slot_to.push(k),
                    None => {
                        slot_to.push(distinct.len());
                        distinct.push(i);
                    }
                }
            }
            let mut dev: Vec<CudaSlice<u8>> = Vec::with_capacity(distinct.len());
            for &i in &distinct {
                let bytes = bufs[i].to_bytes();
                // Zero-size buffers still get a (1-byte) allocation: a valid pointer.
                let mut d = self.stream.alloc_zeros::<u8>(bytes.len().max(1))?;
                if !bytes.is_empty() {
                    self.stream.memcpy_htod(&bytes, &mut d)?;
                }
                dev.push(d);
            }
            let cfg = LaunchConfig {
                grid_dim: (self.dims.grid, 1, 1),
                block_dim: (self.dims.block, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut launch = self.stream.launch_builder(&self.func);
            for &k in &slot_to {
                launch.arg(&dev[k]);
            }
            if timed {
                launch.record_kernel_launch(sys::CUevent_flags::CU_EVENT_DEFAULT);
            }
            // SAFETY: the kernel was rendered from the program whose global slots these are: one
            // `.param .u64` per slot, each a device allocation of at least the slot buffer's
            // `nbytes` (dtypes checked by the caller). The generated code indexes within the
            // buffers' shapes (the scheduler's index math) and predicates gated accesses, and
            // the allocations outlive the launch (`dev` is dropped after the synchronizing copy
            // below).
            let events = unsafe { launch.launch(cfg) }?;
            let out = self.stream.clone_dtoh(&dev[slot_to[0]])?;
            bufs[0].copy_in(&out[..bufs[0].nbytes()]);
            match events {
                Some((start, end)) => Ok(Some(f64::from(start.elapsed_ms(&end)?) / 1e3)),
                None => Ok(None),
            }
        }

        fn checked_run(&self, bufs: &[Arc<Buffer>], timed: bool) -> Option<f64> {
            assert_eq!(
                bufs.len(),
                self.globals.len(),
                "kernel launch: wrong number of buffers"
            );
            for (b, dt) in bufs.iter().zip(&self.globals) {
                assert_eq!(
                    b.dtype, *dt,
                    "kernel launch: buffer {b:?} bound to a {dt} slot"
                );
            }
            self.run(bufs, timed)
                .unwrap_or_else(|e| panic!("CUDA kernel launch failed: {e}"))
        }
    }

    impl Kernel for CudaKernel {
        fn launch(&self, bufs: &[Arc<Buffer>]) {
            self.checked_run(bufs, false);
        }

        fn launch_timed(&self, bufs: &[Arc<Buffer>]) -> Option<f64> {
            self.checked_run(bufs, true)
        }

        fn source(&self) -> &str {
            &self.source
        }
    }
}

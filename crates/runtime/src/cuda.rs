//! The `CUDA` device: programs rendered to PTX ([`tinygrad_codegen::ptx`]), loaded by the CUDA
//! driver and launched on an NVIDIA GPU, through `cudarc` with the driver library loaded at run
//! time (nothing CUDA is needed to build).
//!
//! The device needs the cargo feature `cuda` (off by default). Without it, or without the
//! driver library or a GPU, [`open`] returns [`DeviceError::Unavailable`] with the reason; it
//! never panics.
//!
//! # Memory
//! Buffers live in GPU memory: the device's [`Allocator`](crate::allocator::Allocator) gives
//! each buffer a stream-ordered device allocation (`cuMemAllocAsync` where the GPU has memory
//! pools), and freed allocations are pooled by size and reused. Kernels get the buffers' device
//! pointers and are queued on the device's one stream without waiting; the host waits only when
//! it reads data back ([`Allocator::copyout`](crate::allocator::Allocator::copyout)) or times a
//! kernel. Copies between two buffers of one GPU stay on it (`cuMemcpyDtoDAsync`).
//!
//! `CUDA:n` is GPU `n` (an `Unavailable` error naming how many GPUs there are when it is
//! missing).
//!
//! `DEBUG=2` times each kernel with CUDA events recorded around the launch.

use std::sync::Arc;

use crate::device::{Device, DeviceError};

/// The `CUDA` device called `name` (GPU `index`), or why it is unavailable.
pub fn open(name: &'static str, index: usize) -> Result<Arc<dyn Device>, DeviceError> {
    #[cfg(feature = "cuda")]
    {
        imp::CudaDevice::new(name, index).map(|d| Arc::new(d) as Arc<dyn Device>)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = index;
        Err(unavailable(
            name,
            "this build has no CUDA support (build with `--features cuda`)".into(),
        ))
    }
}

fn unavailable(name: &str, reason: String) -> DeviceError {
    DeviceError::Unavailable {
        name: name.into(),
        reason,
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use std::collections::HashMap;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::{Arc, Mutex};

    use cudarc::driver::{
        CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DriverError, LaunchConfig,
        PushKernelArg, sys,
    };
    use cudarc::nvrtc::Ptx;
    use tinygrad_codegen::ptx::{LaunchDims, PtxRenderer, entry_name, launch_dims};
    use tinygrad_codegen::{Program, Renderer, TargetCaps};
    use tinygrad_dtype::DType;

    use super::unavailable;
    use crate::Buffer;
    use crate::allocator::{Allocator, Direction, RawMem, count_transfer};
    use crate::device::{Device, DeviceError, Kernel};

    /// Pooled allocations kept at most, in bytes.
    const POOL_BYTES: usize = 1 << 30;

    /// One GPU through the CUDA driver.
    pub struct CudaDevice {
        name: &'static str,
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
        renderer: PtxRenderer,
        allocator: Arc<CudaAllocator>,
    }

    impl CudaDevice {
        /// Opens GPU `index` as the device `name`: checks for the driver library first
        /// (creating a context without it panics inside cudarc), then for the GPU.
        pub fn new(name: &'static str, index: usize) -> Result<CudaDevice, DeviceError> {
            let unavailable = |reason| unavailable(name, reason);
            // SAFETY: `is_culib_present` only tries to load the driver library (dlopen) and
            // reports whether that worked; it has no preconditions.
            if !unsafe { sys::is_culib_present() } {
                return Err(unavailable(
                    "the CUDA driver library (libcuda.so) was not found: no NVIDIA driver".into(),
                ));
            }
            let opened = catch_unwind(AssertUnwindSafe(|| -> Result<_, DriverError> {
                let count = CudaContext::device_count()?;
                if (count.max(0) as usize) <= index {
                    return Ok(Err(count));
                }
                let ctx = CudaContext::new(index)?;
                let (major, minor) = ctx.compute_capability()?;
                Ok(Ok((ctx, major, minor)))
            }));
            let (ctx, major, minor) = match opened {
                Ok(Ok(Ok(v))) => v,
                Ok(Ok(Err(count))) => {
                    return Err(unavailable(format!(
                        "no CUDA GPU {index} (this machine has {count})"
                    )));
                }
                Ok(Err(e)) => return Err(unavailable(format!("CUDA driver error: {e}"))),
                Err(_) => return Err(unavailable("the CUDA driver panicked on start-up".into())),
            };
            let sm = (major * 10 + minor) as u32;
            let renderer = PtxRenderer::new(sm);
            let stream = ctx.default_stream();
            let allocator = Arc::new(CudaAllocator {
                name,
                ctx: ctx.clone(),
                stream: stream.clone(),
                pool: Mutex::new((HashMap::new(), 0)),
            });
            Ok(CudaDevice {
                name,
                ctx,
                stream,
                renderer,
                allocator,
            })
        }
    }

    impl Device for CudaDevice {
        fn name(&self) -> &'static str {
            self.name
        }

        fn caps(&self) -> TargetCaps {
            self.renderer.caps()
        }

        fn allocator(&self) -> Option<Arc<dyn Allocator>> {
            Some(self.allocator.clone())
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
                device: self.name,
                func,
                stream: self.stream.clone(),
                dims: launch_dims(prog),
                globals: prog.globals.clone(),
                extents: prog.extents.clone(),
                vars: prog.vars.clone(),
                name: prog.name.clone(),
                source,
            }))
        }
    }

    /// Free allocations by size, and their total bytes.
    type Pool = (HashMap<usize, Vec<CudaSlice<u8>>>, usize);

    /// The GPU's memory: stream-ordered allocations of at least one byte (a valid pointer for
    /// empty buffers), pooled by size.
    struct CudaAllocator {
        name: &'static str,
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
        pool: Mutex<Pool>,
    }

    impl CudaAllocator {
        fn slice<'a>(&self, mem: &'a RawMem) -> Result<&'a CudaSlice<u8>, DeviceError> {
            mem.downcast_ref::<CudaSlice<u8>>()
                .ok_or_else(|| self.failed("a buffer that is no CUDA allocation".into()))
        }

        fn failed(&self, message: String) -> DeviceError {
            DeviceError::Transfer {
                device: self.name.to_string(),
                message,
            }
        }
    }

    impl Allocator for CudaAllocator {
        fn device(&self) -> &str {
            self.name
        }

        fn alloc(&self, nbytes: usize, zeroed: bool) -> Result<RawMem, DeviceError> {
            let len = nbytes.max(1);
            let pooled = {
                let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
                let got = pool.0.get_mut(&len).and_then(Vec::pop);
                if got.is_some() {
                    pool.1 -= len;
                }
                got
            };
            let oom = |e: DriverError| {
                let (free, total) = self.ctx.mem_get_info().unwrap_or((0, 0));
                DeviceError::OutOfMemory {
                    device: self.name.to_string(),
                    bytes: nbytes,
                    message: format!(
                        "{e} (the GPU has {free} of {total} bytes free, {} MiB of {} MiB)",
                        free >> 20,
                        total >> 20
                    ),
                }
            };
            let mut slice = match pooled {
                Some(s) => s,
                // SAFETY: the memory is uninitialized; it is zeroed below when asked, and
                // otherwise handed only to a writer that overwrites it whole before any read
                // (the `zeroed` contract of `Allocator::alloc`).
                None => unsafe { self.stream.alloc::<u8>(len) }.map_err(oom)?,
            };
            if zeroed {
                self.stream.memset_zeros(&mut slice).map_err(oom)?;
            }
            Ok(Box::new(slice))
        }

        fn free(&self, mem: RawMem, _nbytes: usize) {
            if let Ok(s) = mem.downcast::<CudaSlice<u8>>() {
                let len = s.len();
                let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
                if pool.1 + len <= POOL_BYTES {
                    pool.1 += len;
                    pool.0.entry(len).or_default().push(*s);
                }
            }
        }

        fn copyin(&self, dst: &mut RawMem, src: &[u8]) -> Result<(), DeviceError> {
            if src.is_empty() {
                return Ok(());
            }
            let name = self.name;
            let slice =
                dst.downcast_mut::<CudaSlice<u8>>()
                    .ok_or_else(|| DeviceError::Transfer {
                        device: name.to_string(),
                        message: "a buffer that is no CUDA allocation".into(),
                    })?;
            count_transfer(Direction::HostToDevice, src.len());
            let mut view = slice.slice_mut(0..src.len());
            self.stream
                .memcpy_htod(src, &mut view)
                .map_err(|e| self.failed(format!("upload of {} bytes: {e}", src.len())))
        }

        fn copyout(&self, src: &RawMem, dst: &mut [u8]) -> Result<(), DeviceError> {
            if dst.is_empty() {
                return Ok(());
            }
            let slice = self.slice(src)?;
            count_transfer(Direction::DeviceToHost, dst.len());
            let view = slice.slice(0..dst.len());
            self.stream
                .memcpy_dtoh(&view, dst)
                .and_then(|()| self.stream.synchronize())
                .map_err(|e| self.failed(format!("download of {} bytes: {e}", dst.len())))
        }

        fn transfer(
            &self,
            dst: &mut RawMem,
            src: &RawMem,
            nbytes: usize,
        ) -> Result<bool, DeviceError> {
            if nbytes == 0 {
                return Ok(true);
            }
            let src = self.slice(src)?.slice(0..nbytes);
            let name = self.name;
            let dst = dst
                .downcast_mut::<CudaSlice<u8>>()
                .ok_or_else(|| DeviceError::Transfer {
                    device: name.to_string(),
                    message: "a buffer that is no CUDA allocation".into(),
                })?;
            count_transfer(Direction::DeviceToDevice, nbytes);
            let mut dst = dst.slice_mut(0..nbytes);
            self.stream
                .memcpy_dtod(&src, &mut dst)
                .map_err(|e| self.failed(format!("copy of {nbytes} bytes on the GPU: {e}")))?;
            Ok(true)
        }

        fn synchronize(&self) -> Result<(), DeviceError> {
            self.stream
                .synchronize()
                .map_err(|e| self.failed(format!("waiting for the GPU: {e}")))
        }
    }

    struct CudaKernel {
        device: &'static str,
        func: CudaFunction,
        stream: Arc<CudaStream>,
        dims: LaunchDims,
        globals: Vec<DType>,
        /// The least size of each slot's buffer, checked at every launch.
        extents: Vec<usize>,
        /// The kernel's variables (`Program::vars`): their values follow the pointers.
        vars: Vec<(Arc<str>, i64, i64)>,
        name: String,
        source: String,
    }

    impl CudaKernel {
        /// Queues the kernel on the device's stream with the buffers' device pointers; waits
        /// only when `timed` (the kernel's own time in seconds).
        fn run(
            &self,
            bufs: &[Arc<Buffer>],
            vars: &[i64],
            timed: bool,
        ) -> Result<Option<f64>, String> {
            let mut ptrs: Vec<u64> = Vec::with_capacity(bufs.len());
            for b in bufs {
                let ptr = b
                    .with_device_mem(|m| {
                        if m.allocator().device() != self.device {
                            return Err(format!(
                                "{b:?} is in {}'s memory, not {}'s",
                                m.allocator().device(),
                                self.device
                            ));
                        }
                        let slice = m
                            .raw()
                            .downcast_ref::<CudaSlice<u8>>()
                            .ok_or_else(|| format!("{b:?} is not a CUDA allocation"))?;
                        let (ptr, _sync) = slice.device_ptr(&self.stream);
                        Ok(ptr)
                    })
                    .map_err(|e| e.to_string())??;
                ptrs.push(ptr);
            }
            let cfg = LaunchConfig {
                grid_dim: (self.dims.grid, 1, 1),
                block_dim: (self.dims.block, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut launch = self.stream.launch_builder(&self.func);
            for p in &ptrs {
                launch.arg(p);
            }
            for v in vars {
                launch.arg(v);
            }
            if timed {
                launch.record_kernel_launch(sys::CUevent_flags::CU_EVENT_DEFAULT);
            }
            // SAFETY: the kernel was rendered from the program whose global slots these are: one
            // `.param .u64` per slot, each the device pointer of an allocation of this device
            // (checked above) of at least the slot buffer's `nbytes`, then one `.param .s64` per
            // variable, each an `i64` here; `checked_run` checked the slot count, the dtypes,
            // that every buffer covers its slot's extent (the largest index the kernel's ungated
            // accesses reach, with every variable within its bounds) and that every variable's
            // value is within its bounds (gated accesses are predicated). The
            // allocations outlive the kernel: `bufs` own them, and memory freed after this call
            // is reused only by work queued on this same stream after the kernel.
            let events = unsafe { launch.launch(cfg) }.map_err(|e| e.to_string())?;
            match events {
                Some((start, end)) => {
                    let ms = start.elapsed_ms(&end).map_err(|e| e.to_string())?;
                    Ok(Some(f64::from(ms) / 1e3))
                }
                None => Ok(None),
            }
        }

        fn checked_run(&self, bufs: &[Arc<Buffer>], vars: &[i64], timed: bool) -> Option<f64> {
            crate::device::check_var_values(&self.name, &self.vars, vars);
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
            if let Err(e) = crate::realize::check_extents(&self.extents, bufs, "") {
                panic!("kernel launch: {e}");
            }
            self.run(bufs, vars, timed)
                .unwrap_or_else(|e| panic!("CUDA kernel launch failed: {e}"))
        }
    }

    impl Kernel for CudaKernel {
        fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]) {
            self.checked_run(bufs, vars, false);
        }

        fn launch_timed(&self, bufs: &[Arc<Buffer>], vars: &[i64]) -> Option<f64> {
            self.checked_run(bufs, vars, true)
        }

        fn source(&self) -> &str {
            &self.source
        }
    }
}

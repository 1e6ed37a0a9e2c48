//! The `WEBGPU` device: programs rendered to WGSL (`tinygrad_codegen::wgsl`), validated by naga
//! and run as headless compute shaders through `wgpu` (the Vulkan backend; on machines without a
//! GPU, Mesa's software driver lavapipe, adapter `llvmpipe`).
//!
//! The device needs the cargo feature `webgpu` (on by default). Without it, or without an
//! adapter (no Vulkan driver, or `WGPU_BACKEND` naming a backend this build lacks), [`open`]
//! returns [`DeviceError::Unavailable`] with the reason; it never panics. The wgpu instance,
//! adapter and device are created once per process.
//!
//! # Memory
//! Buffers live in GPU memory: the device's [`Allocator`] gives each
//! [`Buffer`](crate::Buffer) a `wgpu::Buffer` (`STORAGE | COPY_SRC | COPY_DST`) of
//! `storage_bytes = max(4, nbytes rounded up to a multiple of 4)` bytes ([`storage_bytes`]),
//! zero-initialized unless its first writer overwrites it whole (then it may be a reused one:
//! freed GPU buffers are pooled by size). Kernels bind those buffers directly and are recorded
//! into one pending command encoder, submitted as a batch (every 32 kernels, at the end of a
//! schedule — [`Device::flush`] — and before any upload, download or timed launch, so that an
//! upload, which wgpu runs at the start of the next submission, never overtakes a kernel
//! recorded before it). Nothing waits: the host waits only in [`Allocator::copyout`] (reading a
//! tensor), when timing (`DEBUG=2`), when the process exits (an `atexit` handler waits for
//! the queued kernels: a driver running them while `exit` runs its destructors can crash) and,
//! on a driver that compiles a shader when it first runs it (lavapipe), for each kernel's
//! first dispatch (so that no compile is left running at exit). Uploads are `Queue::write_buffer`; downloads copy into a pooled
//! `MAP_READ` staging buffer and map it. Two buffers of the same device copy on the GPU
//! (`copy_buffer_to_buffer`).
//!
//! `WEBGPU_HOST_BUFFERS=1` brings back the first design, for comparison: buffers in host
//! memory, each launch uploading its distinct buffers, dispatching and reading the output back
//! (a synchronization per kernel).
//!
//! Dtypes narrower than 32 bits are packed in 32-bit words by the shader; 8-byte dtypes are used
//! natively when the device has `SHADER_INT64`/`SHADER_F64`.
//!
//! # Several devices
//! `WEBGPU:1`, `WEBGPU:2`, ... are devices of their own (their own wgpu device and queue, on the
//! first adapter, as tinygrad opens one per name), with their own buffers and kernels.
//!
//! # Binding convention (what the WGSL renderer emits)
//! Buffer slot `i` is `@group(0) @binding(i) var<storage, read_write>`: every slot is a
//! read-write storage buffer, in one bind group whose layout has one `read_write` storage entry
//! per slot, visible to the compute stage. The kernel is dispatched as
//! `dispatch_workgroups(workgroups, 1, 1)`; the workgroup size is the shader's own
//! `@workgroup_size`. Binding the same buffer at several read-write bindings in one dispatch is
//! accepted by wgpu (one usage, `STORAGE_READ_WRITE`, so no usage conflict).
//!
//! # Limits
//! One storage binding may not exceed the adapter's `max_storage_buffer_binding_size` (128 MiB
//! on lavapipe) and one buffer its `max_buffer_size`; [`Device::check_buffer`] reports a buffer
//! over the limit as [`DeviceError::Launch`] before anything runs. `workgroups` may not exceed
//! `max_compute_workgroups_per_dimension` (65535): larger kernels loop (grid-stride).
//!
//! # Errors
//! Shaders are validated by naga (`validate_wgsl`) before wgpu sees them, so a bad shader is a
//! [`DeviceError::Compile`] with naga's message and the source. Every wgpu call runs inside
//! validation and out-of-memory error scopes, so wgpu errors become `Err`s (compile) or panics
//! with wgpu's message (launch) instead of wgpu's default handler; anything else lands in the
//! device's uncaptured-error handler, which records it for the next check.
//!
//! # Timing
//! With `TIMESTAMP_QUERY`, `DEBUG=2` ([`Kernel::launch_timed`]) measures the compute pass with
//! timestamp writes, resolved and scaled by `Queue::get_timestamp_period`; without it the time
//! is wall clock (labelled `(wall)` by `realize`).
//!
//! [`Allocator`]: crate::allocator::Allocator
//! [`Allocator::copyout`]: crate::allocator::Allocator::copyout
//! [`Device::check_buffer`]: crate::Device::check_buffer
//! [`Device::flush`]: crate::Device::flush
//! [`Kernel::launch_timed`]: crate::Kernel::launch_timed

use std::sync::Arc;

use crate::device::{Device, DeviceError};

#[cfg(feature = "webgpu")]
pub use imp::{WebGpuDevice, WgslKernel, device, device_named, validate_wgsl};

/// The `WEBGPU` device called `name` (`WEBGPU`, `WEBGPU:1`), or why it is unavailable.
pub fn open(name: &'static str) -> Result<Arc<dyn Device>, DeviceError> {
    #[cfg(feature = "webgpu")]
    {
        device_named(name).map(|d| d as Arc<dyn Device>)
    }
    #[cfg(not(feature = "webgpu"))]
    {
        Err(unavailable(
            name,
            "this build has no WebGPU support (build with `--features webgpu`)".into(),
        ))
    }
}

/// The size in bytes of the GPU buffer that holds a host buffer of `nbytes` bytes:
/// `max(4, nbytes rounded up to a multiple of 4)`.
pub fn storage_bytes(nbytes: usize) -> usize {
    tinygrad_codegen::wgsl::storage_bytes(tinygrad_dtype::DType::UINT8, nbytes)
}

fn unavailable(name: &str, reason: String) -> DeviceError {
    DeviceError::Unavailable {
        name: name.into(),
        reason,
    }
}

#[cfg(feature = "webgpu")]
mod imp {
    use std::borrow::Cow;
    use std::collections::HashMap;
    use std::fmt::Write as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};

    use tinygrad_codegen::{Program, TargetCaps};
    use tinygrad_dtype::DType;

    // (the allocator, the buffer pool and the helpers on `Shared`: webgpu/imp/memory.rs)
    mod memory;
    use memory::{Kind, Pending, Pool, WebGpuAllocator};

    use super::{storage_bytes, unavailable};
    use crate::Buffer;
    use crate::allocator::{Allocator, Direction, count_transfer};
    use crate::device::{Device, DeviceError, Kernel};

    /// Checks a WGSL module with naga: parses it and validates it with every validation flag,
    /// allowing 64-bit integers (`int64`) and `f64` (`float64`) as asked. The error is naga's
    /// report, with the offending source lines.
    pub fn validate_wgsl(source: &str, int64: bool, float64: bool) -> Result<(), String> {
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
        let mut caps = Capabilities::empty();
        caps.set(Capabilities::SHADER_INT64, int64);
        caps.set(Capabilities::FLOAT64, float64);
        Validator::new(ValidationFlags::all(), caps)
            .validate(&module)
            .map_err(|e| e.emit_to_string(source))?;
        Ok(())
    }

    /// The `WEBGPU` device (`WEBGPU:0`), created on first use (once per process).
    pub fn device() -> Result<Arc<WebGpuDevice>, DeviceError> {
        device_named("WEBGPU")
    }

    /// The WebGPU device called `name` (canonical: `WEBGPU`, `WEBGPU:1`), created on first
    /// use (once per process and name).
    pub fn device_named(name: &'static str) -> Result<Arc<WebGpuDevice>, DeviceError> {
        let mut devices = DEVICES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        devices
            .entry(name)
            .or_insert_with(|| {
                let device = WebGpuDevice::new(name).map(Arc::new);
                if device.is_ok() {
                    drain_at_exit::register();
                }
                device
            })
            .clone()
    }

    /// The devices opened so far, by name (and the error of those that failed to open).
    type Devices = Mutex<HashMap<&'static str, Result<Arc<WebGpuDevice>, DeviceError>>>;
    static DEVICES: OnceLock<Devices> = OnceLock::new();

    /// Waiting, when the process exits, for the work still running on every open device.
    ///
    /// Kernels run asynchronously: the host waits only to read a result. A process can end
    /// with kernels still queued, and a driver's threads go on running them while `exit` runs
    /// the process's destructors. On lavapipe, those threads compiled shaders with LLVM while
    /// `exit` destroyed LLVM's global state: a crash at exit (a SIGSEGV or a double free).
    /// So a handler registered with the C library's `atexit` waits for every device to
    /// finish first, and on a driver that compiles at the first dispatch every kernel's first
    /// dispatch is waited for (`Shared::finish_first_dispatch`), so that no compile is left
    /// running at exit. `atexit` runs its handlers in the reverse order of registration, and
    /// the driver's libraries register destructors when they load and whenever their
    /// compiler builds more of its state: the handler is registered when a device opens and
    /// again after each first dispatch, so it runs before all of them.
    #[cfg(unix)]
    mod drain_at_exit {
        use std::sync::TryLockError;
        use std::time::Duration;

        /// The longest the handler waits for one device: a driver that never finishes must not
        /// keep the process from exiting.
        const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

        /// Registers the handler (again: when a device opens and after each kernel's first
        /// dispatch on a driver that compiles then), so that it runs before the destructors the
        /// driver registered so far. (A handler that runs again finds nothing left to wait
        /// for.)
        pub(super) fn register() {
            // SAFETY: `atexit` only records the function pointer; `drain` is a plain
            // `extern "C" fn()` item, valid for the whole life of the process, and it never
            // unwinds (it catches panics).
            let rc = unsafe { libc::atexit(drain) };
            if rc != 0 {
                eprintln!(
                    "WEBGPU: could not register the exit handler that waits for queued \
                     kernels (atexit returned {rc})"
                );
            }
        }

        /// Waits for the work submitted to every open device. Skips the devices if another
        /// thread holds their table (it would never let go, at exit); never panics.
        extern "C" fn drain() {
            let _ = std::panic::catch_unwind(|| {
                let Some(devices) = super::DEVICES.get() else {
                    return;
                };
                let devices = match devices.try_lock() {
                    Ok(d) => d,
                    Err(TryLockError::Poisoned(p)) => p.into_inner(),
                    Err(TryLockError::WouldBlock) => return,
                };
                for device in devices.values().flatten() {
                    // an error (a lost device) leaves nothing to wait for
                    let _ = device.shared.device.poll(wgpu::PollType::Wait {
                        submission_index: None,
                        timeout: Some(DRAIN_TIMEOUT),
                    });
                }
            });
        }
    }

    #[cfg(not(unix))]
    mod drain_at_exit {
        /// Without `atexit`, nothing: the drivers this is for (lavapipe) are Linux's.
        pub(super) fn register() {}
    }

    impl Shared {
        /// Submits the pending batch, which holds a kernel's first dispatch, and waits for it;
        /// then registers the exit handler again ([`drain_at_exit`]).
        ///
        /// On a driver that compiles a shader when it first runs it (lavapipe), the compiler
        /// builds global state lazily (C++ function-local statics in LLVM's passes) and
        /// registers each piece's destructor with the C library as it builds it. `exit` runs
        /// those destructors in the reverse order of registration, so a piece built after the
        /// exit handler was registered is destroyed before the handler waits for the queued
        /// kernels: a compile still running then crashed (SIGSEGV in LLVM's register
        /// allocation, seen with gdb in 25 of 500 child processes that exited with 24 new
        /// shaders queued; the registration came from a `MachineFunctionPass` during a queued
        /// kernel's compile). Waiting for every first dispatch means no compile is ever
        /// running when the host goes on, so none runs at exit; registering the handler after
        /// each one keeps it later than every destructor a compile registered. (Registrations
        /// grow with the kernels compiled, one small entry each.)
        fn finish_first_dispatch(&self) -> Result<(), String> {
            if let Some(index) = self.flush() {
                self.device
                    .poll(wgpu::PollType::Wait {
                        submission_index: Some(index),
                        timeout: None,
                    })
                    .map_err(|e| format!("waiting for a kernel's first dispatch: {e}"))?;
            }
            drain_at_exit::register();
            Ok(())
        }
    }

    /// Whether `WEBGPU_HOST_BUFFERS=1` asks for buffers in host memory (the first design).
    fn host_buffers() -> bool {
        static ON: OnceLock<bool> = OnceLock::new();
        *ON.get_or_init(|| std::env::var("WEBGPU_HOST_BUFFERS").is_ok_and(|v| v == "1"))
    }

    /// What the device and its kernels share.
    struct Shared {
        /// The device's name (`WEBGPU`, `WEBGPU:1`).
        name: &'static str,
        /// `WEBGPU_HOST_BUFFERS=1`: buffers in host memory, copied around every launch.
        host_buffers: bool,
        device: wgpu::Device,
        queue: wgpu::Queue,
        limits: wgpu::Limits,
        features: wgpu::Features,
        /// Free GPU buffers, reused by size.
        pool: Mutex<Pool>,
        /// Kernels recorded and not yet submitted.
        pending: Mutex<Pending>,
        /// Errors that reached the uncaptured-error handler (outside any error scope).
        uncaptured: Arc<Mutex<Vec<String>>>,
        /// Whether the driver compiles a shader when it first runs it, on a thread of its own
        /// (a CPU adapter: lavapipe compiles with LLVM at the first dispatch, not when the
        /// pipeline is created). Then a kernel's first dispatch is waited for: see
        /// [`Shared::finish_first_dispatch`].
        compiles_at_dispatch: bool,
    }

    /// The `WEBGPU` device: one wgpu adapter and device.
    pub struct WebGpuDevice {
        shared: Arc<Shared>,
        allocator: Arc<WebGpuAllocator>,
        info: wgpu::AdapterInfo,
        adapter_features: wgpu::Features,
    }

    impl WebGpuDevice {
        /// Opens the first adapter of the backends in `WGPU_BACKEND` (default: every backend
        /// this build has) and a device with the adapter's limits and whichever of
        /// `SHADER_INT64`, `SHADER_F64` and `TIMESTAMP_QUERY` it has.
        pub fn new(name: &'static str) -> Result<WebGpuDevice, DeviceError> {
            let unavailable = |reason| unavailable(name, reason);
            let backends =
                wgpu::Backends::from_env().unwrap_or(wgpu::Instance::enabled_backend_features());
            let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
                backends,
                ..wgpu::InstanceDescriptor::new_without_display_handle_from_env()
            });
            let adapter =
                pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    ..Default::default()
                }))
                .map_err(|e| {
                    unavailable(format!(
                        "no WebGPU adapter (backends {backends:?}; on Linux the Vulkan driver: \
                     libvulkan1 + mesa-vulkan-drivers): {e}"
                    ))
                })?;
            let adapter_features = adapter.features();
            let wanted = wgpu::Features::SHADER_INT64
                | wgpu::Features::SHADER_F64
                | wgpu::Features::TIMESTAMP_QUERY;
            let features = adapter_features & wanted;
            let limits = adapter.limits();
            let (device, queue) =
                pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
                    label: Some("tinygrad WEBGPU"),
                    required_features: features,
                    required_limits: limits.clone(),
                    experimental_features: wgpu::ExperimentalFeatures::disabled(),
                    memory_hints: wgpu::MemoryHints::Performance,
                    trace: wgpu::Trace::Off,
                }))
                .map_err(|e| unavailable(format!("the adapter refused a device: {e}")))?;
            let uncaptured = Arc::new(Mutex::new(Vec::new()));
            let sink = uncaptured.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(e.to_string());
            }));
            let info = adapter.get_info();
            let shared = Arc::new(Shared {
                compiles_at_dispatch: info.device_type == wgpu::DeviceType::Cpu,
                name,
                host_buffers: host_buffers(),
                device,
                queue,
                limits,
                features,
                pool: Mutex::new(Pool::default()),
                pending: Mutex::new(Pending::default()),
                uncaptured,
            });
            Ok(WebGpuDevice {
                allocator: Arc::new(WebGpuAllocator {
                    shared: shared.clone(),
                }),
                shared,
                info,
                adapter_features,
            })
        }

        /// The adapter (name, backend, device type, driver).
        pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
            &self.info
        }

        /// Every feature the adapter offers (the device enables only those it uses).
        pub fn adapter_features(&self) -> wgpu::Features {
            self.adapter_features
        }

        /// The device's features: the adapter's among `SHADER_INT64`, `SHADER_F64`,
        /// `TIMESTAMP_QUERY`.
        pub fn features(&self) -> wgpu::Features {
            self.shared.features
        }

        /// The device's limits (the adapter's own).
        pub fn limits(&self) -> &wgpu::Limits {
            &self.shared.limits
        }

        /// Whether shaders may use `i64`/`u64`.
        pub fn int64(&self) -> bool {
            self.shared.features.contains(wgpu::Features::SHADER_INT64)
        }

        /// Whether shaders may use `f64`.
        pub fn float64(&self) -> bool {
            self.shared.features.contains(wgpu::Features::SHADER_F64)
        }

        /// Whether kernels can be timed on the GPU (`TIMESTAMP_QUERY`).
        pub fn timestamps(&self) -> bool {
            self.shared
                .features
                .contains(wgpu::Features::TIMESTAMP_QUERY)
        }

        /// A readable summary of the adapter, its features and the limits that matter here.
        pub fn describe(&self) -> String {
            let l = &self.shared.limits;
            let mut s = format!(
                "{} ({:?}, {:?}, driver {} {})\n",
                self.info.name,
                self.info.backend,
                self.info.device_type,
                self.info.driver,
                self.info.driver_info
            );
            let _ = writeln!(s, "adapter features: {:?}", self.adapter_features);
            let _ = writeln!(s, "device features: {:?}", self.shared.features);
            let _ = write!(
                s,
                "limits: max_storage_buffer_binding_size {}, max_buffer_size {}, \
                 max_storage_buffers_per_shader_stage {}, max_bindings_per_bind_group {}, \
                 max_compute_workgroups_per_dimension {}, max_compute_invocations_per_workgroup \
                 {}, max_compute_workgroup_size {}x{}x{}, \
                 max_compute_workgroup_storage_size {}, min_storage_buffer_offset_alignment {}",
                l.max_storage_buffer_binding_size,
                l.max_buffer_size,
                l.max_storage_buffers_per_shader_stage,
                l.max_bindings_per_bind_group,
                l.max_compute_workgroups_per_dimension,
                l.max_compute_invocations_per_workgroup,
                l.max_compute_workgroup_size_x,
                l.max_compute_workgroup_size_y,
                l.max_compute_workgroup_size_z,
                l.max_compute_workgroup_storage_size,
                l.min_storage_buffer_offset_alignment,
            );
            s
        }

        /// Compiles a hand-written (or rendered) WGSL kernel: `entry` is its compute entry
        /// point, `nbindings` its buffer slots (`@group(0) @binding(0..nbindings)`, all
        /// `var<storage, read_write>`), `workgroups` the workgroup count along x. The source is
        /// validated by naga first; any error is [`DeviceError::Compile`] with the message and
        /// the source.
        pub fn wgsl_kernel(
            &self,
            name: &str,
            source: String,
            entry: &str,
            nbindings: usize,
            workgroups: u32,
        ) -> Result<WgslKernel, DeviceError> {
            let err = |message: String| DeviceError::Compile {
                kernel: name.to_string(),
                message,
            };
            let l = &self.shared.limits;
            if workgroups > l.max_compute_workgroups_per_dimension {
                return Err(err(format!(
                    "{workgroups} workgroups exceed the adapter's \
                     max_compute_workgroups_per_dimension ({})",
                    l.max_compute_workgroups_per_dimension
                )));
            }
            if nbindings as u64 > u64::from(l.max_storage_buffers_per_shader_stage) {
                return Err(err(format!(
                    "{nbindings} buffers exceed the adapter's \
                     max_storage_buffers_per_shader_stage ({})",
                    l.max_storage_buffers_per_shader_stage
                )));
            }
            validate_wgsl(&source, self.int64(), self.float64())
                .map_err(|e| err(format!("invalid WGSL:\n{e}\n{source}")))?;
            let dev = &self.shared.device;
            let (layout, pipeline) = self
                .shared
                .scoped(|| {
                    let module = dev.create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some(name),
                        source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(&source)),
                    });
                    let entries: Vec<wgpu::BindGroupLayoutEntry> = (0..nbindings as u32)
                        .map(|binding| wgpu::BindGroupLayoutEntry {
                            binding,
                            visibility: wgpu::ShaderStages::COMPUTE,
                            ty: wgpu::BindingType::Buffer {
                                ty: wgpu::BufferBindingType::Storage { read_only: false },
                                has_dynamic_offset: false,
                                min_binding_size: None,
                            },
                            count: None,
                        })
                        .collect();
                    let layout = dev.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: Some(name),
                        entries: &entries,
                    });
                    let pipeline_layout =
                        dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                            label: Some(name),
                            bind_group_layouts: &[Some(&layout)],
                            immediate_size: 0,
                        });
                    let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(name),
                        layout: Some(&pipeline_layout),
                        module: &module,
                        entry_point: Some(entry),
                        compilation_options: Default::default(),
                        cache: None,
                    });
                    (layout, pipeline)
                })
                .map_err(|e| err(format!("wgpu rejected the shader: {e}\n{source}")))?;
            Ok(WgslKernel {
                shared: self.shared.clone(),
                name: name.to_string(),
                layout,
                pipeline,
                nbindings,
                workgroups,
                timestamps: self.timestamps(),
                globals: None,
                vars: Vec::new(),
                source,
                dispatched: AtomicBool::new(false),
            })
        }
    }

    /// The renderer's output for a program: WGSL source, entry point, workgroups along x.
    type Rendered = (String, &'static str, u32);

    /// Renders `prog` with the WGSL renderer for an adapter with (or without) 64-bit support.
    fn render(prog: &Program, int64: bool, float64: bool) -> Result<Rendered, DeviceError> {
        use tinygrad_codegen::Renderer;
        use tinygrad_codegen::wgsl::{ENTRY, WgslRenderer, launch_dims};
        let source = WgslRenderer::new(int64, float64)
            .render(prog)
            .map_err(|e| DeviceError::Compile {
                kernel: prog.name.clone(),
                message: e.message,
            })?;
        Ok((source, ENTRY, launch_dims(prog)))
    }

    impl Device for WebGpuDevice {
        fn name(&self) -> &'static str {
            self.shared.name
        }

        fn caps(&self) -> TargetCaps {
            TargetCaps {
                transcendentals: false,
                half: false,
                fp8: false,
                // WGSL's fma() may be emulated; contraction is left to the shader compiler.
                fma: false,
            }
        }

        fn compile(&self, prog: &Program) -> Result<Arc<dyn Kernel>, DeviceError> {
            let (source, entry, workgroups) = render(prog, self.int64(), self.float64())?;
            // variables: one more binding, after the buffers
            let bindings = prog.globals.len() + usize::from(!prog.vars.is_empty());
            let mut kernel = self.wgsl_kernel(&prog.name, source, entry, bindings, workgroups)?;
            kernel.globals = Some(prog.globals.clone());
            kernel.vars = prog.vars.clone();
            Ok(Arc::new(kernel))
        }

        fn flush(&self) -> Result<(), DeviceError> {
            self.shared
                .scoped(|| self.shared.flush())
                .map(|_| ())
                .map_err(|message| DeviceError::Launch {
                    kernel: String::new(),
                    message: format!("submitting the queued kernels: {message}"),
                })
        }

        fn allocator(&self) -> Option<Arc<dyn Allocator>> {
            if self.shared.host_buffers {
                None
            } else {
                Some(self.allocator.clone())
            }
        }

        fn check_buffer(&self, dtype: DType, size: usize) -> Result<(), DeviceError> {
            let nbytes = size.saturating_mul(dtype.itemsize());
            let bytes = storage_bytes(nbytes) as u64;
            let l = &self.shared.limits;
            let limit = l.max_storage_buffer_binding_size.min(l.max_buffer_size);
            if bytes > limit {
                let which = if l.max_storage_buffer_binding_size <= l.max_buffer_size {
                    "max_storage_buffer_binding_size"
                } else {
                    "max_buffer_size"
                };
                return Err(DeviceError::Launch {
                    kernel: String::new(),
                    message: format!(
                        "a buffer of {size} {dtype} ({nbytes} bytes) exceeds the {} \
                         adapter's {which} of {limit} bytes ({} MiB)",
                        self.shared.name,
                        limit >> 20
                    ),
                });
            }
            Ok(())
        }
    }

    /// A compiled WGSL compute kernel on the `WEBGPU` device (see the module docs for the
    /// binding convention).
    pub struct WgslKernel {
        shared: Arc<Shared>,
        name: String,
        layout: wgpu::BindGroupLayout,
        pipeline: wgpu::ComputePipeline,
        nbindings: usize,
        workgroups: u32,
        timestamps: bool,
        /// The slot dtypes, checked at launch, for kernels compiled from a program.
        globals: Option<Vec<DType>>,
        /// The program's variables: their values are bound as one more `i32` buffer.
        vars: Vec<(Arc<str>, i64, i64)>,
        source: String,
        /// Whether the kernel has been dispatched (see [`Shared::compiles_at_dispatch`]).
        dispatched: AtomicBool,
    }

    impl WgslKernel {
        /// The kernel's name.
        pub fn name(&self) -> &str {
            &self.name
        }

        /// Runs the kernel on `bufs` (one per binding; slot 0 is the output): queued on the
        /// device's buffers without waiting, unless `timed`. With `timed` and
        /// `TIMESTAMP_QUERY`, waits and returns the compute pass's GPU time in seconds.
        pub fn run(&self, bufs: &[Arc<Buffer>], timed: bool) -> Result<Option<f64>, String> {
            if bufs.len() != self.nbindings {
                return Err(format!(
                    "{} buffers for a kernel with {} bindings",
                    bufs.len(),
                    self.nbindings
                ));
            }
            if bufs.is_empty() {
                return Err("a kernel needs at least its output buffer".into());
            }
            let result = if self.shared.host_buffers {
                self.run_staged(bufs, timed)
            } else {
                self.run_resident(bufs, timed)
            };
            if result.is_ok()
                && self.shared.compiles_at_dispatch
                && !self.dispatched.swap(true, Ordering::Relaxed)
            {
                self.shared.finish_first_dispatch()?;
            }
            result
        }

        /// The launch on device buffers: bind and record the dispatch into the device's pending
        /// batch (submitted when full, by [`Device::flush`] at the end of a schedule, or before
        /// any copy); when timed, submit it alone and wait for its timestamps.
        fn run_resident(&self, bufs: &[Arc<Buffer>], timed: bool) -> Result<Option<f64>, String> {
            let sh = &*self.shared;
            let timed = timed && self.timestamps;
            let mut handles: Vec<wgpu::Buffer> = Vec::with_capacity(bufs.len());
            for b in bufs {
                let handle = b
                    .with_device_mem(|m| {
                        if m.allocator().device() != sh.name {
                            return Err(format!(
                                "{b:?} is in {}'s memory, not {}'s",
                                m.allocator().device(),
                                sh.name
                            ));
                        }
                        m.raw()
                            .downcast_ref::<wgpu::Buffer>()
                            .cloned()
                            .ok_or_else(|| format!("{b:?} is not a WebGPU buffer"))
                    })
                    .map_err(|e| e.to_string())??;
                handles.push(handle);
            }
            let mut ts_staging: Option<wgpu::Buffer> = None;
            // the bind group in a scope of its own: an invalid one is an error here, before
            // anything is recorded into the batch that other kernels share
            let bind_group = sh.scoped(|| {
                let entries: Vec<wgpu::BindGroupEntry> = handles
                    .iter()
                    .enumerate()
                    .map(|(slot, h)| wgpu::BindGroupEntry {
                        binding: slot as u32,
                        resource: h.as_entire_binding(),
                    })
                    .collect();
                sh.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(&self.name),
                    layout: &self.layout,
                    entries: &entries,
                })
            })?;
            let result = sh.scoped(|| -> Result<Option<f64>, String> {
                if !timed {
                    // queued with the kernels before it, submitted by the batch
                    sh.record(|enc| self.encode_pass(enc, &bind_group, None));
                    return Ok(None);
                }
                let (set, resolve) = sh.timestamp_queries();
                let mut enc = sh
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
                self.encode_pass(&mut enc, &bind_group, Some(&set));
                let ts = sh.take(Kind::Staging, 16);
                enc.resolve_query_set(&set, 0..2, &resolve, 0);
                enc.copy_buffer_to_buffer(&resolve, 0, &ts, 0, 16);
                let index = sh.after_pending(|| sh.queue.submit([enc.finish()]));
                let ts = ts_staging.insert(ts);
                sh.map_and_wait(&[ts], index)?;
                Ok(Some(sh.read_timestamps(ts)?))
            });
            let result = result.and_then(|r| r);
            if result.is_ok() {
                sh.give(Kind::Staging, ts_staging);
            }
            result
        }

        /// Records the kernel's compute pass (with timestamp writes when `queries`).
        fn encode_pass(
            &self,
            enc: &mut wgpu::CommandEncoder,
            bind_group: &wgpu::BindGroup,
            queries: Option<&wgpu::QuerySet>,
        ) {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(&self.name),
                timestamp_writes: queries.map(|set| wgpu::ComputePassTimestampWrites {
                    query_set: set,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                }),
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, bind_group, &[]);
            pass.dispatch_workgroups(self.workgroups, 1, 1);
        }

        /// The launch of the first design (`WEBGPU_HOST_BUFFERS=1`): buffers in host memory,
        /// each distinct one uploaded, the kernel dispatched, the output (slot 0) read back.
        fn run_staged(&self, bufs: &[Arc<Buffer>], timed: bool) -> Result<Option<f64>, String> {
            let out = &bufs[0];
            let sh = &*self.shared;
            let timed = timed && self.timestamps;
            // One GPU buffer per distinct host buffer.
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
            let out_bytes = storage_bytes(out.nbytes()) as u64;
            let mut gpu: Vec<wgpu::Buffer> = Vec::with_capacity(distinct.len());
            let mut staging: Option<wgpu::Buffer> = None;
            let mut ts_staging: Option<wgpu::Buffer> = None;
            let result = sh.scoped(|| -> Result<Option<f64>, String> {
                for &i in &distinct {
                    let mut bytes = bufs[i].to_bytes();
                    count_transfer(Direction::HostToDevice, bytes.len());
                    bytes.resize(storage_bytes(bytes.len()), 0);
                    let b = sh.take(Kind::Storage, bytes.len() as u64);
                    sh.queue.write_buffer(&b, 0, &bytes);
                    gpu.push(b);
                }
                let entries: Vec<wgpu::BindGroupEntry> = slot_to
                    .iter()
                    .enumerate()
                    .map(|(slot, &k)| wgpu::BindGroupEntry {
                        binding: slot as u32,
                        resource: gpu[k].as_entire_binding(),
                    })
                    .collect();
                let bind_group = sh.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(&self.name),
                    layout: &self.layout,
                    entries: &entries,
                });
                let queries = timed.then(|| sh.timestamp_queries());
                let mut enc = sh
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
                self.encode_pass(&mut enc, &bind_group, queries.as_ref().map(|(q, _)| q));
                let stage = sh.take(Kind::Staging, out_bytes);
                enc.copy_buffer_to_buffer(&gpu[slot_to[0]], 0, &stage, 0, out_bytes);
                if let Some((set, resolve)) = &queries {
                    let ts = sh.take(Kind::Staging, 16);
                    enc.resolve_query_set(set, 0..2, resolve, 0);
                    enc.copy_buffer_to_buffer(resolve, 0, &ts, 0, 16);
                    ts_staging = Some(ts);
                }
                let index = sh.queue.submit([enc.finish()]);
                let mut maps = vec![&stage];
                maps.extend(ts_staging.as_ref());
                sh.map_and_wait(&maps, index)?;
                {
                    let view = stage
                        .get_mapped_range(..)
                        .map_err(|e| format!("reading the result: {e}"))?;
                    out.copy_in(&view[..out.nbytes()]);
                }
                count_transfer(Direction::DeviceToHost, out.nbytes());
                stage.unmap();
                staging = Some(stage);
                match &ts_staging {
                    Some(ts) => Ok(Some(sh.read_timestamps(ts)?)),
                    None => Ok(None),
                }
            });
            let result = result.and_then(|r| r);
            // After an error a buffer may still be mapped or in use: only clean ones are reused.
            if result.is_ok() {
                sh.give(Kind::Storage, gpu);
                sh.give(Kind::Staging, staging.into_iter().chain(ts_staging));
            }
            result
        }

        fn checked_run(&self, bufs: &[Arc<Buffer>], vars: &[i64], timed: bool) -> Option<f64> {
            crate::device::check_var_values(&self.name, &self.vars, vars);
            if let Some(globals) = &self.globals {
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
            }
            if !vars.is_empty() {
                // the values as a small buffer of the device (the renderer checked they fit i32)
                let words: Vec<u8> = vars
                    .iter()
                    .flat_map(|&v| (v as i32).to_le_bytes())
                    .collect();
                let vbuf = Buffer::new(self.shared.name, DType::INT32, vars.len());
                vbuf.try_copy_in(&words)
                    .unwrap_or_else(|e| panic!("WEBGPU kernel {}: variables: {e}", self.name));
                let mut all = bufs.to_vec();
                all.push(vbuf);
                return self
                    .run(&all, timed)
                    .unwrap_or_else(|e| panic!("WEBGPU kernel {} failed: {e}", self.name));
            }
            self.run(bufs, timed)
                .unwrap_or_else(|e| panic!("WEBGPU kernel {} failed: {e}", self.name))
        }
    }

    impl Kernel for WgslKernel {
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

//! The [`Device`] trait and the device registry (`CPU`, `REF`, `CUDA`, `WEBGPU`, selected by
//! name or `DEV=`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use tinygrad_codegen::{Program, TargetCaps};
use tinygrad_dtype::DType;

use crate::Buffer;
use crate::allocator::Allocator;

/// A device failed: missing, or a kernel failed to compile or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceError {
    /// No such device name.
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// The device exists in this build but not on this machine.
    Unavailable {
        /// The device.
        name: String,
        /// Why.
        reason: String,
    },
    /// A kernel could not be compiled.
    Compile {
        /// The kernel's name.
        kernel: String,
        /// The compiler's or renderer's message.
        message: String,
    },
    /// Memory for a buffer could not be allocated.
    OutOfMemory {
        /// The device.
        device: String,
        /// The bytes asked for.
        bytes: usize,
        /// The buffer's elements and the allocator's message (`"1024 float32 elements: .."`).
        message: String,
    },
    /// Data could not be copied to, from or within a device.
    Transfer {
        /// The device.
        device: String,
        /// What failed.
        message: String,
    },
    /// A kernel cannot run on its buffers (a buffer over the device's limits).
    Launch {
        /// The kernel's name.
        kernel: String,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for DeviceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceError::Unknown { name } => {
                write!(
                    f,
                    "unknown device {name:?}; available: {}",
                    DEVICE_NAMES.join(", ")
                )
            }
            DeviceError::Unavailable { name, reason } => {
                write!(f, "device {name} is not available: {reason}")
            }
            DeviceError::Compile { kernel, message } => {
                write!(f, "kernel {kernel} failed to compile: {message}")
            }
            DeviceError::OutOfMemory {
                device,
                bytes,
                message,
            } => write!(
                f,
                "{device}: cannot allocate {bytes} bytes for a buffer of {message}"
            ),
            DeviceError::Transfer { device, message } => {
                write!(f, "{device}: copy failed: {message}")
            }
            DeviceError::Launch { kernel, message } if kernel.is_empty() => {
                write!(f, "a kernel cannot be launched: {message}")
            }
            DeviceError::Launch { kernel, message } => {
                write!(f, "kernel {kernel} cannot be launched: {message}")
            }
        }
    }
}

impl std::error::Error for DeviceError {}

/// Checks a launch's variable values against the kernel's variables (`Program::vars`): the
/// same count, each within its inclusive bounds. Every launcher calls it before running code
/// whose index bounds assume the variables' bounds.
///
/// # Panics
/// If they do not match, naming the kernel, the variable and its bounds.
pub fn check_var_values(kernel: &str, vars: &[(Arc<str>, i64, i64)], values: &[i64]) {
    assert_eq!(
        vars.len(),
        values.len(),
        "kernel {kernel}: {} variable values for {} variables",
        values.len(),
        vars.len()
    );
    for ((name, lo, hi), v) in vars.iter().zip(values) {
        assert!(
            (*lo..=*hi).contains(v),
            "kernel {kernel}: variable {name} = {v} is outside its bounds [{lo}, {hi}]"
        );
    }
}

/// A compiled kernel, ready to launch on its device.
pub trait Kernel: Send + Sync {
    /// Runs the kernel on `bufs` (slot order; slot 0 is the output) with `vars` the values of
    /// its variables (`Program::vars`, in order; empty for a kernel without).
    ///
    /// # Panics
    /// If a buffer does not fit its slot, or `vars` has the wrong length or a value outside its
    /// variable's bounds (the kernel's extents assume the bounds).
    fn launch(&self, bufs: &[Arc<Buffer>], vars: &[i64]);
    /// Runs the kernel like [`Kernel::launch`], returning the device's own measure of the
    /// kernel's run time in seconds where it has one (GPU events), for `DEBUG=2`.
    fn launch_timed(&self, bufs: &[Arc<Buffer>], vars: &[i64]) -> Option<f64> {
        self.launch(bufs, vars);
        None
    }
    /// The generated code, for `DEBUG=4`.
    fn source(&self) -> &str;
}

/// A kernel compiled by [`Device::compile_ast`]: the kernel, its name and flops per launch.
pub type CompiledAst = (Arc<dyn Kernel>, String, f64);

/// A device: where buffers live and kernels run.
pub trait Device: Send + Sync {
    /// The device's canonical name (`CPU`, `REF`, `CUDA`, `WEBGPU`, `CPU:1`).
    fn name(&self) -> &'static str;
    /// What the device's code generator executes natively.
    fn caps(&self) -> TargetCaps;
    /// Whether kernels for this device get the kernel optimizations of
    /// `tinygrad_codegen::opt` (upcast, unroll, 4-lane vectors). Off by default.
    fn optimizes(&self) -> bool {
        false
    }
    /// Compiles a program (the caller caches by kernel AST).
    fn compile(&self, prog: &Program) -> Result<Arc<dyn Kernel>, DeviceError>;

    /// Compiles a kernel AST the device handles with its own strategy instead of the generic
    /// pipeline (the CPU's GEMM path for matmul-shaped kernels): `None` for the generic path,
    /// else the kernel, its name and its flop count per launch.
    fn compile_ast(&self, ast: &tinygrad_uop::UOp) -> Option<Result<CompiledAst, DeviceError>> {
        let _ = ast;
        None
    }

    /// Whether a buffer of `size` elements of `dtype` can be bound to a kernel on this device
    /// (checked for every bound buffer before each launch): `Ok` by default; devices with a
    /// size limit per binding (`WEBGPU`) return [`DeviceError::Launch`] naming the limit, with
    /// an empty `kernel` that the caller fills in.
    fn check_buffer(&self, dtype: DType, size: usize) -> Result<(), DeviceError> {
        let _ = (dtype, size);
        Ok(())
    }

    /// The allocator of the device's own memory: `None` for devices that run on host memory
    /// (`CPU`, `REF`), whose buffers are host memory.
    fn allocator(&self) -> Option<Arc<dyn Allocator>> {
        None
    }

    /// Starts the work launched so far (a device that batches launches submits its batch),
    /// without waiting; `run_schedule` calls it at the end of a schedule. A no-op by default.
    ///
    /// # Errors
    /// When the device fails.
    fn flush(&self) -> Result<(), DeviceError> {
        Ok(())
    }

    /// Waits until every kernel and copy queued on the device has run (a no-op for devices that
    /// run synchronously).
    ///
    /// # Errors
    /// When the device fails.
    fn synchronize(&self) -> Result<(), DeviceError> {
        match self.allocator() {
            Some(a) => a.synchronize(),
            None => Ok(()),
        }
    }
}

/// Every device kind this build knows (`CUDA` is an `Unavailable` error without the `cuda`
/// feature, the driver or a GPU; `WEBGPU` without the `webgpu` feature or a WebGPU adapter).
/// A device name is a kind with an optional index: `CPU` (= `CPU:0`), `CPU:1`, `WEBGPU:0`,
/// `CUDA:1`; each index is its own device with its own buffers.
pub const DEVICE_NAMES: &[&str] = &["CPU", "REF", "CUDA", "WEBGPU"];

/// The canonical form of a device name: the kind in upper case, and the index unless it is 0
/// (tinygrad's `Device.canonicalize`: `cpu:0` is `CPU`, `webgpu:1` is `WEBGPU:1`). `None` when
/// the kind is unknown or the index is not a number.
pub fn canonical_device(name: &str) -> Option<String> {
    let (kind, index) = split_device(name)?;
    Some(match index {
        0 => kind.to_string(),
        i => format!("{kind}:{i}"),
    })
}

/// A device name's kind (one of [`DEVICE_NAMES`]) and index.
pub fn split_device(name: &str) -> Option<(&'static str, usize)> {
    let (kind, index) = match name.split_once(':') {
        Some((k, i)) => (k, i.parse::<usize>().ok()?),
        None => (name, 0),
    };
    let kind = DEVICE_NAMES.iter().find(|d| d.eq_ignore_ascii_case(kind))?;
    Some((kind, index))
}

/// The device called `name` (case-insensitive: `CPU`, `REF`, `CUDA`, `WEBGPU`, with an
/// optional index, `CPU:1`), created once per process.
///
/// # Errors
/// [`DeviceError::Unknown`] for a name of no device kind, [`DeviceError::Unavailable`] (with
/// the reason) for a device this build or machine lacks.
pub fn get_device(name: &str) -> Result<Arc<dyn Device>, DeviceError> {
    type Registry = Mutex<HashMap<String, Result<Arc<dyn Device>, DeviceError>>>;
    static DEVICES: OnceLock<Registry> = OnceLock::new();
    let canonical = canonical_device(name).ok_or_else(|| DeviceError::Unknown {
        name: name.to_string(),
    })?;
    let devices = DEVICES.get_or_init(Default::default);
    if let Some(d) = devices
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&canonical)
    {
        return d.clone();
    }
    // Opening a device may take long (a GPU driver): not under the registry's lock. Two
    // threads may both open it; the first one stored wins, and the other copy is dropped.
    let (kind, index) = split_device(&canonical).expect("canonical names parse");
    // A device's name lives as long as the process (the registry never forgets a device).
    let leaked: &'static str = Box::leak(canonical.clone().into_boxed_str());
    let opened: Result<Arc<dyn Device>, DeviceError> = match kind {
        "CPU" => crate::cpu::CpuDevice::new(leaked).map(|d| Arc::new(d) as _),
        "REF" => Ok(Arc::new(crate::reference::RefDevice::new(leaked))),
        "CUDA" => crate::cuda::open(leaked, index),
        "WEBGPU" => crate::webgpu::open(leaked),
        _ => unreachable!("split_device returns a kind of DEVICE_NAMES"),
    };
    devices
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(canonical)
        .or_insert(opened)
        .clone()
}

/// Whether `name` names a device of this library (case-insensitive, with an optional index),
/// available or not: what a tensor's device may be.
pub fn is_device_name(name: &str) -> bool {
    split_device(name).is_some()
}

/// The default device: the innermost [`with_default_device`] of this thread, else `DEV` from
/// the environment, else `CPU` (canonical names: `DEV=cpu:1` is `CPU:1`).
pub fn default_device() -> String {
    if let Some(d) = SCOPED_DEFAULT.with(|d| d.borrow().last().cloned()) {
        return d;
    }
    static DEV: OnceLock<String> = OnceLock::new();
    DEV.get_or_init(|| {
        std::env::var("DEV")
            .ok()
            .filter(|s| !s.is_empty())
            .map(|s| canonical_device(&s).unwrap_or_else(|| s.to_ascii_uppercase()))
            .unwrap_or_else(|| "CPU".into())
    })
    .clone()
}

thread_local! {
    static SCOPED_DEFAULT: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with `device` as this thread's default device (tinygrad's `Device.DEFAULT = ..`,
/// scoped to `f` and the calling thread, so that other threads keep theirs): tensors and
/// modules made inside without a device go there.
///
/// # Panics
/// If `device` names no device (see [`canonical_device`]).
pub fn with_default_device<R>(device: &str, f: impl FnOnce() -> R) -> R {
    let name = canonical_device(device).unwrap_or_else(|| {
        panic!(
            "with_default_device: unknown device {device:?} (devices: {})",
            DEVICE_NAMES.join(", ")
        )
    });
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            SCOPED_DEFAULT.with(|d| d.borrow_mut().pop());
        }
    }
    SCOPED_DEFAULT.with(|d| d.borrow_mut().push(name));
    let _pop = Pop;
    f()
}

/// The `DEBUG` level from the environment (0 when unset), read once.
pub fn debug_level() -> usize {
    static LEVEL: OnceLock<usize> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        std::env::var("DEBUG")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    })
}

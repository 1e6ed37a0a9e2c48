//! The [`Device`] trait and the device registry (`CPU`, `REF`, `CUDA`, `WEBGPU`, selected by
//! name or `DEV=`).

use std::fmt;
use std::sync::{Arc, OnceLock};

use tinygrad_codegen::{Program, TargetCaps};
use tinygrad_dtype::DType;

use crate::Buffer;

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

/// A compiled kernel, ready to launch on its device.
pub trait Kernel: Send + Sync {
    /// Runs the kernel on `bufs` (slot order; slot 0 is the output).
    fn launch(&self, bufs: &[Arc<Buffer>]);
    /// Runs the kernel like [`Kernel::launch`], returning the device's own measure of the
    /// kernel's run time in seconds where it has one (GPU events), for `DEBUG=2`.
    fn launch_timed(&self, bufs: &[Arc<Buffer>]) -> Option<f64> {
        self.launch(bufs);
        None
    }
    /// The generated code, for `DEBUG=4`.
    fn source(&self) -> &str;
}

/// A kernel compiled by [`Device::compile_ast`]: the kernel, its name and flops per launch.
pub type CompiledAst = (Arc<dyn Kernel>, String, f64);

/// A device: where buffers live and kernels run.
pub trait Device: Send + Sync {
    /// The device's name (`CPU`, `REF`, `CUDA`, `WEBGPU`).
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
}

/// Every device name this build knows (`CUDA` is an `Unavailable` error without the `cuda`
/// feature, the driver or a GPU; `WEBGPU` without the `webgpu` feature or a WebGPU adapter).
pub const DEVICE_NAMES: &[&str] = &["CPU", "REF", "CUDA", "WEBGPU"];

/// The device called `name` (case-insensitive; `CPU`, `REF`, `CUDA`, `WEBGPU`), created once
/// per process.
pub fn get_device(name: &str) -> Result<Arc<dyn Device>, DeviceError> {
    static CPU: OnceLock<Result<Arc<dyn Device>, DeviceError>> = OnceLock::new();
    static REF: OnceLock<Arc<dyn Device>> = OnceLock::new();
    static CUDA: OnceLock<Result<Arc<dyn Device>, DeviceError>> = OnceLock::new();
    static WEBGPU: OnceLock<Result<Arc<dyn Device>, DeviceError>> = OnceLock::new();
    match name.to_ascii_uppercase().as_str() {
        "CPU" => CPU
            .get_or_init(|| crate::cpu::CpuDevice::new().map(|d| Arc::new(d) as _))
            .clone(),
        "REF" => Ok(REF
            .get_or_init(|| Arc::new(crate::reference::RefDevice))
            .clone()),
        "CUDA" => CUDA.get_or_init(crate::cuda::open).clone(),
        "WEBGPU" => WEBGPU.get_or_init(crate::webgpu::open).clone(),
        _ => Err(DeviceError::Unknown {
            name: name.to_string(),
        }),
    }
}

/// Whether `name` names a device of this library (case-insensitive), available or not: what
/// a tensor's device may be.
pub fn is_device_name(name: &str) -> bool {
    DEVICE_NAMES.iter().any(|d| d.eq_ignore_ascii_case(name))
}

/// The default device: `DEV` from the environment, else `CPU`.
pub fn default_device() -> String {
    static DEV: OnceLock<String> = OnceLock::new();
    DEV.get_or_init(|| {
        std::env::var("DEV")
            .ok()
            .filter(|s| !s.is_empty())
            .map(|s| s.to_ascii_uppercase())
            .unwrap_or_else(|| "CPU".into())
    })
    .clone()
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

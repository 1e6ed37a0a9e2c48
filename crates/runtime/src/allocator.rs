//! Device memory: the [`Allocator`] a GPU device gives its buffers (tinygrad's `Allocator`:
//! `alloc`, `free`, `copyin`, `copyout`, `transfer`), and the process-wide counters of the
//! bytes that cross between the host and devices ([`transfer_stats`]).
//!
//! Host devices (`CPU`, `REF`) have no allocator: their buffers are host memory
//! ([`crate::buffer_pool`] reuses large ones). A GPU device's buffers hold a [`DeviceMem`]: an
//! allocation of the device, opaque here (a `wgpu::Buffer`, a CUDA allocation), which only the
//! device's allocator and kernels look inside. Data reaches the host only through
//! [`Allocator::copyout`] (when the user reads a tensor, or a copy to a host device) and the
//! device only through [`Allocator::copyin`] (data from the host); both count their bytes.
//!
//! # Ownership
//! A [`DeviceMem`] frees itself (back to its allocator's pool) when dropped, and a buffer's
//! memory lives as long as the [`Buffer`](crate::Buffer) that owns it, which every schedule item
//! holds while its kernel is queued. Each device runs its kernels and copies in one queue (a
//! wgpu queue, a CUDA stream), so memory freed after a launch and handed to a new buffer is
//! written only by work queued after that launch: a kernel never sees its buffer reused under it.

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::device::DeviceError;

/// A device allocation, as its allocator made it (downcast by the device's own code).
pub type RawMem = Box<dyn Any + Send + Sync>;

/// Memory on a GPU device: `alloc`/`free` and copies to and from the host.
///
/// Implementations count the bytes of [`Allocator::copyin`] and [`Allocator::copyout`] with
/// [`count_transfer`].
pub trait Allocator: Send + Sync {
    /// The device's name (`WEBGPU`, `CUDA:1`).
    fn device(&self) -> &str;

    /// An allocation of at least `nbytes` bytes: zeroed when `zeroed`, else with any contents
    /// (a writer overwrites it whole), possibly a reused one from the device's pool.
    ///
    /// # Errors
    /// [`DeviceError::OutOfMemory`] naming the size and the limit or the driver's reason.
    fn alloc(&self, nbytes: usize, zeroed: bool) -> Result<RawMem, DeviceError>;

    /// Takes back an allocation of `nbytes` bytes (into the pool, or freed).
    fn free(&self, mem: RawMem, nbytes: usize);

    /// Copies `src` (host bytes) to the start of `dst`; queued behind earlier work.
    ///
    /// # Errors
    /// When the device fails.
    fn copyin(&self, dst: &mut RawMem, src: &[u8]) -> Result<(), DeviceError>;

    /// Copies the first `dst.len()` bytes of `src` to the host, after every queued kernel that
    /// writes it has run (this waits for the device).
    ///
    /// # Errors
    /// When the device fails.
    fn copyout(&self, src: &RawMem, dst: &mut [u8]) -> Result<(), DeviceError>;

    /// Copies `nbytes` bytes from `src` to `dst` on the device itself, when both are
    /// allocations of this allocator: `Ok(false)` when it cannot (then the copy goes through
    /// the host).
    ///
    /// # Errors
    /// When the device fails.
    fn transfer(&self, dst: &mut RawMem, src: &RawMem, nbytes: usize) -> Result<bool, DeviceError> {
        let _ = (dst, src, nbytes);
        Ok(false)
    }

    /// Waits until everything queued on the device has run.
    ///
    /// # Errors
    /// When the device fails.
    fn synchronize(&self) -> Result<(), DeviceError> {
        Ok(())
    }
}

/// A buffer's device memory: the allocation and the allocator it goes back to when dropped.
pub struct DeviceMem {
    raw: Option<RawMem>,
    nbytes: usize,
    allocator: Arc<dyn Allocator>,
}

impl DeviceMem {
    /// Allocates `nbytes` bytes with `allocator` (see [`Allocator::alloc`]).
    ///
    /// # Errors
    /// When the allocator refuses.
    pub fn new(
        allocator: Arc<dyn Allocator>,
        nbytes: usize,
        zeroed: bool,
    ) -> Result<DeviceMem, DeviceError> {
        let raw = allocator.alloc(nbytes, zeroed)?;
        Ok(DeviceMem {
            raw: Some(raw),
            nbytes,
            allocator,
        })
    }

    /// The allocation, for the device's own code to downcast.
    pub fn raw(&self) -> &RawMem {
        self.raw.as_ref().expect("present until dropped")
    }

    /// The allocation, mutably (for copies into it).
    pub fn raw_mut(&mut self) -> &mut RawMem {
        self.raw.as_mut().expect("present until dropped")
    }

    /// The bytes asked for (the allocation may be larger).
    pub fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// The allocator this memory belongs to.
    pub fn allocator(&self) -> &Arc<dyn Allocator> {
        &self.allocator
    }
}

impl Drop for DeviceMem {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            self.allocator.free(raw, self.nbytes);
        }
    }
}

impl fmt::Debug for DeviceMem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes on {}>", self.nbytes, self.allocator.device())
    }
}

/// Bytes moved between the host and devices: the whole process ([`transfer_stats`]) or one
/// thread ([`thread_transfer_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Host to device ([`Allocator::copyin`]).
    pub host_to_device: u64,
    /// Device to host ([`Allocator::copyout`]).
    pub device_to_host: u64,
    /// Device to device on one device ([`Allocator::transfer`]).
    pub device_to_device: u64,
    /// How many copies of any kind.
    pub copies: u64,
}

impl TransferStats {
    /// Host<->device bytes: what crosses the bus.
    pub fn host_device_bytes(&self) -> u64 {
        self.host_to_device + self.device_to_host
    }

    /// The difference `self - earlier` (saturating): what happened between two readings.
    pub fn since(&self, earlier: &TransferStats) -> TransferStats {
        TransferStats {
            host_to_device: self.host_to_device.saturating_sub(earlier.host_to_device),
            device_to_host: self.device_to_host.saturating_sub(earlier.device_to_host),
            device_to_device: self
                .device_to_device
                .saturating_sub(earlier.device_to_device),
            copies: self.copies.saturating_sub(earlier.copies),
        }
    }
}

/// The direction of a counted copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Host memory to device memory.
    HostToDevice,
    /// Device memory to host memory.
    DeviceToHost,
    /// Within one device.
    DeviceToDevice,
}

static HTOD: AtomicU64 = AtomicU64::new(0);
static DTOH: AtomicU64 = AtomicU64::new(0);
static DTOD: AtomicU64 = AtomicU64::new(0);
static COPIES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD: Cell<TransferStats> = const { Cell::new(TransferStats {
        host_to_device: 0,
        device_to_host: 0,
        device_to_device: 0,
        copies: 0,
    }) };
}

/// Records a copy of `bytes` bytes (called by allocators).
pub fn count_transfer(direction: Direction, bytes: usize) {
    let bytes = bytes as u64;
    let counter = match direction {
        Direction::HostToDevice => &HTOD,
        Direction::DeviceToHost => &DTOH,
        Direction::DeviceToDevice => &DTOD,
    };
    counter.fetch_add(bytes, Ordering::Relaxed);
    COPIES.fetch_add(1, Ordering::Relaxed);
    THREAD.with(|t| {
        let mut s = t.get();
        match direction {
            Direction::HostToDevice => s.host_to_device += bytes,
            Direction::DeviceToHost => s.device_to_host += bytes,
            Direction::DeviceToDevice => s.device_to_device += bytes,
        }
        s.copies += 1;
        t.set(s);
    });
}

/// Every copy between the host and a device (and within a device) since the process started.
pub fn transfer_stats() -> TransferStats {
    TransferStats {
        host_to_device: HTOD.load(Ordering::Relaxed),
        device_to_host: DTOH.load(Ordering::Relaxed),
        device_to_device: DTOD.load(Ordering::Relaxed),
        copies: COPIES.load(Ordering::Relaxed),
    }
}

/// Like [`transfer_stats`], for the copies made by the calling thread only (a test's own,
/// whatever other tests run meanwhile: realizing runs its copies on the calling thread).
pub fn thread_transfer_stats() -> TransferStats {
    THREAD.with(Cell::get)
}

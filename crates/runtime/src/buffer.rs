//! [`Buffer`]: a typed array on a device. Host devices (`CPU`, `REF`) keep it in 64-byte aligned
//! host memory, allocated on first use (zeroed pages from the OS, so untouched memory is free);
//! GPU devices keep it in their own memory ([`DeviceMem`], from the device's
//! [`Allocator`](crate::allocator::Allocator)), reached from the host only through
//! [`Buffer::copy_in`] and [`Buffer::to_bytes`].

use std::any::Any;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Opaque, Ops, UOp};

use crate::DeviceError;
use crate::allocator::DeviceMem;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Host memory backing a buffer (u64 words: 8-byte aligned, zero-initialized).
pub type HostMem = Vec<u64>;

/// Where a buffer's elements live once allocated.
#[derive(Debug)]
pub enum Storage {
    /// Host memory (`CPU`, `REF`, or a GPU device run with host buffers).
    Host(HostMem),
    /// The device's own memory.
    Device(DeviceMem),
}

/// A buffer of `size` elements of `dtype` on a device.
pub struct Buffer {
    id: u64,
    /// The device name (`CPU`, `REF`, `CUDA`, `WEBGPU:1`).
    pub device: Arc<str>,
    /// Element dtype.
    pub dtype: DType,
    /// Number of elements.
    pub size: usize,
    mem: Mutex<Option<Storage>>,
}

/// A locked host buffer's memory ([`Buffer::lock`]).
pub struct HostLock<'a>(MutexGuard<'a, Option<Storage>>);

impl Deref for HostLock<'_> {
    type Target = HostMem;
    fn deref(&self) -> &HostMem {
        match self.0.as_ref() {
            Some(Storage::Host(m)) => m,
            _ => unreachable!("a HostLock is made only over host memory"),
        }
    }
}

impl DerefMut for HostLock<'_> {
    fn deref_mut(&mut self) -> &mut HostMem {
        match self.0.as_mut() {
            Some(Storage::Host(m)) => m,
            _ => unreachable!("a HostLock is made only over host memory"),
        }
    }
}

impl Buffer {
    /// A new, not yet allocated buffer.
    ///
    /// # Panics
    /// If `size` elements of `dtype` need more than `isize::MAX` bytes (the byte size would
    /// wrap, and kernels would write past a small allocation).
    pub fn new(device: &str, dtype: DType, size: usize) -> Arc<Buffer> {
        assert!(
            tinygrad_uop::shape::checked_numel(&[size], dtype.itemsize()).is_some(),
            "Buffer::new: {size} elements of {dtype} on {device} need more than {} bytes \
             (isize::MAX)",
            tinygrad_uop::shape::MAX_BYTES
        );
        let device = crate::device::canonical_device(device).unwrap_or_else(|| device.into());
        Arc::new(Buffer {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            device: device.into(),
            dtype,
            size,
            mem: Mutex::new(None),
        })
    }

    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        self.size * self.dtype.itemsize()
    }

    /// Process-unique id. Ids grow: a buffer made later has a larger one.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The id the next buffer made will have (or a smaller one than any made after this call).
    pub fn next_id() -> u64 {
        NEXT_ID.load(Ordering::Relaxed)
    }

    fn guard(&self) -> MutexGuard<'_, Option<Storage>> {
        self.mem.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks host memory, allocating (zeroed) on first use.
    ///
    /// # Panics
    /// If the buffer lives in a GPU device's memory (host code never reads it in place: see
    /// [`Self::to_bytes`]), or the memory cannot be allocated.
    pub fn lock(&self) -> HostLock<'_> {
        self.lock_host(false)
    }

    /// Locks host memory for a writer that overwrites every element before reading any (a
    /// kernel's output, [`Self::copy_in`]): on first use it may get a reused allocation with
    /// stale contents from the [`buffer_pool`](crate::buffer_pool) instead of fresh zeroed pages.
    ///
    /// # Panics
    /// Like [`Self::lock`].
    pub fn lock_for_overwrite(&self) -> HostLock<'_> {
        self.lock_host(true)
    }

    fn lock_host(&self, for_overwrite: bool) -> HostLock<'_> {
        let mut g = self.guard();
        if g.is_none() {
            let storage = self
                .new_storage(for_overwrite)
                .unwrap_or_else(|e| panic!("{e}"));
            *g = Some(storage);
        }
        assert!(
            matches!(g.as_ref(), Some(Storage::Host(_))),
            "{self:?}: host access to a buffer in {}'s memory (kernels of host devices only \
             run on host buffers; copy it with Tensor::to)",
            self.device
        );
        HostLock(g)
    }

    /// Allocates the memory now if it is not yet (zeroed, or for a writer that overwrites every
    /// element, possibly a reused allocation), in host memory or the device's, so that a
    /// failure is an `Err` here instead of a panic in the middle of a kernel launch.
    ///
    /// # Errors
    /// [`DeviceError::OutOfMemory`] when the allocator refuses (the message names the size and
    /// the limit), [`DeviceError::Unavailable`] when the device is missing.
    pub fn try_allocate(&self, for_overwrite: bool) -> Result<(), DeviceError> {
        let mut g = self.guard();
        if g.is_some() {
            return Ok(());
        }
        *g = Some(self.new_storage(for_overwrite)?);
        Ok(())
    }

    fn new_storage(&self, for_overwrite: bool) -> Result<Storage, DeviceError> {
        let dev = crate::device::get_device(&self.device)?;
        if let Some(allocator) = dev.allocator() {
            return DeviceMem::new(allocator, self.nbytes(), !for_overwrite)
                .map(Storage::Device)
                .map_err(|e| match e {
                    DeviceError::OutOfMemory {
                        device,
                        bytes,
                        message,
                    } => DeviceError::OutOfMemory {
                        device,
                        bytes,
                        message: format!("{} {} elements: {message}", self.size, self.dtype),
                    },
                    e => e,
                });
        }
        let words = self.nbytes().div_ceil(8);
        let pooled = if for_overwrite {
            crate::buffer_pool::take(words)
        } else {
            None
        };
        let mem = match pooled {
            Some(m) => m,
            None => try_zeroed_words(words).map_err(|e| DeviceError::OutOfMemory {
                device: self.device.to_string(),
                bytes: self.nbytes(),
                message: format!("{} {} elements: {e}", self.size, self.dtype),
            })?,
        };
        Ok(Storage::Host(mem))
    }

    /// Runs `f` on the buffer's device memory, allocating it (zeroed) on first use: how a GPU
    /// device's kernels and copies reach it. The buffer stays locked while `f` runs.
    ///
    /// # Errors
    /// When allocating fails, or the buffer is in host memory (a buffer of a host device).
    pub fn with_device_mem<R>(&self, f: impl FnOnce(&DeviceMem) -> R) -> Result<R, DeviceError> {
        let mut g = self.guard();
        if g.is_none() {
            *g = Some(self.new_storage(false)?);
        }
        match g.as_ref() {
            Some(Storage::Device(m)) => Ok(f(m)),
            _ => Err(DeviceError::Launch {
                kernel: String::new(),
                message: format!("{self:?} is in host memory, not in {}'s", self.device),
            }),
        }
    }

    /// Copies `bytes` (exactly [`Self::nbytes`]) into the buffer: a host copy, or one upload to
    /// the device.
    ///
    /// # Panics
    /// If the length is wrong, or the device fails (see [`Self::try_copy_in`]).
    pub fn copy_in(&self, bytes: &[u8]) {
        self.try_copy_in(bytes)
            .unwrap_or_else(|e| panic!("Buffer::copy_in: {e}"))
    }

    /// Like [`Self::copy_in`], with device failures as `Err`.
    ///
    /// # Errors
    /// When the device is unavailable, out of memory or fails.
    ///
    /// # Panics
    /// If the length is wrong.
    pub fn try_copy_in(&self, bytes: &[u8]) -> Result<(), DeviceError> {
        assert_eq!(
            bytes.len(),
            self.nbytes(),
            "Buffer::copy_in: {} bytes into a buffer of {} {} ({} bytes)",
            bytes.len(),
            self.size,
            self.dtype,
            self.nbytes()
        );
        let mut g = self.guard();
        if g.is_none() {
            *g = Some(self.new_storage(true)?);
        }
        match g.as_mut().expect("allocated above") {
            Storage::Host(mem) => {
                bytemuck::cast_slice_mut::<u64, u8>(mem)[..bytes.len()].copy_from_slice(bytes);
                Ok(())
            }
            Storage::Device(m) => {
                let t0 = std::time::Instant::now();
                let allocator = m.allocator().clone();
                allocator.copyin(m.raw_mut(), bytes)?;
                debug_copy(&self.device, "<- host (copyin)", bytes.len(), t0);
                Ok(())
            }
        }
    }

    /// Keeps `bytes` (exactly [`Self::nbytes`]) in host memory, whatever the device: for data
    /// made on a device this machine lacks, which can then still be read back or copied to
    /// another device, while kernels on its own device are `Err`s (the device is unavailable).
    ///
    /// # Panics
    /// If the length is wrong, the host memory cannot be allocated, or the buffer already holds
    /// device memory.
    pub fn stage_in_host(&self, bytes: &[u8]) {
        assert_eq!(
            bytes.len(),
            self.nbytes(),
            "Buffer::stage_in_host: wrong length"
        );
        let mut g = self.guard();
        if g.is_none() {
            let words = self.nbytes().div_ceil(8);
            *g = Some(Storage::Host(zeroed_words(words, self)));
        }
        match g.as_mut().expect("allocated above") {
            Storage::Host(mem) => {
                bytemuck::cast_slice_mut::<u64, u8>(mem)[..bytes.len()].copy_from_slice(bytes);
            }
            Storage::Device(_) => panic!("Buffer::stage_in_host: {self:?} holds device memory"),
        }
    }

    /// The buffer's contents as little-endian bytes (from a device: one download, after the
    /// kernels that write the buffer have run).
    ///
    /// # Panics
    /// If the device fails (see [`Self::try_to_bytes`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.try_to_bytes()
            .unwrap_or_else(|e| panic!("Buffer::to_bytes: {e}"))
    }

    /// Like [`Self::to_bytes`], with device failures as `Err`.
    ///
    /// # Errors
    /// When the device fails.
    pub fn try_to_bytes(&self) -> Result<Vec<u8>, DeviceError> {
        let mut out = vec![0u8; self.nbytes()];
        self.read_into(&mut out)?;
        Ok(out)
    }

    /// Copies the buffer's contents into `out` (exactly [`Self::nbytes`] long). A buffer never
    /// allocated reads as zeros (no copy).
    ///
    /// # Errors
    /// When the device fails.
    pub fn read_into(&self, out: &mut [u8]) -> Result<(), DeviceError> {
        assert_eq!(out.len(), self.nbytes(), "Buffer::read_into: wrong length");
        let g = self.guard();
        match g.as_ref() {
            None => {
                out.fill(0);
                Ok(())
            }
            Some(Storage::Host(mem)) => {
                out.copy_from_slice(&bytemuck::cast_slice::<u64, u8>(mem)[..out.len()]);
                Ok(())
            }
            Some(Storage::Device(m)) => {
                let t0 = std::time::Instant::now();
                m.allocator().copyout(m.raw(), out)?;
                debug_copy(&self.device, "-> host (copyout)", out.len(), t0);
                Ok(())
            }
        }
    }

    /// Copies `src`'s contents into this buffer (same dtype and size), the way the devices
    /// allow: within one device's memory when both buffers are on it (no host copy), else
    /// through the host (a download, an upload, or both for two GPU devices).
    ///
    /// # Errors
    /// When a device is unavailable, out of memory or fails.
    ///
    /// # Panics
    /// If the buffers differ in dtype or size.
    pub fn copy_from(&self, src: &Buffer) -> Result<(), DeviceError> {
        assert!(
            self.dtype == src.dtype && self.size == src.size,
            "Buffer::copy_from: {src:?} into {self:?} (dtype and size must match)"
        );
        if self.id == src.id {
            return Ok(());
        }
        // a buffer never written reads as zeros
        src.try_allocate(false)?;
        // two locks: always the lower id first, so that two copies cannot wait on each other
        let (sg, mut dg) = if src.id < self.id {
            let sg = src.guard();
            (sg, self.guard())
        } else {
            let dg = self.guard();
            (src.guard(), dg)
        };
        if dg.is_none() {
            *dg = Some(self.new_storage(true)?);
        }
        let n = self.nbytes();
        match (
            sg.as_ref().expect("allocated above"),
            dg.as_mut().expect("allocated above"),
        ) {
            (Storage::Host(s), Storage::Host(d)) => {
                bytemuck::cast_slice_mut::<u64, u8>(d)[..n]
                    .copy_from_slice(&bytemuck::cast_slice::<u64, u8>(s)[..n]);
                Ok(())
            }
            (Storage::Host(s), Storage::Device(d)) => {
                let allocator = d.allocator().clone();
                allocator.copyin(d.raw_mut(), &bytemuck::cast_slice::<u64, u8>(s)[..n])
            }
            (Storage::Device(s), Storage::Host(d)) => s
                .allocator()
                .copyout(s.raw(), &mut bytemuck::cast_slice_mut::<u64, u8>(d)[..n]),
            (Storage::Device(s), Storage::Device(d)) => {
                let same =
                    std::ptr::addr_eq(Arc::as_ptr(s.allocator()), Arc::as_ptr(d.allocator()));
                let allocator = d.allocator().clone();
                if same && allocator.transfer(d.raw_mut(), s.raw(), n)? {
                    return Ok(());
                }
                let mut staged = vec![0u8; n];
                s.allocator().copyout(s.raw(), &mut staged)?;
                allocator.copyin(d.raw_mut(), &staged)
            }
        }
    }

    /// The `Buffer` UOp that stands for this buffer in graphs.
    pub fn uop(self: &Arc<Self>) -> UOp {
        UOp::new(
            Ops::Buffer,
            self.dtype,
            vec![],
            Arg::Buffer(self.size, Arc::new(BufferRef(self.clone()))),
        )
    }

    /// The buffer behind a `Buffer` UOp.
    pub fn of(u: &UOp) -> Option<Arc<Buffer>> {
        match u.arg() {
            Arg::Buffer(_, h) => {
                let any: &dyn Any = h.as_any();
                any.downcast_ref::<BufferRef>().map(|r| r.0.clone())
            }
            _ => None,
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let mem = self.mem.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        // device memory goes back to its allocator when `DeviceMem` drops
        if let Some(Storage::Host(mem)) = mem {
            crate::buffer_pool::release(mem);
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<buf {} {}[{}] on {}>",
            self.id, self.dtype, self.size, self.device
        )
    }
}

/// `DEBUG=2`: one line per copy between the host and a device, like a kernel's.
fn debug_copy(device: &str, what: &str, bytes: usize, t0: std::time::Instant) {
    if crate::device::debug_level() >= 2 {
        let dt = t0.elapsed().as_secs_f64();
        eprintln!(
            "*** {device:<4} {what:<24} {bytes:>10} bytes tm {:9.2}us {:7.2} GB/s",
            dt * 1e6,
            bytes as f64 / dt.max(1e-9) / 1e9
        );
    }
}

/// The opaque handle stored in `Buffer` UOps (keeps the buffer alive while the graph uses it).
#[derive(Debug)]
pub struct BufferRef(pub Arc<Buffer>);

/// `words` zeroed 8-byte words for `buf`. A failed allocation panics with a message naming the
/// size (Rust's default is to abort the process).
///
/// # Panics
/// If the memory cannot be allocated.
pub(crate) fn zeroed_words(words: usize, buf: &Buffer) -> HostMem {
    try_zeroed_words(words).unwrap_or_else(|e| {
        panic!(
            "{}: cannot allocate {} bytes for a buffer of {} {} elements: {e}",
            buf.device,
            buf.nbytes(),
            buf.size,
            buf.dtype
        )
    })
}

/// `words` zeroed 8-byte words, or the allocator's error.
fn try_zeroed_words(words: usize) -> Result<HostMem, String> {
    // (large ones backed by huge pages: see `huge_pages`)
    crate::huge_pages::try_zeroed(words)
}

impl Opaque for BufferRef {
    fn id(&self) -> u64 {
        self.0.id
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn class(&self) -> String {
        self.0.device.to_string()
    }
}

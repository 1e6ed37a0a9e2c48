//! [`Buffer`]: a typed array on a device. Host devices (`CPU`, `REF`) keep it in 64-byte aligned
//! host memory, allocated on first use (zeroed pages from the OS, so untouched memory is free).

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Opaque, Ops, UOp};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Host memory backing a buffer (u64 words: 8-byte aligned, zero-initialized).
pub type HostMem = Vec<u64>;

/// A buffer of `size` elements of `dtype` on a device.
pub struct Buffer {
    id: u64,
    /// The device name (`CPU`, `REF`, `CUDA`, `WEBGPU`).
    pub device: Arc<str>,
    /// Element dtype.
    pub dtype: DType,
    /// Number of elements.
    pub size: usize,
    mem: Mutex<Option<HostMem>>,
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

    /// Process-unique id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Locks the memory, allocating (zeroed) on first use.
    pub fn lock(&self) -> MutexGuard<'_, Option<HostMem>> {
        let mut g = self.mem.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(zeroed_words(self.nbytes().div_ceil(8), self));
        }
        g
    }

    /// Locks the memory for a writer that overwrites every element before reading any (a
    /// kernel's output, [`Self::copy_in`]): on first use it may get a reused allocation with
    /// stale contents from the [`buffer_pool`](crate::buffer_pool) instead of fresh zeroed pages.
    pub fn lock_for_overwrite(&self) -> MutexGuard<'_, Option<HostMem>> {
        let mut g = self.mem.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(crate::buffer_pool::alloc_uninit(
                self.nbytes().div_ceil(8),
                self,
            ));
        }
        g
    }

    /// Allocates the memory now if it is not yet (zeroed, or for a writer that overwrites every
    /// element, possibly a reused allocation), so that a failure is an `Err` here instead of a
    /// panic in the middle of a kernel launch.
    ///
    /// # Errors
    /// [`DeviceError::OutOfMemory`](crate::DeviceError::OutOfMemory) when the allocator refuses.
    pub fn try_allocate(&self, for_overwrite: bool) -> Result<(), crate::DeviceError> {
        let mut g = self.mem.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_some() {
            return Ok(());
        }
        let words = self.nbytes().div_ceil(8);
        let pooled = if for_overwrite {
            crate::buffer_pool::take(words)
        } else {
            None
        };
        let mem = match pooled {
            Some(m) => m,
            None => try_zeroed_words(words).map_err(|e| crate::DeviceError::OutOfMemory {
                device: self.device.to_string(),
                bytes: self.nbytes(),
                message: format!("{} {} elements: {e}", self.size, self.dtype),
            })?,
        };
        *g = Some(mem);
        Ok(())
    }

    /// Copies `bytes` (exactly [`Self::nbytes`]) into the buffer.
    ///
    /// # Panics
    /// If the length is wrong.
    pub fn copy_in(&self, bytes: &[u8]) {
        assert_eq!(
            bytes.len(),
            self.nbytes(),
            "Buffer::copy_in: {} bytes into a buffer of {} {} ({} bytes)",
            bytes.len(),
            self.size,
            self.dtype,
            self.nbytes()
        );
        let mut g = self.lock_for_overwrite();
        let mem = g.as_mut().expect("allocated by lock");
        bytemuck::cast_slice_mut::<u64, u8>(mem)[..bytes.len()].copy_from_slice(bytes);
    }

    /// The buffer's contents as little-endian bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let g = self.lock();
        let mem = g.as_ref().expect("allocated by lock");
        bytemuck::cast_slice::<u64, u8>(mem)[..self.nbytes()].to_vec()
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
        if let Some(mem) = mem {
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
    let mut v: HostMem = Vec::new();
    v.try_reserve_exact(words).map_err(|e| e.to_string())?;
    v.resize(words, 0);
    Ok(v)
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

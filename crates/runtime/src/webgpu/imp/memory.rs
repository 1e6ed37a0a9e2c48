//! The `WEBGPU` device's memory: the pool of free GPU buffers, what the device's kernels and
//! copies share ([`Shared`]: error scopes, staging, waiting), and the [`Allocator`] that gives
//! every [`Buffer`](crate::Buffer) of the device a `wgpu::Buffer`.

use std::collections::HashMap;
use std::sync::mpsc;

use super::{Shared, storage_bytes};
use crate::allocator::{Allocator, Direction, RawMem, count_transfer};
use crate::device::DeviceError;

/// Which pool a GPU buffer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    /// `STORAGE | COPY_DST | COPY_SRC`: a kernel's buffer.
    Storage,
    /// `MAP_READ | COPY_DST`: where results are read back.
    Staging,
}

/// Free GPU buffers by kind and size, and their total bytes.
#[derive(Default)]
pub(super) struct Pool {
    free: HashMap<(Kind, u64), Vec<wgpu::Buffer>>,
    bytes: u64,
}

/// Kernels recorded into one command encoder at most before it is submitted (so the GPU starts
/// on a long schedule before its end).
const MAX_BATCH: usize = 32;

/// Work recorded but not yet submitted: kernels (and on-device copies) in one command encoder,
/// submitted together by [`Shared::flush`] (one submission per batch instead of per kernel).
#[derive(Default)]
pub(super) struct Pending {
    enc: Option<wgpu::CommandEncoder>,
    recorded: usize,
}

/// Pooled buffers kept at most, in bytes (beyond this, returned buffers are dropped).
const POOL_BYTES: u64 = 512 << 20;

impl Shared {
    /// Runs `f` inside validation and out-of-memory error scopes: wgpu's errors as `Err`.
    pub(super) fn scoped<T>(&self, f: impl FnOnce() -> T) -> Result<T, String> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let validation = pollster::block_on(validation.pop());
        let oom = pollster::block_on(oom.pop());
        let mut errors: Vec<String> = [validation, oom]
            .into_iter()
            .flatten()
            .map(|e| e.to_string())
            .collect();
        errors.append(&mut self.uncaptured.lock().unwrap_or_else(|e| e.into_inner()));
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors.join("\n"))
        }
    }

    /// A GPU buffer of `size` bytes from the pool (stale contents), or a new one.
    pub(super) fn take(&self, kind: Kind, size: u64) -> wgpu::Buffer {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = pool.free.get_mut(&(kind, size)).and_then(Vec::pop) {
            pool.bytes -= size;
            return b;
        }
        drop(pool);
        self.create(kind, size)
    }

    /// A new GPU buffer of `size` bytes (wgpu zero-initializes it).
    pub(super) fn create(&self, kind: Kind, size: u64) -> wgpu::Buffer {
        let usage = match kind {
            Kind::Storage => {
                wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC
            }
            Kind::Staging => wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        };
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage,
            mapped_at_creation: false,
        })
    }

    /// A timestamp query set of two queries and the buffer it resolves into.
    pub(super) fn timestamp_queries(&self) -> (wgpu::QuerySet, wgpu::Buffer) {
        let set = self.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: None,
            ty: wgpu::QueryType::Timestamp,
            count: 2,
        });
        let resolve = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        (set, resolve)
    }

    /// Maps `bufs` for reading once submission `index` has run, and waits for it.
    pub(super) fn map_and_wait(
        &self,
        bufs: &[&wgpu::Buffer],
        index: wgpu::SubmissionIndex,
    ) -> Result<(), String> {
        let (tx, rx) = mpsc::channel();
        for b in bufs {
            let tx = tx.clone();
            b.map_async(wgpu::MapMode::Read, .., move |r| {
                let _ = tx.send(r);
            });
        }
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            })
            .map_err(|e| format!("waiting for the GPU: {e}"))?;
        for _ in bufs {
            rx.recv()
                .map_err(|_| "a buffer map never completed".to_string())?
                .map_err(|e| format!("mapping a result buffer: {e}"))?;
        }
        Ok(())
    }

    /// The GPU time between a mapped timestamp buffer's two ticks, in seconds (unmaps it).
    pub(super) fn read_timestamps(&self, ts: &wgpu::Buffer) -> Result<f64, String> {
        let ticks: [u64; 2] = {
            let view = ts
                .get_mapped_range(..)
                .map_err(|e| format!("reading the timestamps: {e}"))?;
            let words: &[u64] = bytemuck::cast_slice(&view[..16]);
            [words[0], words[1]]
        };
        ts.unmap();
        let period_ns = f64::from(self.queue.get_timestamp_period());
        Ok(ticks[1].saturating_sub(ticks[0]) as f64 * period_ns / 1e9)
    }

    /// Records `f` into the pending command encoder (created on first use); a full batch is
    /// submitted. Nothing waits.
    pub(super) fn record(&self, f: impl FnOnce(&mut wgpu::CommandEncoder)) {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let enc = p.enc.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        });
        f(enc);
        p.recorded += 1;
        if p.recorded >= MAX_BATCH {
            Self::submit_pending(&self.queue, &mut p);
        }
    }

    /// Submits the pending work, if any (without waiting).
    pub(super) fn flush(&self) -> Option<wgpu::SubmissionIndex> {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        Self::submit_pending(&self.queue, &mut p)
    }

    /// Submits the pending work, then runs `f` with nothing else recorded meanwhile: what
    /// `f` queues (an upload, a submission of its own) comes after every kernel recorded before.
    /// Uploads need this: `Queue::write_buffer` runs at the start of the next submission, so
    /// without the flush it would overtake kernels recorded before it.
    pub(super) fn after_pending<T>(&self, f: impl FnOnce() -> T) -> T {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        Self::submit_pending(&self.queue, &mut p);
        f()
    }

    /// (Under the pending lock, so that batches are submitted in the order they were recorded.)
    fn submit_pending(queue: &wgpu::Queue, p: &mut Pending) -> Option<wgpu::SubmissionIndex> {
        p.recorded = 0;
        let enc = p.enc.take()?;
        Some(queue.submit([enc.finish()]))
    }

    /// Returns buffers to the pool (dropping them when it is full).
    pub(super) fn give(&self, kind: Kind, bufs: impl IntoIterator<Item = wgpu::Buffer>) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        for b in bufs {
            let size = b.size();
            if pool.bytes + size <= POOL_BYTES {
                pool.bytes += size;
                pool.free.entry((kind, size)).or_default().push(b);
            }
        }
    }
}

/// The device's memory: `wgpu::Buffer`s of `STORAGE | COPY_SRC | COPY_DST`, pooled by size.
pub(super) struct WebGpuAllocator {
    pub(super) shared: std::sync::Arc<Shared>,
}

impl WebGpuAllocator {
    fn gpu_buffer<'a>(&self, mem: &'a RawMem) -> Result<&'a wgpu::Buffer, DeviceError> {
        mem.downcast_ref::<wgpu::Buffer>()
            .ok_or_else(|| self.failed("a buffer that is no WebGPU buffer".into()))
    }

    fn failed(&self, message: String) -> DeviceError {
        DeviceError::Transfer {
            device: self.shared.name.to_string(),
            message,
        }
    }
}

impl Allocator for WebGpuAllocator {
    fn device(&self) -> &str {
        self.shared.name
    }

    fn alloc(&self, nbytes: usize, zeroed: bool) -> Result<RawMem, DeviceError> {
        let sh = &*self.shared;
        let size = storage_bytes(nbytes) as u64;
        let oom = |message: String| DeviceError::OutOfMemory {
            device: sh.name.to_string(),
            bytes: nbytes,
            message,
        };
        if size > sh.limits.max_buffer_size {
            return Err(oom(format!(
                "{size} bytes exceed the adapter's max_buffer_size of {} bytes ({} MiB)",
                sh.limits.max_buffer_size,
                sh.limits.max_buffer_size >> 20
            )));
        }
        let buf = sh
            .scoped(|| {
                if zeroed {
                    sh.create(Kind::Storage, size)
                } else {
                    sh.take(Kind::Storage, size)
                }
            })
            .map_err(|e| oom(format!("wgpu refused: {e}")))?;
        Ok(Box::new(buf))
    }

    fn free(&self, mem: RawMem, _nbytes: usize) {
        if let Ok(b) = mem.downcast::<wgpu::Buffer>() {
            self.shared.give(Kind::Storage, [*b]);
        }
    }

    fn copyin(&self, dst: &mut RawMem, src: &[u8]) -> Result<(), DeviceError> {
        let sh = &*self.shared;
        let buf = self.gpu_buffer(dst)?;
        if src.is_empty() {
            return Ok(());
        }
        count_transfer(Direction::HostToDevice, src.len());
        sh.scoped(|| {
            sh.after_pending(|| {
                // uploads are whole 4-byte words
                if src.len().is_multiple_of(4) {
                    sh.queue.write_buffer(buf, 0, src);
                } else {
                    let mut padded = src.to_vec();
                    padded.resize(storage_bytes(src.len()), 0);
                    sh.queue.write_buffer(buf, 0, &padded);
                }
            })
        })
        .map_err(|e| self.failed(format!("upload of {} bytes: {e}", src.len())))
    }

    fn copyout(&self, src: &RawMem, dst: &mut [u8]) -> Result<(), DeviceError> {
        let sh = &*self.shared;
        let buf = self.gpu_buffer(src)?;
        if dst.is_empty() {
            return Ok(());
        }
        count_transfer(Direction::DeviceToHost, dst.len());
        let size = storage_bytes(dst.len()) as u64;
        let mut staging = None;
        let result = sh.scoped(|| -> Result<(), String> {
            let stage = sh.take(Kind::Staging, size);
            let mut enc = sh
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            enc.copy_buffer_to_buffer(buf, 0, &stage, 0, size);
            let index = sh.after_pending(|| sh.queue.submit([enc.finish()]));
            sh.map_and_wait(&[&stage], index)?;
            {
                let view = stage
                    .get_mapped_range(..)
                    .map_err(|e| format!("reading the result: {e}"))?;
                dst.copy_from_slice(&view[..dst.len()]);
            }
            stage.unmap();
            staging = Some(stage);
            Ok(())
        });
        let result = result.and_then(|r| r);
        if result.is_ok() {
            sh.give(Kind::Staging, staging);
        }
        result.map_err(|e| self.failed(format!("download of {} bytes: {e}", dst.len())))
    }

    fn transfer(&self, dst: &mut RawMem, src: &RawMem, nbytes: usize) -> Result<bool, DeviceError> {
        let sh = &*self.shared;
        let (d, s) = (self.gpu_buffer(dst)?, self.gpu_buffer(src)?);
        if nbytes == 0 {
            return Ok(true);
        }
        count_transfer(Direction::DeviceToDevice, nbytes);
        let size = (storage_bytes(nbytes) as u64).min(d.size()).min(s.size());
        // recorded with the kernels, in order
        sh.scoped(|| sh.record(|enc| enc.copy_buffer_to_buffer(s, 0, d, 0, size)))
            .map_err(|e| self.failed(format!("copy of {nbytes} bytes on the device: {e}")))?;
        Ok(true)
    }

    fn synchronize(&self) -> Result<(), DeviceError> {
        self.shared
            .scoped(|| self.shared.flush())
            .map_err(|e| self.failed(format!("submitting the queued kernels: {e}")))?;
        self.shared
            .device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: None,
            })
            .map(|_| ())
            .map_err(|e| self.failed(format!("waiting for the GPU: {e}")))
    }
}

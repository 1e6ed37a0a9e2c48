//! Recording what schedules run on this thread, and running it again on other buffers: the
//! runtime half of a JIT (tinygrad's `CapturedJit`; the tensor layer's `Jit` decides which
//! buffers a replay binds).
//!
//! While a [`Recording`] is open ([`start_recording`] .. [`stop_recording`]), every item that
//! [`run_schedule`](crate::run_schedule) launches on this thread is kept as a [`Launch`]: its
//! device, AST, compiled kernel and buffers, in launch order. So is every upload of user data
//! from the host into a buffer ([`note_upload`], called by the tensor layer): a replay does not
//! repeat uploads, so the JIT must know which buffers got their data that way. Recordings nest (a JIT called inside another
//! JIT's function): each open recording sees every launch.
//!
//! [`replay`] runs launches again with other buffers bound to their slots, without scheduling,
//! compiling or cache look-ups: it allocates the buffers that are not yet, checks each against
//! its slot's extent (what the kernel's indexing reaches), launches in order and flushes each
//! device it used.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tinygrad_schedule::ScheduleItem;
use tinygrad_uop::UOp;

use crate::Buffer;
use crate::device::{DeviceError, get_device};
use crate::realize::{Entry, Prepared, check_extents, launch_prepared, var_values};

/// A kernel's variable: its name and inclusive bounds.
pub type KernelVar = (Arc<str>, i64, i64);

/// One launched item: a kernel, or a copy between buffers, with the buffers of its slots.
#[derive(Clone)]
pub struct Launch {
    device: &'static str,
    ast: UOp,
    bufs: Vec<Arc<Buffer>>,
    entry: Option<Entry>,
    /// The values its variables had.
    values: Vec<i64>,
}

impl Launch {
    /// The device it ran on (for a copy: the destination's).
    pub fn device(&self) -> &'static str {
        self.device
    }

    /// The kernel AST (a bare `Copy` for a copy).
    pub fn ast(&self) -> &UOp {
        &self.ast
    }

    /// The buffers bound to its slots (slot 0 is the output; a copy's slot 1 is its source).
    pub fn bufs(&self) -> &[Arc<Buffer>] {
        &self.bufs
    }

    /// The kernel's name, or `copy`.
    pub fn name(&self) -> &str {
        self.entry.as_ref().map_or("copy", |e| e.1.as_str())
    }

    /// Whether it is a copy between buffers (no kernel).
    pub fn is_copy(&self) -> bool {
        self.entry.is_none()
    }

    /// The kernel's variables (name and bounds, in the order their values are passed) with the
    /// values they had in this launch.
    pub fn vars(&self) -> Vec<(KernelVar, i64)> {
        match &self.entry {
            Some(e) => {
                e.4.iter()
                    .cloned()
                    .zip(self.values.iter().copied())
                    .collect()
            }
            None => Vec::new(),
        }
    }
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {} {:?}", self.name(), self.device, self.bufs)
    }
}

/// What ran on this thread while a recording was open.
#[derive(Default, Debug)]
pub struct Recording {
    /// Every launched item, in order.
    pub launches: Vec<Launch>,
    /// The ids of the buffers data was uploaded into from the host, in order.
    pub uploads: Vec<u64>,
    /// The first buffer id made after the recording started: a buffer with a smaller id
    /// existed before ([`Buffer::id`]s only grow).
    pub first_buffer_id: u64,
}

thread_local! {
    static OPEN: RefCell<Vec<Recording>> = const { RefCell::new(Vec::new()) };
}

/// Opens a recording on this thread (inside an open one: a nested recording, which sees the
/// same launches).
pub fn start_recording() {
    let first_buffer_id = Buffer::next_id();
    OPEN.with(|o| {
        o.borrow_mut().push(Recording {
            first_buffer_id,
            ..Default::default()
        });
    });
}

/// Closes the innermost open recording and returns it.
///
/// # Panics
/// If no recording is open on this thread.
pub fn stop_recording() -> Recording {
    OPEN.with(|o| o.borrow_mut().pop())
        .expect("stop_recording: no recording is open on this thread")
}

/// Whether a recording is open on this thread.
pub fn is_recording() -> bool {
    OPEN.with(|o| !o.borrow().is_empty())
}

/// Called by `run_schedule` with what it is about to launch.
pub(crate) fn record(device: &'static str, items: &[ScheduleItem], prepared: &[Prepared]) {
    if !is_recording() {
        return;
    }
    let launches: Vec<Launch> = items
        .iter()
        .zip(prepared)
        .map(|(item, (bufs, entry, values))| Launch {
            device,
            ast: item.ast.clone(),
            bufs: bufs.clone(),
            entry: entry.clone(),
            values: values.clone(),
        })
        .collect();
    push_launches(&launches);
}

fn push_launches(launches: &[Launch]) {
    OPEN.with(|o| {
        for r in o.borrow_mut().iter_mut() {
            r.launches.extend_from_slice(launches);
        }
    });
}

/// Tells the open recordings that user data was uploaded from the host into buffer `id` (the
/// tensor layer calls it when it makes a tensor from host data; a device's own writes through
/// the host — a copy between devices, an interpreter's results — are no uploads).
pub fn note_upload(id: u64) {
    OPEN.with(|o| {
        for r in o.borrow_mut().iter_mut() {
            r.uploads.push(id);
        }
    });
}

/// Runs `launches` again, each with `bufs[i]` bound to the slots of `launches[i]` instead of
/// the buffers it ran with, and its variables given the values in `var_vals` (by name): no
/// scheduling, no compiling. Each new buffer must have the dtype of the one it replaces and
/// cover the slot's extent; buffers not yet allocated are allocated first (an output slot
/// written whole is not zeroed), so running out of memory is an `Err` before anything runs. An
/// open recording records the replayed launches too.
///
/// # Errors
/// A buffer that does not fit its slot, a variable without a value or outside its bounds, an
/// allocation that fails, a device that is missing, a copy that fails.
///
/// # Panics
/// If `bufs` and `launches` differ in length, or a launch gets a different number of buffers.
pub fn replay(
    launches: &[Launch],
    bufs: &[Vec<Arc<Buffer>>],
    var_vals: &HashMap<Arc<str>, i64>,
) -> Result<(), DeviceError> {
    assert_eq!(
        launches.len(),
        bufs.len(),
        "replay: {} launches, {} buffer lists",
        launches.len(),
        bufs.len()
    );
    let start = Instant::now();
    let mut prepared: Vec<Prepared> = Vec::with_capacity(launches.len());
    for (l, b) in launches.iter().zip(bufs) {
        assert_eq!(
            l.bufs.len(),
            b.len(),
            "replay: {} binds {} buffers, got {}",
            l.name(),
            l.bufs.len(),
            b.len()
        );
        for (slot, (old, new)) in l.bufs.iter().zip(b).enumerate() {
            let own_device = l.is_copy() && slot == 1 || *new.device == *l.device;
            if new.dtype != old.dtype || !own_device {
                return Err(DeviceError::Launch {
                    kernel: l.name().to_string(),
                    message: format!(
                        "slot {slot} was captured with {old:?}, replayed with {new:?}"
                    ),
                });
            }
        }
        for (i, x) in b.iter().enumerate() {
            let read = b[1..].iter().any(|o| o.id() == x.id());
            x.try_allocate(i == 0 && !read)?;
        }
        let values = match &l.entry {
            Some(e) if !e.4.is_empty() => var_values(&e.1, &e.4, var_vals)?,
            _ => Vec::new(),
        };
        match &l.entry {
            Some(e) => check_extents(&e.3, b, &e.1)?,
            None if b[0].size != b[1].size => {
                return Err(DeviceError::Launch {
                    kernel: "copy".into(),
                    message: format!("copy of {:?} into {:?}", b[1], b[0]),
                });
            }
            None => {}
        }
        prepared.push((b.clone(), l.entry.clone(), values));
    }
    if is_recording() {
        let again: Vec<Launch> = launches
            .iter()
            .zip(bufs)
            .zip(&prepared)
            .map(|((l, b), p)| Launch {
                bufs: b.clone(),
                values: p.2.clone(),
                ..l.clone()
            })
            .collect();
        push_launches(&again);
    }
    // consecutive launches on one device run (and flush) together
    let mut lo = 0;
    while lo < launches.len() {
        let dev_name = launches[lo].device;
        let hi = launches[lo..]
            .iter()
            .position(|l| l.device != dev_name)
            .map_or(launches.len(), |k| lo + k);
        let dev = get_device(dev_name)?;
        launch_prepared(dev.as_ref(), &prepared[lo..hi], start)?;
        lo = hi;
    }
    Ok(())
}

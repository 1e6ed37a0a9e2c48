//! What the tensor layer tells an open capture: which tensor handles the function read
//! holding a buffer, gave new values to, whose gradients it set, which buffers hold `rand` keys
//! (thread-local, one log per open recording).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use tinygrad_runtime::capture::{self, Recording};
use tinygrad_schedule::is_buffer_view;
use tinygrad_uop::UOp;

use crate::Tensor;
use crate::tensor::{Inner, next_handle_id, view_buffer};

use super::plan::Target;

/// What happened to tensor handles while a call was recorded.
#[derive(Default)]
pub(super) struct Log {
    /// Handles stamped below this existed before the call.
    pub(super) handles_from: u64,
    /// The input handles (their buffers are inputs, not state), by handle: the input's index.
    pub(super) inputs: HashMap<usize, usize>,
    /// (handle, buffer id): a handle that existed before the call was read holding a view of
    /// the buffer.
    pub(super) reads: HashMap<(usize, u64), Weak<Inner>>,
    /// Handles that existed before the call and were given a new graph.
    pub(super) writes: HashMap<usize, Weak<Inner>>,
    /// Tensors whose gradient was set.
    pub(super) grads: HashMap<usize, Weak<Inner>>,
    /// The structure of each graph realized (unbound: [`tinygrad_schedule::graph_key`]), in
    /// order: two calls that launch the same kernels may still build different graphs (a size
    /// taken from a variable's value instead of the variable), which one capture cannot serve.
    pub(super) graphs: Vec<u64>,
    /// Buffers holding a `rand` call key: buffer id -> (device, words drawn).
    pub(super) rand_keys: HashMap<u64, (String, u64)>,
    /// Buffers written in place ([`Tensor::assign_in_place`]): a replay writes into the buffer
    /// the tensor holds then.
    pub(super) in_place: std::collections::HashSet<u64>,
    /// The first tensor read back to the host (`item`, `to_vec`, `tolist`, ...) during the
    /// call, described: a replay would keep whatever the function made of its values.
    pub(super) host_read: Option<String>,
}

impl Log {
    /// How a replay finds this handle: an input, or a tensor that existed before the call.
    pub(super) fn target(&self, inner: &Arc<Inner>) -> Option<Target> {
        match self.inputs.get(&key(inner)) {
            Some(&i) => Some(Target::Input(i)),
            None if inner.created < self.handles_from => {
                Some(Target::Handle(Arc::downgrade(inner)))
            }
            None => None,
        }
    }
}

thread_local! {
    static LOGS: RefCell<Vec<Log>> = const { RefCell::new(Vec::new()) };
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

pub(super) fn key(inner: &Arc<Inner>) -> usize {
    Arc::as_ptr(inner) as usize
}

/// [`Tensor::assign_in_place`] wrote into buffer `id` (after reading the handle that holds it).
pub(crate) fn note_in_place(id: u64) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            log.in_place.insert(id);
        }
    });
}

/// A tensor's values are read back to the host (`what` describes it).
pub(crate) fn note_host_read(what: impl FnOnce() -> String) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    let what = what();
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            log.host_read.get_or_insert_with(|| what.clone());
        }
    });
}

/// `Tensor::uop` read a handle.
pub(crate) fn note_read(inner: &Arc<Inner>, u: &UOp) {
    if !ACTIVE.with(Cell::get) || !is_buffer_view(u) {
        return;
    }
    let Some(buf) = view_buffer(u) else { return };
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            if inner.created < log.handles_from && !log.inputs.contains_key(&key(inner)) {
                log.reads
                    .entry((key(inner), buf.id()))
                    .or_insert_with(|| Arc::downgrade(inner));
            }
        }
    });
}

/// A graph is about to be scheduled.
pub(crate) fn note_graph(outs: &[UOp]) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    let key = tinygrad_schedule::graph_key(&tinygrad_schedule::vars::unbind(outs).0);
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            log.graphs.push(key);
        }
    });
}

/// A handle was given a new graph.
pub(crate) fn note_write(inner: &Arc<Inner>) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            if inner.created < log.handles_from {
                log.writes
                    .entry(key(inner))
                    .or_insert_with(|| Arc::downgrade(inner));
            }
        }
    });
}

/// A tensor's gradient was set (or accumulated into).
pub(crate) fn note_grad(inner: &Arc<Inner>) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            log.grads
                .entry(key(inner))
                .or_insert_with(|| Arc::downgrade(inner));
        }
    });
}

/// Whether a Jit capture is recording on this thread.
pub(crate) fn capturing() -> bool {
    ACTIVE.with(Cell::get)
}

/// `rand` uploaded its call key (drawing `num` words on `device`) into `key`.
pub(crate) fn note_rand_key(key_tensor: &Tensor, device: &str, num: u64) {
    if !ACTIVE.with(Cell::get) {
        return;
    }
    let Some(buf) = view_buffer(
        &key_tensor
            .inner
            .uop
            .read()
            .unwrap_or_else(|e| e.into_inner()),
    ) else {
        return;
    };
    LOGS.with(|l| {
        for log in l.borrow_mut().iter_mut() {
            log.rand_keys.insert(buf.id(), (device.to_string(), num));
        }
    });
}

/// An open recording of one call: closed (and dropped) on every path out, a panic included.
pub(super) struct Recorder {
    pub(super) open: bool,
}

impl Recorder {
    pub(super) fn start(inputs: &[Tensor]) -> Recorder {
        let log = Log {
            handles_from: next_handle_id(),
            inputs: inputs
                .iter()
                .enumerate()
                .rev()
                .map(|(i, t)| (key(&t.inner), i))
                .collect(),
            ..Default::default()
        };
        LOGS.with(|l| l.borrow_mut().push(log));
        ACTIVE.with(|a| a.set(true));
        capture::start_recording();
        Recorder { open: true }
    }

    pub(super) fn stop(mut self) -> (Recording, Log) {
        self.open = false;
        self.close()
    }

    fn close(&mut self) -> (Recording, Log) {
        let rec = capture::stop_recording();
        let log = LOGS.with(|l| {
            let mut l = l.borrow_mut();
            let log = l.pop().expect("a log per open recorder");
            ACTIVE.with(|a| a.set(!l.is_empty()));
            log
        });
        (rec, log)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.open {
            let _ = self.close();
        }
    }
}

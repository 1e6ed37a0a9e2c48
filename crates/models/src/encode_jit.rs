//! [`SentenceEncoder::encode_ids`](crate::SentenceEncoder::encode_ids) through the JIT: the
//! kernels of one input shape are captured once and replayed (tinygrad's examples wrap their
//! model calls in `TinyJit` the same way). A replay skips building the graph and scheduling,
//! ~1.3 ms of a 5 ms all-MiniLM-L6-v2 sentence on a 2-vCPU Xeon.
//!
//! The model's weights are inputs of the captured function, passed anew at every call, so a
//! replay reads the tensors the model holds now: a weight replaced by another tensor, or
//! assigned to, is what the next call uses (a weight of another shape or dtype is captured
//! again). A capture is kept per input shape, pooling mode, configuration and weight names, so
//! changing any of the encoder's public fields makes a new one. A call the JIT cannot serve —
//! another thread holds the captures, or the capture failed — runs without it; `JIT=0` turns it
//! off.

use std::sync::{Mutex, TryLockError};

use tinygrad_tensor::nn::Parameters;
use tinygrad_tensor::{Jit, JitError, OnMismatch, Tensor};

use crate::bert::{Bert, BertConfig, Pooled};
use crate::error::{ModelError, Result};
use crate::weights::Weights;
use tinygrad_tensor::jit::Plain;

/// The function a capture runs: `[ids, mask, weights...]` to `[embeddings]`.
type EncodeFn = Box<dyn FnMut(&[Tensor]) -> Vec<Tensor> + Send>;

/// One shape's capture.
type EncodeJit = Jit<Plain<EncodeFn>>;

/// What a capture was made for besides the input shape: the pooling, the configuration and the
/// weight names its function builds the model from (all public fields a user may change
/// between calls; none of them shows in the capture's inputs).
#[derive(PartialEq)]
struct Made {
    shape: (usize, usize),
    how: Pooled,
    config: BertConfig,
    names: Vec<String>,
}

/// Captures kept (the least recently used is dropped).
// a replay saves ~1.3 ms of a 5 ms MiniLM sentence on Xeon (see docs/performance.md)
const MAX_SHAPES: usize = 8;

/// Captured encodes, most recently used last.
#[derive(Default)]
pub(crate) struct EncodeJits {
    entries: Mutex<Vec<(Made, EncodeJit)>>,
}

impl EncodeJits {
    /// Calls replayed by the captures held now.
    pub(crate) fn replays(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.iter().map(|(_, j)| j.replays()).sum()
    }

    /// The embeddings of `input`/`mask` (checked, on the model's device) through the capture
    /// made for this shape, pooling, configuration and weight names, realized; `None` when the
    /// call is to run without the JIT (another thread is encoding, or the capture failed: it
    /// is dropped, and a later call of the shape captures again).
    pub(crate) fn run(
        &self,
        bert: &Bert,
        how: &Pooled,
        input: &Tensor,
        mask: &Tensor,
    ) -> Option<Result<Tensor>> {
        let shape = input.shape();
        let named = bert.named_parameters("");
        let made = Made {
            shape: (shape[0], shape[1]),
            how: *how,
            config: bert.config.clone(),
            names: named.iter().map(|(n, _)| n.clone()).collect(),
        };
        let mut entries = match self.entries.try_lock() {
            Ok(e) => e,
            // a panic inside an earlier call (a misshapen weight): its captures may be half made
            Err(TryLockError::Poisoned(p)) => {
                let mut e = p.into_inner();
                e.clear();
                e
            }
            // another thread is encoding: run beside it rather than wait
            Err(TryLockError::WouldBlock) => return None,
        };
        let (made, mut jit) = match entries.iter().position(|(m, _)| *m == made) {
            Some(i) => entries.remove(i),
            None => {
                if entries.len() >= MAX_SHAPES {
                    entries.remove(0);
                }
                let jit = capture(&made);
                (made, jit)
            }
        };
        let mut inputs = vec![input.clone(), mask.clone()];
        inputs.extend(named.into_iter().map(|(_, t)| t));
        match jit.call(&inputs) {
            Ok(mut out) if out.len() == 1 => {
                entries.push((made, jit));
                Some(Ok(out.remove(0)))
            }
            Err(JitError::Device(e)) => Some(Err(ModelError::Device(e))),
            other => {
                if tinygrad_tensor::debug_level() >= 1 {
                    let why = other
                        .err()
                        .map_or("no output".to_string(), |e| e.to_string());
                    eprintln!(
                        "SentenceEncoder: shape {:?} runs without the JIT: {why}",
                        made.shape
                    );
                }
                None
            }
        }
    }
}

/// A JIT of the encode `made` describes (the weights themselves are the call's inputs `2..`).
fn capture(made: &Made) -> EncodeJit {
    let (names, config, how) = (made.names.clone(), made.config.clone(), made.how);
    // a weight of another shape makes the model fail to build: the call returns no output, and
    // it runs without the JIT, on the model as it is
    let f: EncodeFn = Box::new(move |x: &[Tensor]| {
        let tensors = names.iter().cloned().zip(x[2..].iter().cloned()).collect();
        match Bert::from_weights(config.clone(), &Weights::new("encode_ids", tensors)) {
            Ok(model) => vec![how.embed(&model, &x[0], &x[1])],
            Err(_) => Vec::new(),
        }
    });
    Jit::new(f).on_mismatch(OnMismatch::Recapture)
}

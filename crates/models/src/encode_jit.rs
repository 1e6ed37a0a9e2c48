//! [`SentenceEncoder::encode_ids`](crate::SentenceEncoder::encode_ids) through the JIT: the
//! kernels of one input shape are captured once and replayed (tinygrad's examples wrap their
//! model calls in `TinyJit` the same way). A replay skips building the graph and scheduling,
//! ~1.3 ms of a 5 ms all-MiniLM-L6-v2 sentence on a 2-vCPU Xeon.
//!
//! The model's weights are inputs of the captured function, passed anew at every call, so a
//! replay reads the tensors the model holds now: a weight replaced by another tensor, or
//! assigned to, is what the next call uses (a weight of another shape or dtype is captured
//! again). A call the JIT cannot serve — another thread holds the captures, or the capture
//! failed — runs without it; `JIT=0` turns it off.

use std::sync::Mutex;

use tinygrad_tensor::nn::Parameters;
use tinygrad_tensor::{Jit, JitError, OnMismatch, Tensor};

use crate::bert::{Bert, Pooled};
use crate::error::{ModelError, Result};
use crate::weights::Weights;
use tinygrad_tensor::jit::Plain;

/// The function a capture runs: `[ids, mask, weights...]` to `[embeddings]`.
type EncodeFn = Box<dyn FnMut(&[Tensor]) -> Vec<Tensor> + Send>;

/// One shape's capture.
type EncodeJit = Jit<Plain<EncodeFn>>;

/// A `(batch, len)` shape and its capture (`None`: the JIT failed on it).
type Entry = ((usize, usize), Option<EncodeJit>);

/// Input shapes whose captures are kept (the least recently used is dropped).
const MAX_SHAPES: usize = 8;

/// Captured encodes by `(batch, len)`; `None` for a shape the JIT failed on (run without it).
#[derive(Default)]
pub(crate) struct EncodeJits {
    entries: Mutex<Vec<Entry>>,
}

impl EncodeJits {
    /// Calls replayed by the captures held now.
    pub(crate) fn replays(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .filter_map(|(_, j)| j.as_ref().map(Jit::replays))
            .sum()
    }

    /// The embeddings of `input`/`mask` (checked, on the model's device) through this shape's
    /// capture, realized; `None` when the call is to run without the JIT.
    pub(crate) fn run(
        &self,
        bert: &Bert,
        how: &Pooled,
        input: &Tensor,
        mask: &Tensor,
    ) -> Option<Result<Tensor>> {
        let shape = input.shape();
        let key = (shape[0], shape[1]);
        // another thread is encoding: run beside it rather than wait
        let mut entries = self.entries.try_lock().ok()?;
        let at = match entries.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                if entries.len() >= MAX_SHAPES {
                    entries.remove(0);
                }
                entries.push((key, Some(capture(bert, *how))));
                entries.len() - 1
            }
        };
        // most recently used last
        let entry = entries.remove(at);
        entries.push(entry);
        let last = entries.last_mut().expect("just pushed");
        let jit = last.1.as_mut()?;
        let named = bert.named_parameters("");
        let mut inputs = vec![input.clone(), mask.clone()];
        inputs.extend(named.into_iter().map(|(_, t)| t));
        match jit.call(&inputs) {
            Ok(mut out) if out.len() == 1 => Some(Ok(out.remove(0))),
            Err(JitError::Device(e)) => Some(Err(ModelError::Device(e))),
            other => {
                if tinygrad_tensor::debug_level() >= 1 {
                    let why = other
                        .err()
                        .map_or("no output".to_string(), |e| e.to_string());
                    eprintln!("SentenceEncoder: shape {key:?} runs without the JIT: {why}");
                }
                last.1 = None;
                None
            }
        }
    }
}

/// A JIT of the encode for `bert`'s configuration and weight names (the weights themselves are
/// the call's inputs `2..`).
fn capture(bert: &Bert, how: Pooled) -> EncodeJit {
    let names: Vec<String> = bert
        .named_parameters("")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let config = bert.config.clone();
    // a weight of another shape makes the model fail to build: the call returns no output, and
    // the shape then runs without the JIT, on the model as it is
    let f: EncodeFn = Box::new(move |x: &[Tensor]| {
        let tensors = names.iter().cloned().zip(x[2..].iter().cloned()).collect();
        match Bert::from_weights(config.clone(), &Weights::new("encode_ids", tensors)) {
            Ok(model) => vec![how.embed(&model, &x[0], &x[1])],
            Err(_) => Vec::new(),
        }
    });
    Jit::new(f).on_mismatch(OnMismatch::Recapture)
}

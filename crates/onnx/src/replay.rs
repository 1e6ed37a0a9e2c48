//! Replaying a model's runs: per signature of its inputs (shapes and dtypes), the values known
//! before the model runs are computed once ([`Folded`]), and the rest of the graph is captured
//! through a [`Jit`] and replayed (see [`crate::OnnxModel`]).
//!
//! A replay is never stale: the `Jit` refuses a capture that read values back to the host (the
//! graph would be specialised to them) and one whose host uploads (constant tables an op makes
//! from its attributes and the shapes) differ between the two calls that make it; such a
//! signature's runs go node by node. Inputs of another shape or dtype are another signature.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use tinygrad_tensor::jit::Plain;
use tinygrad_tensor::{DType, Jit, JitError, Tensor};

use crate::error::{OnnxError, Result};
use crate::model::Core;
use crate::narrow::Narrow;
use crate::node::HostValues;

/// Input signatures kept at once (each with its capture); the oldest is dropped for a new one.
pub(crate) const MAX_SIGNATURES: usize = 8;

/// The shapes and dtypes of a run's inputs, in the model's input order, with the values of
/// those that are part of the signature ([`MAX_KEYED_VALUES`]).
type Key = Vec<(Vec<usize>, DType, Option<Vec<i64>>)>;

/// The function a signature's `Jit` captures.
type RunFn = Box<dyn FnMut(&[Tensor]) -> Vec<Tensor> + Send>;

/// A value known before the run: name, tensor (realized), narrow tag, host copy (small ones).
pub(crate) type KnownValue = (String, Tensor, Option<Narrow>, Option<Arc<HostValues>>);

/// What the first run of a signature computed ahead for the later ones.
pub(crate) struct Folded {
    /// The known values later nodes or the graph's outputs read.
    pub(crate) values: Vec<KnownValue>,
    /// The main graph's nodes left to run (indices, in order).
    pub(crate) rest: Vec<usize>,
    /// The values of subgraph nodes known before the run, by subgraph and name.
    pub(crate) nested: Arc<HashMap<(usize, String), KnownValue>>,
    /// The inputs whose values are part of the signature, with them (by input position).
    pub(crate) keyed: Vec<Option<Arc<HostValues>>>,
}

/// Once a model's runs could not be captured (they read values back), its integer and boolean
/// inputs of at most this many values become part of a run's signature (read on every run): a
/// model that branches on one (silero-vad's sample rate) is then captured once per value, its
/// branch known ahead. Not before: a model that only computes with such inputs (token ids of
/// a short sentence) keeps one capture for all their values.
pub(crate) const MAX_KEYED_VALUES: usize = 16;

/// Whether `t` is an input that can be part of the signature ([`MAX_KEYED_VALUES`]).
fn keyable(t: &Tensor) -> bool {
    (t.dtype().is_int() || t.dtype() == DType::BOOL) && t.numel() <= MAX_KEYED_VALUES
}

/// The host copy of an input whose values are part of the signature, or `None`.
fn keyed_values(t: &Tensor) -> Result<Option<Arc<HostValues>>> {
    if !keyable(t) {
        return Ok(None);
    }
    HostValues::read(t)
        .map(|h| h.map(Arc::new))
        .map_err(|message| OnnxError::Run {
            message: format!("reading a small integer input: {message}"),
        })
}

/// How a signature's later runs go.
enum Mode {
    /// Through a `Jit` (captured on its second and third calls, replayed after); `error` holds
    /// an error the captured function met, to return instead of the `Jit`'s.
    Jit {
        jit: Box<Jit<Plain<RunFn>>>,
        error: Arc<Mutex<Option<OnnxError>>>,
    },
    /// Node by node (the capture failed: why).
    Plain(String),
}

struct Entry {
    folded: Arc<Folded>,
    mode: Mode,
}

/// The signatures seen, oldest first.
#[derive(Default)]
pub(crate) struct Replays {
    entries: IndexMap<Key, Entry>,
    /// Replays of captures already dropped.
    dropped_replays: usize,
    /// Whether small integer inputs are part of the signature ([`MAX_KEYED_VALUES`]).
    keyed: bool,
}

impl Replays {
    /// Runs the model on `feeds` (its inputs in order, checked): folding on a new signature's
    /// first run, through its `Jit` after.
    pub(crate) fn run(&mut self, core: &Arc<Core>, feeds: &[Tensor]) -> Result<Vec<Tensor>> {
        let keyed = if self.keyed {
            feeds.iter().map(keyed_values).collect::<Result<Vec<_>>>()?
        } else {
            vec![None; feeds.len()]
        };
        let key: Key = feeds
            .iter()
            .zip(&keyed)
            .map(|(t, h)| {
                let values = h.as_ref().map(|h| {
                    h.ints
                        .clone()
                        .unwrap_or_else(|| h.floats.iter().map(|&v| i64::from(v != 0.0)).collect())
                });
                (t.shape(), t.dtype(), values)
            })
            .collect();
        if let Some(entry) = self.entries.get_mut(&key) {
            let capturing = matches!(entry.mode, Mode::Jit { .. });
            let outs = entry.run(core, feeds);
            if capturing
                && matches!(entry.mode, Mode::Plain(_))
                && !self.keyed
                && feeds.iter().any(keyable)
            {
                // the runs read values back, maybe of those inputs: key by their values
                self.dropped_replays = self.replays();
                self.entries.clear();
                self.keyed = true;
            }
            return outs;
        }
        let (outs, folded) = core.run_folding(feeds, keyed)?;
        if self.entries.len() >= MAX_SIGNATURES
            && let Some((_, old)) = self.entries.shift_remove_index(0)
        {
            self.dropped_replays += old.replays();
        }
        self.entries.insert(key, Entry::new(core, folded));
        Ok(outs)
    }

    /// Runs that were replays.
    pub(crate) fn replays(&self) -> usize {
        self.dropped_replays + self.entries.values().map(Entry::replays).sum::<usize>()
    }

    /// Each signature run node by node, and why.
    pub(crate) fn not_replayed(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|(key, e)| match &e.mode {
                Mode::Plain(why) => Some(format!("inputs {key:?}: {why}")),
                Mode::Jit { .. } => None,
            })
            .collect()
    }
}

impl Entry {
    fn new(core: &Arc<Core>, folded: Folded) -> Entry {
        let folded = Arc::new(folded);
        let error = Arc::new(Mutex::new(None));
        let f: RunFn = {
            let (core, folded, error) = (core.clone(), folded.clone(), error.clone());
            Box::new(move |xs: &[Tensor]| match core.run_folded(xs, &folded) {
                Ok(outs) => outs,
                Err(e) => {
                    *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    vec![]
                }
            })
        };
        // the uploads a run makes come from the graph's attributes and the inputs' shapes only
        // (values known before the run are folded; a read of any other value refuses the
        // capture), so a replay may reuse them; the Jit still compares them between captures
        let jit = Jit::new(f).constant_uploads(true);
        Entry {
            folded,
            mode: Mode::Jit {
                jit: Box::new(jit),
                error,
            },
        }
    }

    fn replays(&self) -> usize {
        match &self.mode {
            Mode::Jit { jit, .. } => jit.replays(),
            Mode::Plain(_) => 0,
        }
    }

    fn run(&mut self, core: &Arc<Core>, feeds: &[Tensor]) -> Result<Vec<Tensor>> {
        let Mode::Jit { jit, error } = &mut self.mode else {
            return core.run_folded(feeds, &self.folded);
        };
        let result = jit.call(feeds);
        if let Some(e) = error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        let why = match result {
            Ok(outs) => return Ok(outs),
            Err(JitError::Device(e)) => {
                return Err(OnnxError::Run {
                    message: e.to_string(),
                });
            }
            // inputs aliased otherwise than at the capture (the same tensor given twice):
            // this run goes node by node, the capture stays
            Err(e @ (JitError::Inputs(_) | JitError::Aliasing(_))) => {
                if tinygrad_tensor::debug_level() >= 1 {
                    eprintln!("onnx: this run is not replayed: {e}");
                }
                return core.run_folded(feeds, &self.folded);
            }
            Err(e) => e.to_string(),
        };
        if tinygrad_tensor::debug_level() >= 1 {
            eprintln!("onnx: runs on these inputs go node by node: {why}");
        }
        self.mode = Mode::Plain(why);
        core.run_folded(feeds, &self.folded)
    }
}

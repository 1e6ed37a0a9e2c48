//! Decoding several independent sequences with one model (continuous batching): each
//! [`Sequence`] holds its own KV cache and length; [`Decoder::prefill`] appends tokens to one,
//! and [`Decoder::decode_batch`] appends one token to each of several at once.
//!
//! A batched step runs the weight-bound products (the projections, the MLP, the output head)
//! once for all rows — decoding reads every weight once per step, whatever the rows — while
//! each row writes its keys and values to its own cache at its own position (all rows' writes
//! of a block in one schedule: [`Tensor::assign_in_place_all`]) and attends over its own cache
//! (a few small kernels per row and block). Each row's length is a bound [`Variable`] of its
//! own (`kv_len_0`, `kv_len_1`, ...), so steps compile no new kernels as the sequences grow.
//!
//! The step of each batch size runs under a [`Jit`] whose inputs are the tokens, the positions
//! and every row's cache: the first step of a size runs the forward (and compiles), the second
//! captures it, and later ones replay the captured kernels on whatever sequences fill the batch,
//! without building graphs or scheduling (on a 2-core CPU, SmolLM2-135M: 31 -> 20 ms per step
//! of one row, 125 -> 75-90 ms of eight). A size whose step cannot be captured runs without
//! it.
use std::sync::{Arc, Mutex};

use tinygrad_tensor::{BoundVar, DType, Jit, JitError, SInt, Tensor, Variable};

use super::attention::{Place, Span};
use super::config::DecoderConfig;
use super::model::{Decoder, Net};
use crate::error::{ModelError, Result};

/// One sequence's KV cache and length, for decoding several sequences with one model
/// ([`Decoder::new_sequence`], [`Decoder::prefill`], [`Decoder::decode_batch`]).
pub struct Sequence {
    /// Per block, keys and values `(1, kv_heads, context, head_dim)`, buffers of its own.
    cache: Vec<(Tensor, Tensor)>,
    /// Positions `0..len` of the cache hold keys and values.
    len: usize,
    /// The positions the cache holds at most.
    context: usize,
}

impl Sequence {
    /// The positions (tokens) the sequence holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no positions yet (new, or cleared).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The positions its cache can hold (the decoder's context when it was made).
    pub fn context(&self) -> usize {
        self.context
    }

    /// Rewinds to no positions, keeping the cache's buffers (to reuse the sequence for a new
    /// request: what a later step writes replaces the old keys and values, and no step attends
    /// past its own positions).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Decoder {
    /// A new empty sequence with its own KV cache of [`Decoder::context`] positions (fresh
    /// zeroed buffers, as [`Decoder::reset_cache`] makes them). The decoder's own cache is not
    /// touched. The cache takes `4 * 2 * layers * kv_heads * context * head_dim` bytes
    /// (SmolLM2-135M at the 4096 positions `load` picks: 189 MB): size the context
    /// ([`Decoder::set_context`]) to what the requests need, and reuse sequences
    /// ([`Sequence::clear`]).
    ///
    /// # Errors
    /// If the device fails.
    pub fn new_sequence(&self) -> Result<Sequence> {
        Ok(Sequence {
            cache: self.new_cache(1)?,
            len: 0,
            context: self.context(),
        })
    }

    /// Appends `tokens` (a prompt, or more of it) to `seq` at positions `seq.len()..` in one
    /// forward, and returns the logits (float32, `vocab`) after the last one. The positions are
    /// known numbers, as in [`Decoder::forward`]: each prompt length (and start) compiles its
    /// own kernels once.
    ///
    /// # Errors
    /// If `tokens` is empty or has a token outside the vocabulary, the sequence's length plus
    /// the tokens exceed its context, the sequence was made for another context than the
    /// decoder's now, or the device fails (the sequence is then left as it was, though its
    /// cache past its length may have been written).
    pub fn prefill(&self, seq: &mut Sequence, tokens: &[u32]) -> Result<Vec<f32>> {
        let what = "Decoder::prefill";
        if tokens.is_empty() {
            return Err(input(format!("{what}: no tokens")));
        }
        self.check_tokens(tokens, what)?;
        self.check_room(seq, tokens.len(), what, "")?;
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let input = Tensor::from_slice_on(&ids, &[1, ids.len()], &self.device);
        let place = Place::Shared {
            cache: &seq.cache,
            span: Span::Concrete { start: seq.len },
        };
        let out = self.run(&input, &place, false)?;
        let logits = out.cast(DType::FLOAT32).try_to_vec::<f32>()?;
        seq.len += tokens.len();
        Ok(logits)
    }

    /// One decode step of several sequences at once: `tokens[i]` is appended to `seqs[i]` at
    /// its own position (`seqs[i].len()`); returns each sequence's logits (float32, `vocab`),
    /// in order. The projections, the MLP and the output head run once for all the rows; each
    /// row writes to and attends over its own cache. Steps of the same batch size reuse their
    /// kernels whatever the positions (each row's position is a bound variable), and from the
    /// third step of a size on replay them under a `Jit` (see the [module docs](self)); the
    /// set of sequences may change from one step to the next.
    ///
    /// # Errors
    /// If `seqs` is empty or differs in length from `tokens`, a token is outside the
    /// vocabulary, a sequence is full (its length plus one would exceed its context) or was made
    /// for another context than the decoder's now, or the device fails (the sequences are then
    /// left as they were, though their caches past their lengths may have been written).
    pub fn decode_batch(
        &self,
        seqs: &mut [&mut Sequence],
        tokens: &[u32],
    ) -> Result<Vec<Vec<f32>>> {
        let what = "Decoder::decode_batch";
        if seqs.is_empty() {
            return Err(input(format!("{what}: no sequences")));
        }
        if seqs.len() != tokens.len() {
            return Err(input(format!(
                "{what}: {} sequences but {} tokens (one token per sequence)",
                seqs.len(),
                tokens.len()
            )));
        }
        self.check_tokens(tokens, what)?;
        for (i, seq) in seqs.iter().enumerate() {
            self.check_room(seq, 1, what, &format!(" {i}"))?;
        }
        let b = seqs.len();
        let ctx = self.context();
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = seqs.iter().map(|s| s.len as i32).collect();
        let input = Tensor::from_slice_on(&ids, &[b, 1], &self.device);
        let pos_t = Tensor::from_slice_on(&pos, &[b], &self.device);
        // each row's length a bound variable of its own (several in one schedule: distinct
        // names)
        let vars: Vec<BoundVar> = seqs
            .iter()
            .enumerate()
            .map(|(i, s)| Variable::new(&format!("kv_len_{i}"), 1, ctx).bind(s.len + 1))
            .collect();
        let mut io = vec![input, pos_t];
        for seq in seqs.iter() {
            for (k, v) in &seq.cache {
                io.extend([k.clone(), v.clone()]);
            }
        }
        let out = match self.jitted_step(Layout::Rows, &io, &vars)? {
            Some(out) => out,
            None => {
                let caches: Vec<&[(Tensor, Tensor)]> =
                    seqs.iter().map(|s| s.cache.as_slice()).collect();
                self.net.run(
                    &self.config,
                    self.cache_len,
                    &io[0],
                    &rows(caches, &io[1], &vars),
                    false,
                )?
            }
        };
        let logits = out.cast(DType::FLOAT32).try_to_vec::<f32>()?;
        for seq in seqs.iter_mut() {
            seq.len += 1;
        }
        let vocab = self.config.vocab_size;
        Ok(logits.chunks(vocab).map(<[f32]>::to_vec).collect())
    }

    /// The step of [`Decoder::decode_batch`] through the `Jit` of its batch size (made on the
    /// first step of that size; it captures on the second and replays from the third: no
    /// graphs built, nothing scheduled): the logits, or `None` where that batch size runs
    /// without a `Jit` (one that could not be captured is dropped, and the step runs again
    /// without it: it writes the same keys and values at the same positions).
    pub(super) fn jitted_step(
        &self,
        layout: Layout,
        io: &[Tensor],
        vars: &[BoundVar],
    ) -> Result<Option<Tensor>> {
        let mut steps = self.batch_steps.borrow_mut();
        let batch = io[1].shape()[0];
        let make = || {
            BatchStep::new(
                Arc::clone(&self.net),
                self.config.clone(),
                self.cache_len,
                layout,
            )
        };
        let slot = steps.entry((layout, batch)).or_insert_with(|| Some(make()));
        if slot.as_ref().is_some_and(|s| s.config != self.config) {
            // the configuration changed since: the step is made anew
            *slot = Some(make());
        }
        let Some(step) = slot else {
            return Ok(None);
        };
        match (step.call)(io, vars) {
            Ok(mut outs) if outs.len() == 1 => Ok(outs.pop()),
            Ok(_) => {
                *slot = None;
                Ok(None)
            }
            Err(e) => {
                let inner = step.failed.lock().unwrap_or_else(|p| p.into_inner()).take();
                match (inner, e) {
                    (Some(inner), _) => Err(inner),
                    (None, JitError::Device(d)) => Err(ModelError::Device(d)),
                    // (`JIT_CHECK`: a replay that differs from running the step is a bug)
                    (None, e @ JitError::Check(_)) => Err(input(format!(
                        "Decoder::decode_batch: the step's replay differs from running it: {e}"
                    ))),
                    (None, _) => {
                        *slot = None;
                        Ok(None)
                    }
                }
            }
        }
    }

    /// An error if a token is outside the vocabulary.
    pub(super) fn check_tokens(&self, tokens: &[u32], what: &str) -> Result<()> {
        let vocab = self.config.vocab_size;
        match tokens.iter().find(|&&t| t as usize >= vocab) {
            Some(bad) => Err(input(format!(
                "{what}: token {bad} is outside the vocabulary of {vocab}"
            ))),
            None => Ok(()),
        }
    }

    /// An error if `seq` (named `sequence{which}` in the message) cannot take `more` positions,
    /// or was made for another context than the decoder's.
    fn check_room(&self, seq: &Sequence, more: usize, what: &str, which: &str) -> Result<()> {
        if seq.context != self.context() {
            return Err(input(format!(
                "{what}: sequence{which} was made for a context of {} tokens, the decoder's is \
                 now {} (make a new one)",
                seq.context,
                self.context()
            )));
        }
        if seq.len + more > seq.context {
            return Err(input(format!(
                "{what}: sequence{which} holds {} tokens; {more} more exceed its context of {} \
                 tokens",
                seq.len, seq.context
            )));
        }
        Ok(())
    }
}

/// The per-row place of a batched decode step: row `i`'s cache `caches[i]`, its position
/// `pos[i]` and its attended length `vars[i]` (its position plus one).
fn rows<'a>(caches: Vec<&'a [(Tensor, Tensor)]>, pos: &Tensor, vars: &[BoundVar]) -> Place<'a> {
    Place::Rows {
        caches,
        pos: pos.clone(),
        ends: vars.iter().map(SInt::from).collect(),
    }
}

/// How a batched step's rows hold their caches (and so the Jit's inputs and variables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Layout {
    /// Each row a [`Sequence`] with a cache of its own: the inputs are the tokens, the
    /// positions and every row's cache (per row, per block, keys then values); the variables
    /// each row's length.
    Rows,
    /// Row `i` in slot `i` of a [`Slots`](super::slots::Slots) cache: the inputs are the
    /// tokens, the positions and the slots' cache (per block, keys then values); the
    /// variables each row's length, then the longest.
    Slots,
}

/// The place of a step of [`Slots`](super::slots::Slots): rows in slots `0..batch` of
/// `cache`, at positions `pos`; `vars` each row's length after the step, then the longest.
pub(super) fn slots_place<'a>(
    cache: &'a [(Tensor, Tensor)],
    pos: &Tensor,
    vars: &[BoundVar],
) -> Place<'a> {
    let (end, ends) = vars.split_last().expect("a slots step has variables");
    Place::Slots {
        cache,
        pos: pos.clone(),
        ends: ends.iter().map(SInt::from).collect(),
        end: SInt::from(end),
    }
}

/// The JIT'd function of a batched step.
type StepFn =
    dyn FnMut(&[Tensor], &[BoundVar]) -> std::result::Result<Vec<Tensor>, JitError> + Send;

/// [`Decoder::decode_batch`]'s step for one batch size under a [`Jit`]: its inputs are the
/// tokens `[batch, 1]`, the positions `[batch]` and every row's cache (per row, per block,
/// keys then values), its variables each row's attended length. The Jit takes the caches as
/// inputs, so that one capture serves whatever sequences fill the batch.
pub(super) struct BatchStep {
    /// The configuration the step was made with.
    config: DecoderConfig,
    /// The Jit's call.
    call: Box<StepFn>,
    /// An error of the forward inside the step (the Jit then only sees no output).
    failed: Arc<Mutex<Option<ModelError>>>,
}

impl BatchStep {
    /// The step of the layers `net` (of configuration `config` and context `cache_len`) for a
    /// batch whose rows' caches are held as `layout` says (the batch size is the inputs').
    fn new(net: Arc<Net>, config: DecoderConfig, cache_len: usize, layout: Layout) -> BatchStep {
        let failed = Arc::new(Mutex::new(None));
        let failed_in = Arc::clone(&failed);
        let c = config.clone();
        let layers = c.num_layers;
        let mut jit = Jit::with_vars(move |io: &[Tensor], vars: &[BoundVar]| {
            // per row (one for the slots' cache), per block, keys and values
            let caches: Vec<Vec<(Tensor, Tensor)>> = (0..io.len().saturating_sub(2) / 2 / layers)
                .map(|i| {
                    (0..layers)
                        .map(|l| {
                            let at = 2 + 2 * (i * layers + l);
                            (io[at].clone(), io[at + 1].clone())
                        })
                        .collect()
                })
                .collect();
            let place = match layout {
                Layout::Rows => rows(caches.iter().map(Vec::as_slice).collect(), &io[1], vars),
                Layout::Slots => slots_place(&caches[0], &io[1], vars),
            };
            match net.run(&c, cache_len, &io[0], &place, false) {
                Ok(logits) => vec![logits],
                Err(e) => {
                    *failed_in.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    Vec::new()
                }
            }
        });
        BatchStep {
            config,
            call: Box::new(move |io: &[Tensor], vars: &[BoundVar]| jit.call_vars(io, vars)),
            failed,
        }
    }
}

fn input(message: String) -> ModelError {
    ModelError::Input { message }
}

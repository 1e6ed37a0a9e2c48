//! KV cache slots for continuous batching ([`Slots`]): per block one cache `(slots, kv_heads,
//! context, head_dim)` that holds up to `slots` sequences, one per slot. [`Decoder::prefill_slot`]
//! appends a prompt to one slot; [`Decoder::decode_slots`] appends one token to each of the
//! slots `0..batch` at once, with the sequences at their own positions.
//!
//! Against [`Sequence`](super::Sequence)s (each with caches of its own, decoded together by
//! [`Decoder::decode_batch`]) the rows here attend together: every row's keys are in one
//! buffer, so a block's attention is a few kernels for the whole batch, each row masked to its
//! own positions, instead of a few kernels per row (SmolLM2-135M, 8 rows on 2 cores: 2,494
//! kernels per step down to about 800). The price is that the rows of a step must be the slots
//! `0..batch`: a server keeps its live sequences there by moving the last one into the slot
//! a finished one leaves ([`Slots::move_slot`]: its positions are copied).
//!
//! The slot index, a moved sequence's length and every row's length are bound [`Variable`]s, so
//! neither the slot a prompt goes to nor the positions compile new kernels; the steps of each
//! batch size run under a `Jit` as [`Decoder::decode_batch`]'s do.

use tinygrad_tensor::{BoundVar, DType, SInt, Tensor, Variable};

use super::attention::{Place, Span};
use super::batch::{Layout, slots_place};
use super::model::Decoder;
use crate::error::{ModelError, Result};

/// KV cache slots for up to [`Slots::count`] sequences decoded together
/// ([`Decoder::new_slots`], [`Decoder::prefill_slot`], [`Decoder::decode_slots`]).
pub struct Slots {
    /// Per block, keys and values `(count, kv_heads, context, head_dim)`.
    cache: Vec<(Tensor, Tensor)>,
    /// Positions `0..lens[s]` of slot `s` hold keys and values.
    lens: Vec<usize>,
    /// The positions a slot holds at most.
    context: usize,
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots")
            .field("lens", &self.lens)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl Slots {
    /// How many sequences the slots hold.
    pub fn count(&self) -> usize {
        self.lens.len()
    }

    /// The positions (tokens) slot `slot` holds.
    ///
    /// # Panics
    /// If `slot` is not below [`Slots::count`].
    pub fn len(&self, slot: usize) -> usize {
        assert!(
            slot < self.count(),
            "Slots::len: slot {slot} of {} slots",
            self.count()
        );
        self.lens[slot]
    }

    /// The positions each slot can hold (the decoder's context when they were made).
    pub fn context(&self) -> usize {
        self.context
    }

    /// Rewinds slot `slot` to no positions (for a new sequence: what later steps write
    /// replaces the old keys and values, and no step attends past a slot's own positions).
    ///
    /// # Panics
    /// If `slot` is not below [`Slots::count`].
    pub fn clear(&mut self, slot: usize) {
        assert!(
            slot < self.count(),
            "Slots::clear: slot {slot} of {} slots",
            self.count()
        );
        self.lens[slot] = 0;
    }

    /// Moves the sequence in slot `from` to slot `to` (its keys and values copied; what `to`
    /// held is replaced), leaving `from` empty: how the live sequences stay in the slots
    /// `0..batch` that [`Decoder::decode_slots`] steps. One set of kernels serves every pair of
    /// slots and every length.
    ///
    /// # Errors
    /// If a slot is not below [`Slots::count`], or the device fails (both slots are then
    /// left as they were, though `to`'s positions may have been overwritten).
    pub fn move_slot(&mut self, from: usize, to: usize) -> Result<()> {
        let n = self.count();
        if from >= n || to >= n {
            return Err(input(format!(
                "Slots::move_slot: slots {from} -> {to} of {n} slots"
            )));
        }
        let len = self.lens[from];
        if from != to && len > 0 {
            let at = |name: &str, slot: usize| Variable::new(name, 0, n - 1).bind(slot);
            let (src, dst) = (at("kv_from", from), at("kv_to", to));
            let moved = SInt::from(Variable::new("kv_moved", 1, self.context).bind(len));
            let part = |c: &Tensor, slot: &BoundVar| {
                let s = SInt::from(slot);
                let cs = c.shape();
                c.shrink_sym(&[
                    (s.clone(), s + 1),
                    (0.into(), cs[1].into()),
                    (0.into(), moved.clone()),
                    (0.into(), cs[3].into()),
                ])
            };
            let writes: Vec<(Tensor, Tensor)> = self
                .cache
                .iter()
                .flat_map(|(k, v)| [k, v])
                .map(|c| (part(c, &dst), part(c, &src)))
                .collect();
            let pairs: Vec<(&Tensor, &Tensor)> = writes.iter().map(|(t, v)| (t, v)).collect();
            Tensor::assign_in_place_all(&pairs)?;
        }
        self.lens[to] = len;
        if from != to {
            self.lens[from] = 0;
        }
        Ok(())
    }
}

impl Decoder {
    /// KV cache slots for `count` sequences of up to [`Decoder::context`] positions each
    /// (fresh zeroed buffers; the decoder's own cache is not touched). They take `4 * 2 *
    /// layers * kv_heads * context * head_dim` bytes per slot, as a
    /// [`Sequence`](super::Sequence) does.
    ///
    /// # Errors
    /// If `count` is 0, or the device fails.
    pub fn new_slots(&self, count: usize) -> Result<Slots> {
        if count == 0 {
            return Err(input("Decoder::new_slots: 0 slots".into()));
        }
        Ok(Slots {
            cache: self.new_cache(count)?,
            lens: vec![0; count],
            context: self.context(),
        })
    }

    /// Appends `tokens` (a prompt, or more of it) to slot `slot` at positions
    /// `slots.len(slot)..` in one forward, and returns the logits (float32, `vocab`) after
    /// the last one, as [`Decoder::prefill`] does for a [`Sequence`](super::Sequence). The
    /// slot is a bound variable: each prompt length compiles its kernels once, whatever the
    /// slot.
    ///
    /// # Errors
    /// If `slot` is not below the slots' count, `tokens` is empty or has a token outside the
    /// vocabulary, the slot's length plus the tokens exceed its context, the slots were made
    /// for another context than the decoder's now, or the device fails (the slot is then left
    /// as it was, though its cache past its length may have been written).
    pub fn prefill_slot(&self, slots: &mut Slots, slot: usize, tokens: &[u32]) -> Result<Vec<f32>> {
        let what = "Decoder::prefill_slot";
        let n = slots.count();
        if slot >= n {
            return Err(input(format!("{what}: slot {slot} of {n} slots")));
        }
        if tokens.is_empty() {
            return Err(input(format!("{what}: no tokens")));
        }
        self.check_tokens(tokens, what)?;
        self.check_slot_room(slots, slot, tokens.len(), what)?;
        let s = SInt::from(Variable::new("kv_slot", 0, n - 1).bind(slot));
        let view = |c: &Tensor| {
            let cs = c.shape();
            c.shrink_sym(&[
                (s.clone(), s.clone() + 1),
                (0.into(), cs[1].into()),
                (0.into(), cs[2].into()),
                (0.into(), cs[3].into()),
            ])
        };
        let cache: Vec<(Tensor, Tensor)> = slots
            .cache
            .iter()
            .map(|(k, v)| (view(k), view(v)))
            .collect();
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let input_ids = Tensor::from_slice_on(&ids, &[1, ids.len()], &self.device);
        let place = Place::Shared {
            cache: &cache,
            span: Span::Concrete {
                start: slots.lens[slot],
            },
        };
        let out = self.run(&input_ids, &place, false)?;
        let logits = out.cast(DType::FLOAT32).try_to_vec::<f32>()?;
        slots.lens[slot] += tokens.len();
        Ok(logits)
    }

    /// One decode step of the sequences in slots `0..tokens.len()`: `tokens[i]` is appended
    /// to slot `i` at its own position (`slots.len(i)`); returns each slot's logits (float32,
    /// `vocab`), in order. The projections, the MLP and the output head run once for all the
    /// rows, and each block's attention once for all of them (each row masked to its own
    /// positions). Steps of the same batch size reuse their kernels whatever the positions,
    /// and from the third step of a size on replay them under a `Jit`.
    ///
    /// # Errors
    /// If `tokens` is empty or longer than the slots' count, a token is outside the vocabulary,
    /// a slot is full (its length plus one would exceed its context), the slots were made for
    /// another context than the decoder's now, or the device fails (the slots' lengths are then
    /// left as they were).
    pub fn decode_slots(&self, slots: &mut Slots, tokens: &[u32]) -> Result<Vec<Vec<f32>>> {
        let what = "Decoder::decode_slots";
        let b = tokens.len();
        if b == 0 || b > slots.count() {
            return Err(input(format!(
                "{what}: {b} tokens for {} slots (one token for each of slots 0..batch)",
                slots.count()
            )));
        }
        self.check_tokens(tokens, what)?;
        for slot in 0..b {
            self.check_slot_room(slots, slot, 1, what)?;
        }
        let ctx = self.context();
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = slots.lens[..b].iter().map(|&l| l as i32).collect();
        let longest = slots.lens[..b].iter().max().map_or(1, |l| l + 1);
        let input_ids = Tensor::from_slice_on(&ids, &[b, 1], &self.device);
        let pos_t = Tensor::from_slice_on(&pos, &[b], &self.device);
        // each row's length a bound variable of its own (distinct names), then the longest
        let mut vars: Vec<BoundVar> = slots.lens[..b]
            .iter()
            .enumerate()
            .map(|(i, &l)| Variable::new(&format!("kv_len_{i}"), 1, ctx).bind(l + 1))
            .collect();
        vars.push(Variable::new("kv_end", 1, ctx).bind(longest));
        let mut io = vec![input_ids, pos_t];
        for (k, v) in &slots.cache {
            io.extend([k.clone(), v.clone()]);
        }
        let out = match self.jitted_step(Layout::Slots, &io, &vars)? {
            Some(out) => out,
            None => self.run(&io[0], &slots_place(&slots.cache, &io[1], &vars), false)?,
        };
        let logits = out.cast(DType::FLOAT32).try_to_vec::<f32>()?;
        for l in &mut slots.lens[..b] {
            *l += 1;
        }
        let vocab = self.config.vocab_size;
        Ok(logits.chunks(vocab).map(<[f32]>::to_vec).collect())
    }

    /// An error if slot `slot` cannot take `more` positions, or the slots were made for
    /// another context than the decoder's.
    fn check_slot_room(&self, slots: &Slots, slot: usize, more: usize, what: &str) -> Result<()> {
        if slots.context != self.context() {
            return Err(input(format!(
                "{what}: the slots were made for a context of {} tokens, the decoder's is now \
                 {} (make new ones)",
                slots.context,
                self.context()
            )));
        }
        let len = slots.lens[slot];
        if len + more > slots.context {
            return Err(input(format!(
                "{what}: slot {slot} holds {len} tokens; {more} more exceed its context of {} \
                 tokens",
                slots.context
            )));
        }
        Ok(())
    }
}

fn input(message: String) -> ModelError {
    ModelError::Input { message }
}

//! The seeded sampler: greedy, temperature, top-k and top-p over one row of logits.
//!
//! A draw walks the kept tokens most likely first and stops where the cumulative probability
//! passes a uniform number; a language model's distribution is peaked, so that walk usually
//! ends within the first few tokens. The sampler therefore sorts only the likely tokens (those
//! within a factor e^-8 of the most likely, moved to the front in one pass), and sorts further
//! ([`PREFIX`] tokens, doubling, found in linear time) only when the top-p cut or the draw
//! reaches past them: a draw costs about one pass over the logits (their weights) instead of a
//! sort of the whole vocabulary, which a server pays for every stream at every step (49,152
//! uniformly spread logits, the worst case for the front, on Zen 4: sorting them all 1.66 ms,
//! this 0.74 ms; see docs/performance.md). The weights themselves are float32 exponentials of
//! a polynomial the compiler vectorizes (`exp_nonpositive`: the same bits on every machine),
//! summed in float64 (SmolLM2's draws in tinygrad-serve on Zen 4: 0.37 -> 0.27 ms).
//! [`Sampler::distribution`] sorts everything and computes the same numbers with the same
//! operations, so a draw is exactly a walk of it.

use std::cmp::Ordering;

use tinygrad_tensor::nn::attention::exp_nonpositive;

use crate::error::{ModelError, Result};

/// How the next token is chosen from the logits.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingOptions {
    /// 0 picks the most likely token (greedy; ties go to the lowest id, as `argmax`); above 0
    /// the logits are divided by it before the softmax.
    pub temperature: f64,
    /// Keep only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p` (1: all).
    pub top_p: f64,
    /// The random generator's seed: the same seed, prompt and options give the same tokens.
    pub seed: u64,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        SamplingOptions {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

/// The weight (relative to the most likely token's 1) from which a draw sorts tokens before
/// walking them: usually they hold the draw, and no other token needs sorting.
const FRONT_WEIGHT: f64 = 3.4e-4; // e^-8

/// Tokens sorted at once when a walk gets past the sorted part (doubling from there).
pub const PREFIX: usize = 64;

/// A seeded sampler over logits (on the host: one row of `vocab` floats per token).
pub struct Sampler {
    opts: SamplingOptions,
    state: u64,
    /// The kept tokens, most likely first as far as sorted (reused from draw to draw).
    order: Vec<u32>,
    /// Each token's weight `exp((logit - top) / temperature)` (0 outside the top-k set).
    weight: Vec<f64>,
}

impl Sampler {
    /// A sampler with `opts`.
    ///
    /// # Errors
    /// If the temperature is negative or not finite, or `top_p` is outside `(0, 1]`.
    pub fn new(opts: SamplingOptions) -> Result<Sampler> {
        if !(opts.temperature.is_finite() && opts.temperature >= 0.0) {
            return Err(ModelError::Input {
                message: format!("temperature {} must be a number >= 0", opts.temperature),
            });
        }
        if !(opts.top_p > 0.0 && opts.top_p <= 1.0) {
            return Err(ModelError::Input {
                message: format!("top_p {} must be in (0, 1]", opts.top_p),
            });
        }
        let state = opts.seed ^ 0x9e37_79b9_7f4a_7c15;
        Ok(Sampler {
            opts,
            state,
            order: Vec::new(),
            weight: Vec::new(),
        })
    }

    /// A uniform draw in `[0, 1)` (SplitMix64).
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The probabilities the sampler draws from: softmax of `logits / temperature` over the
    /// top-k set (its total summed in token order), cut to the smallest most-likely-first
    /// prefix whose cumulative probability reaches `top_p` (none when `top_p` is 1) and then
    /// renormalized, as `(token, probability)` most likely first (ties: the lower id first).
    /// Greedy (temperature 0) gives the single argmax with probability 1.
    pub fn distribution(&self, logits: &[f32]) -> Vec<(u32, f64)> {
        if self.greedy(logits) {
            return vec![(argmax(logits), 1.0)];
        }
        let (mut order, mut weight) = (Vec::new(), Vec::new());
        let total = weigh(&self.opts, logits, &mut order, &mut weight);
        let mut walk = Walk::new(&mut order, logits);
        walk.sort_to(usize::MAX);
        let (keep, norm) = walk.cut(&weight, total, self.opts.top_p);
        (0..keep)
            .map(|i| {
                let tok = walk.at(i);
                (tok, renormalized(weight[tok as usize] / total, norm))
            })
            .collect()
    }

    /// The next token for one row of logits: the first token of [`Sampler::distribution`]'s
    /// order whose cumulative probability passes a uniform draw (computed without sorting
    /// the whole vocabulary; no draw is taken when one token is kept).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if self.greedy(logits) {
            return argmax(logits);
        }
        let total = weigh(&self.opts, logits, &mut self.order, &mut self.weight);
        let mut order = std::mem::take(&mut self.order);
        let mut walk = Walk::new(&mut order, logits);
        walk.sort_likely(&self.weight, FRONT_WEIGHT);
        let (keep, norm) = walk.cut(&self.weight, total, self.opts.top_p);
        let tok = if keep == 1 {
            walk.at(0)
        } else {
            let u = self.uniform();
            let mut cum = 0.0;
            let mut pick = None;
            for i in 0..keep {
                let tok = walk.at(i);
                cum += renormalized(self.weight[tok as usize] / total, norm);
                if u < cum {
                    pick = Some(tok);
                    break;
                }
            }
            // (the cumulative sum fell short of 1 by rounding: the last kept token)
            pick.unwrap_or_else(|| walk.at(keep - 1))
        };
        self.order = order;
        tok
    }

    /// Whether the choice is the argmax (temperature 0, or at most one logit).
    fn greedy(&self, logits: &[f32]) -> bool {
        self.opts.temperature == 0.0 || logits.len() <= 1
    }
}

/// The top-k set into `order` (in no particular order), each kept token's weight
/// `exp((logit - top) / temperature)` into `weight` (`top` the largest logit; 0 for the others;
/// computed in float32), and their total (in float64, in a fixed order).
fn weigh(
    opts: &SamplingOptions,
    logits: &[f32],
    order: &mut Vec<u32>,
    weight: &mut Vec<f64>,
) -> f64 {
    let n = logits.len();
    let k = match opts.top_k {
        0 => n,
        k => k.min(n),
    };
    order.clear();
    order.extend(0..n as u32);
    let before = most_likely_first(logits);
    if k < n {
        order.select_nth_unstable_by(k - 1, &before);
        order.truncate(k);
        // token order, for the total's sum
        order.sort_unstable();
    }
    let top = order.iter().copied().min_by(&before).expect("a token");
    let top = logits[top as usize];
    let t = opts.temperature;
    // (divided in float64: 1 / t overflows float32 for a tiny temperature, and 0 * inf is NaN)
    let scaled = |l: f32| (f64::from(l - top) / t) as f32;
    weight.clear();
    weight.resize(n, 0.0);
    if k == n {
        // every token: one pass over the logits, which the compiler vectorizes
        for (w, &l) in weight.iter_mut().zip(logits) {
            *w = f64::from(exp_nonpositive(scaled(l)));
        }
    } else {
        for &tok in order.iter() {
            let l = logits[tok as usize];
            weight[tok as usize] = f64::from(exp_nonpositive(scaled(l)));
        }
    }
    // in token order, in 8 running sums (sum j takes the tokens j, j + 8, ...: independent
    // chains) then added in order
    let mut sums = [0.0f64; 8];
    let mut chunks = weight.chunks_exact(8);
    for c in &mut chunks {
        for (s, w) in sums.iter_mut().zip(c) {
            *s += w;
        }
    }
    for (s, w) in sums.iter_mut().zip(chunks.remainder()) {
        *s += w;
    }
    sums.iter().sum()
}

/// `p` renormalized over the kept tokens (`norm`: their probabilities' sum after a top-p cut,
/// `None` without one).
fn renormalized(p: f64, norm: Option<f64>) -> f64 {
    norm.map_or(p, |n| p / n)
}

/// The order a draw walks: most likely first, ties by the lower id.
fn most_likely_first(logits: &[f32]) -> impl Fn(&u32, &u32) -> Ordering + '_ {
    move |&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then(a.cmp(&b))
    }
}

/// The first largest logit (a NaN counts as largest, as `argmax` does).
fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] || logits[best].is_nan() {
            best = i;
        }
    }
    best as u32
}

/// The kept tokens, sorted most likely first only as far as walked.
struct Walk<'a> {
    order: &'a mut Vec<u32>,
    logits: &'a [f32],
    /// `order[..sorted]` holds the most likely tokens, in their final order.
    sorted: usize,
}

impl<'a> Walk<'a> {
    fn new(order: &'a mut Vec<u32>, logits: &'a [f32]) -> Walk<'a> {
        Walk {
            order,
            logits,
            sorted: 0,
        }
    }

    /// Moves the tokens whose weight is at least `above` to the front and sorts them (they are
    /// the most likely ones: the weight grows with the logit), when nothing is sorted yet.
    fn sort_likely(&mut self, weight: &[f64], above: f64) {
        if self.sorted > 0 {
            return;
        }
        let mut front = 0;
        for i in 0..self.order.len() {
            if weight[self.order[i] as usize] >= above {
                self.order.swap(front, i);
                front += 1;
            }
        }
        self.order[..front].sort_unstable_by(most_likely_first(self.logits));
        self.sorted = front;
    }

    /// Sorts so that at least the first `upto` tokens (all when fewer) are in their places.
    fn sort_to(&mut self, upto: usize) {
        let upto = upto.min(self.order.len());
        if upto <= self.sorted {
            return;
        }
        let before = most_likely_first(self.logits);
        let rest = &mut self.order[self.sorted..];
        let take = upto - self.sorted;
        if take < rest.len() {
            rest.select_nth_unstable_by(take - 1, &before);
        }
        rest[..take].sort_unstable_by(&before);
        self.sorted = upto;
    }

    /// The `i`-th most likely kept token (sorting further, doubling, when the walk gets past
    /// the sorted part).
    fn at(&mut self, i: usize) -> u32 {
        if i >= self.sorted {
            self.sort_to((2 * self.sorted).max(PREFIX).max(i + 1));
        }
        self.order[i]
    }

    /// The top-p cut: how many tokens stay, and (after a cut) their probabilities' sum,
    /// most likely first.
    fn cut(&mut self, weight: &[f64], total: f64, top_p: f64) -> (usize, Option<f64>) {
        let len = self.order.len();
        if top_p >= 1.0 {
            return (len, None);
        }
        let mut cum = 0.0;
        for i in 0..len {
            cum += weight[self.at(i) as usize] / total;
            if cum >= top_p {
                let keep = i + 1;
                let norm = (0..keep)
                    .map(|j| weight[self.order[j] as usize] / total)
                    .sum();
                return (keep, Some(norm));
            }
        }
        (len, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logits shaped like a language model's: a few likely tokens, a long tail, ties.
    fn logits(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let r = (s >> 8) as f32 / (1u32 << 24) as f32;
                if i % 97 == 3 {
                    8.0 + 4.0 * r
                } else {
                    (20.0 * r).round() / 2.0 - 6.0
                }
            })
            .collect()
    }

    /// Every draw (with a known uniform number) is the token a walk of the full distribution
    /// gives, for temperatures, top-k and top-p cuts: the prefix-sorted walk computes exactly
    /// the full one's numbers.
    #[test]
    fn a_tiny_temperature_keeps_the_most_likely_token() {
        // 1 / 1e-40 overflows float32: the weights must still be exp(0) = 1 for the top token
        let l = [0.5f32, 2.0, 1.0];
        let s = Sampler::new(SamplingOptions {
            temperature: 1e-40,
            ..SamplingOptions::default()
        })
        .unwrap();
        // (every kept token is listed; the others weigh exactly 0)
        assert_eq!(s.distribution(&l), vec![(1, 1.0), (2, 0.0), (0, 0.0)]);
    }

    #[test]
    fn draws_walk_the_full_distribution() {
        for (n, seed) in [(5usize, 1u32), (300, 2), (5000, 3)] {
            let l = logits(n, seed);
            for (temperature, top_k, top_p) in [
                (0.8, 0, 1.0),
                (0.8, 0, 0.9),
                (2.0, 0, 0.99),
                (30.0, 0, 1.0),
                (0.5, 20, 1.0),
                (1.0, 100, 0.5),
                (1.0, 1, 1.0),
            ] {
                let opts = SamplingOptions {
                    temperature,
                    top_k,
                    top_p,
                    seed: u64::from(seed),
                };
                let dist = Sampler::new(opts.clone()).unwrap().distribution(&l);
                let mut s = Sampler::new(opts.clone()).unwrap();
                let mut twin = Sampler::new(opts.clone()).unwrap();
                for draw in 0..200 {
                    let got = s.sample(&l);
                    let want = if dist.len() == 1 {
                        dist[0].0
                    } else {
                        let u = twin.uniform();
                        let mut cum = 0.0;
                        dist.iter()
                            .find(|(_, p)| {
                                cum += p;
                                u < cum
                            })
                            .unwrap_or(&dist[dist.len() - 1])
                            .0
                    };
                    assert_eq!(got, want, "{opts:?}, {n} logits, draw {draw}");
                }
            }
        }
    }

    /// The distribution sums to 1, is most likely first with ties by id, and keeps the top-k
    /// set's most likely tokens.
    #[test]
    fn the_distribution_is_ordered_and_normalized() {
        let l = logits(1000, 9);
        let d = Sampler::new(SamplingOptions {
            temperature: 1.5,
            top_k: 50,
            ..SamplingOptions::default()
        })
        .unwrap()
        .distribution(&l);
        assert_eq!(d.len(), 50);
        assert!((d.iter().map(|p| p.1).sum::<f64>() - 1.0).abs() < 1e-12);
        for w in d.windows(2) {
            let (a, b) = (w[0].0 as usize, w[1].0 as usize);
            assert!(l[a] > l[b] || (l[a] == l[b] && a < b), "{w:?}");
        }
        let mut all: Vec<usize> = (0..l.len()).collect();
        all.sort_by(|&a, &b| l[b].total_cmp(&l[a]).then(a.cmp(&b)));
        let want: Vec<u32> = all[..50].iter().map(|&i| i as u32).collect();
        assert_eq!(d.iter().map(|p| p.0).collect::<Vec<_>>(), want);
    }
}

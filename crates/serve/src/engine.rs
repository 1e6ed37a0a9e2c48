//! The generation engine: one thread owns the decoder and runs every active request together
//! (continuous batching). Each request has its own slot of the KV cache ([`Slots`]: its keys,
//! values and position), its own seeded sampler and its own channel of [`Event`]s; a new
//! request is prefilled into the next free slot and joins the batch at the next step, a
//! finished one leaves it, and one whose client went away (its channel closed) leaves at once.
//! A step decodes one token for every active request with one [`Decoder::decode_slots`]: the
//! weight products and each block's attention run once for the whole batch. The active
//! requests are always the slots `0..active` (request `i` in slot `i`): when one leaves, the
//! last moves into its slot ([`Slots::move_slot`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::thread::JoinHandle;

use tinygrad_models::{Decoder, Sampler, SamplingOptions, Slots, TextStream, Tokenizer};
use tokio::sync::mpsc::UnboundedSender;

/// Why a generation ended (OpenAI's `finish_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The model's end token or a stop sequence.
    Stop,
    /// `max_tokens`, the context, or the server shutting down.
    Length,
}

impl Finish {
    /// OpenAI's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// What the engine tells a request's handler, in order: text as it is generated, then one
/// `Done` or one `Error`.
#[derive(Debug)]
pub enum Event {
    /// The next piece of the reply's text (never empty).
    Text(String),
    /// The end, with the token counts.
    Done {
        /// Why it ended.
        finish: Finish,
        /// Tokens of the prompt.
        prompt_tokens: usize,
        /// Tokens generated (the end token included when the model emitted it).
        completion_tokens: usize,
    },
    /// The model or device failed; nothing more comes.
    Error(String),
}

/// One request for the engine: prompt tokens already checked against the context.
pub struct Job {
    /// The prompt's token ids (non-empty; with `max_tokens`, within the context).
    pub prompt: Vec<u32>,
    /// New tokens at most (>= 1).
    pub max_tokens: usize,
    /// The sampler's options.
    pub sampling: SamplingOptions,
    /// Stop sequences: the text ends before the first one.
    pub stop: Vec<String>,
    /// Where the events go; closed when the client went away.
    pub events: UnboundedSender<Event>,
}

/// Requests waiting for a slot and requests being generated (`/health` reports them).
#[derive(Default)]
pub struct Load {
    /// Submitted, not admitted yet.
    pub waiting: AtomicUsize,
    /// Being generated.
    pub active: AtomicUsize,
}

/// The engine's handle for the request handlers: submit jobs, shut down.
pub struct Engine {
    jobs: Option<Sender<Job>>,
    shutdown: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The current load.
    pub load: Arc<Load>,
}

impl Engine {
    /// Starts the engine thread, which owns `decoder` and serves up to `max_batch` requests at
    /// once (more wait their turn). `eos` ends a generation when sampled.
    pub fn start(
        decoder: Decoder,
        tokenizer: Arc<Tokenizer>,
        eos: Option<u32>,
        max_batch: usize,
    ) -> Engine {
        let (tx, rx) = channel();
        let shutdown = Arc::new(AtomicBool::new(false));
        let flag = shutdown.clone();
        let load = Arc::new(Load::default());
        let counts = load.clone();
        let thread = std::thread::Builder::new()
            .name("tinygrad-serve engine".into())
            .spawn(move || {
                run(
                    &decoder,
                    &tokenizer,
                    eos,
                    max_batch.max(1),
                    &rx,
                    &flag,
                    &counts,
                );
            })
            .expect("spawning the engine thread");
        Engine {
            jobs: Some(tx),
            shutdown,
            thread: Some(thread),
            load,
        }
    }

    /// Queues a job; `false` when the engine has stopped.
    pub fn submit(&self, job: Job) -> bool {
        if self.shutdown.load(Ordering::SeqCst) {
            return false;
        }
        self.load.waiting.fetch_add(1, Ordering::SeqCst);
        let sent = self.jobs.as_ref().is_some_and(|tx| tx.send(job).is_ok());
        if !sent {
            self.load.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        sent
    }

    /// Ends every active generation at the engine's next step, each with a final `Done`
    /// (finish `length`); later jobs are refused.
    pub fn stop(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
        // the channel closed, the thread ends once idle
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A request being generated (in the slot of its index among the active ones).
struct Active<'t> {
    sampler: Sampler,
    stream: TextStream<'t>,
    events: UnboundedSender<Event>,
    stop: Vec<String>,
    /// Text generated but held back: it may be the start of a stop sequence.
    held: String,
    /// The last sampled token (the next step's input).
    last: u32,
    prompt_tokens: usize,
    generated: usize,
    max_tokens: usize,
}

impl Active<'_> {
    /// Takes the sampled token `tok`: sends its text, or ends the generation. `room`: whether
    /// the request's slot has room for another token after this one. `false` when the
    /// request is over (finished, failed, or its client gone).
    fn take(&mut self, tok: u32, eos: Option<u32>, room: bool) -> bool {
        self.generated += 1;
        self.last = tok;
        if Some(tok) == eos {
            return self.finish(Finish::Stop);
        }
        match self.stream.push(tok) {
            Ok(text) => self.held.push_str(&text),
            Err(e) => {
                let _ = self.events.send(Event::Error(e.to_string()));
                return false;
            }
        }
        if let Some(at) = self
            .stop
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min()
        {
            self.held.truncate(at);
            return self.finish(Finish::Stop);
        }
        // what cannot be the start of a stop sequence goes out now
        let keep = self
            .stop
            .iter()
            .map(|s| partial_suffix(&self.held, s))
            .max()
            .unwrap_or(0);
        let ready = self.held.len() - keep;
        if ready > 0 {
            let rest = self.held.split_off(ready);
            let text = std::mem::replace(&mut self.held, rest);
            if self.events.send(Event::Text(text)).is_err() {
                return false;
            }
        }
        if self.generated >= self.max_tokens || !room {
            return self.finish(Finish::Length);
        }
        !self.events.is_closed()
    }

    /// Sends what is held and the end; always `false` (the request is over).
    fn finish(&mut self, finish: Finish) -> bool {
        if !self.held.is_empty() {
            let _ = self
                .events
                .send(Event::Text(std::mem::take(&mut self.held)));
        }
        let _ = self.events.send(Event::Done {
            finish,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.generated,
        });
        false
    }
}

/// The length of the longest proper prefix of `stop` that `text` ends with (at a character
/// boundary of `text`).
fn partial_suffix(text: &str, stop: &str) -> usize {
    (1..stop.len())
        .rev()
        .filter(|&k| stop.is_char_boundary(k) && text.len() >= k)
        .find(|&k| text.is_char_boundary(text.len() - k) && text.ends_with(&stop[..k]))
        .unwrap_or(0)
}

/// The engine loop: admit jobs into free slots (prefill, first token), then one batched decode
/// step for all active requests; until the job channel closes and nothing is active.
fn run(
    decoder: &Decoder,
    tokenizer: &Tokenizer,
    eos: Option<u32>,
    max_batch: usize,
    jobs: &Receiver<Job>,
    shutdown: &AtomicBool,
    load: &Load,
) {
    // the slots are made on the first job (an error then goes to that job, and the next one
    // tries again)
    let mut slots: Option<Slots> = None;
    let mut active: Vec<Active<'_>> = Vec::new();
    loop {
        load.active.store(active.len(), Ordering::SeqCst);
        // admit: block for a job when idle, else take what is queued, up to the batch size
        while active.len() < max_batch {
            let job = if active.is_empty() {
                match jobs.recv() {
                    Ok(j) => j,
                    Err(_) => return,
                }
            } else {
                match jobs.try_recv() {
                    Ok(j) => j,
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            };
            load.waiting.fetch_sub(1, Ordering::SeqCst);
            if job.events.is_closed() {
                continue; // its client left while it waited
            }
            let made = match slots.take() {
                Some(s) => Ok(s),
                None => guarded(|| decoder.new_slots(max_batch)),
            };
            let mut s = match made {
                Ok(s) => s,
                Err(e) => {
                    let _ = job.events.send(Event::Error(e));
                    continue;
                }
            };
            if let Some(a) = admit(decoder, tokenizer, eos, &mut s, active.len(), job) {
                active.push(a);
            }
            slots = Some(s);
        }
        if shutdown.load(Ordering::SeqCst) {
            for mut a in active.drain(..) {
                a.finish(Finish::Length);
            }
            return;
        }
        let Some(s) = slots.as_mut().filter(|_| !active.is_empty()) else {
            continue;
        };
        let tokens: Vec<u32> = active.iter().map(|a| a.last).collect();
        match guarded(|| decoder.decode_slots(s, &tokens)) {
            Ok(logits) => {
                let drawn = draw(&mut active, &logits);
                let mut done = Vec::new();
                for (i, (a, tok)) in active.iter_mut().zip(drawn).enumerate() {
                    if !a.take(tok, eos, s.len(i) + 1 < s.context()) {
                        done.push(i);
                    }
                }
                leave(s, &mut active, &done);
            }
            Err(e) => {
                tracing::error!("decode step failed: {e}");
                for a in active.drain(..) {
                    let _ = a.events.send(Event::Error(e.clone()));
                }
            }
        }
    }
}

/// Each active request's next token from its row of `logits`, drawn by its own sampler: the
/// rows split between two threads when there are several (a draw weighs the whole vocabulary,
/// ~0.3 ms for SmolLM2's on Zen 4: 8 streams' draws took 2.2 ms of each ~28 ms step on one
/// thread, while the step's kernels leave every core idle between steps).
fn draw(active: &mut [Active<'_>], logits: &[Vec<f32>]) -> Vec<u32> {
    let sample = |part: &mut [Active<'_>], rows: &[Vec<f32>]| -> Vec<u32> {
        part.iter_mut()
            .zip(rows)
            .map(|(a, l)| a.sampler.sample(l))
            .collect()
    };
    if active.len() < 2 {
        return sample(active, logits);
    }
    let half = active.len() / 2;
    let (first, second) = active.split_at_mut(half);
    std::thread::scope(|scope| {
        let other = scope.spawn(|| sample(second, &logits[half..]));
        let mut tokens = sample(first, &logits[..half]);
        match other.join() {
            Ok(rest) => tokens.extend(rest),
            // (a sampler panics only on a bug: the engine's guard reports it)
            Err(p) => std::panic::resume_unwind(p),
        }
        tokens
    })
}

/// Removes the requests `done` (ascending indices) from `active`, keeping request `i` in
/// slot `i`: the last active request moves into each freed slot. A failed move (the device
/// failing) ends every active request with the error, as a failed step does.
fn leave(slots: &mut Slots, active: &mut Vec<Active<'_>>, done: &[usize]) {
    for &i in done.iter().rev() {
        let last = active.len() - 1;
        active.swap_remove(i);
        slots.clear(i);
        if i == last {
            continue;
        }
        // (the last one, now at i, is not done: the later indices left first)
        if let Err(e) = guarded(|| slots.move_slot(last, i)) {
            tracing::error!("moving a sequence between KV cache slots failed: {e}");
            for (j, a) in active.drain(..).enumerate() {
                let _ = a.events.send(Event::Error(e.clone()));
                slots.clear(j);
            }
            slots.clear(last);
            return;
        }
    }
}

/// `f`'s result, with a panic inside the model (a bug) turned into an error for the requests
/// involved, so the engine goes on serving the others.
fn guarded<T>(f: impl FnOnce() -> tinygrad_models::Result<T>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            tracing::error!("the model panicked: {what}");
            Err(format!("internal error in the model: {what}"))
        }
    }
}

/// Prefills `job`'s prompt into slot `slot` (cleared first) and takes its first token: the
/// active request, or `None` when it is already over (the slot left empty).
fn admit<'t>(
    decoder: &Decoder,
    tokenizer: &'t Tokenizer,
    eos: Option<u32>,
    slots: &mut Slots,
    slot: usize,
    job: Job,
) -> Option<Active<'t>> {
    slots.clear(slot);
    let sampler = match Sampler::new(job.sampling.clone()) {
        Ok(s) => s,
        Err(e) => {
            let _ = job.events.send(Event::Error(e.to_string()));
            return None;
        }
    };
    let logits = match guarded(|| decoder.prefill_slot(slots, slot, &job.prompt)) {
        Ok(l) => l,
        Err(e) => {
            let _ = job.events.send(Event::Error(e));
            slots.clear(slot);
            return None;
        }
    };
    let mut a = Active {
        sampler,
        stream: tokenizer.stream(true),
        events: job.events,
        stop: job.stop.into_iter().filter(|s| !s.is_empty()).collect(),
        held: String::new(),
        last: 0,
        prompt_tokens: job.prompt.len(),
        generated: 0,
        max_tokens: job.max_tokens.max(1),
    };
    let tok = a.sampler.sample(&logits);
    if a.take(tok, eos, slots.len(slot) + 1 < slots.context()) {
        Some(a)
    } else {
        slots.clear(slot);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::partial_suffix;

    #[test]
    fn partial_suffix_finds_the_longest_started_stop_sequence() {
        assert_eq!(partial_suffix("hello wor", "world"), 3);
        assert_eq!(partial_suffix("hello", "world"), 0);
        assert_eq!(partial_suffix("ab", "abc"), 2);
        // the whole stop sequence is not a partial one
        assert_eq!(partial_suffix("abc", "abc"), 0);
        assert_eq!(partial_suffix("x\u{e9}", "\u{e9}t"), 2);
    }
}

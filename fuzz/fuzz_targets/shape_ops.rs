//! Shape-taking constructors and movement ops driven by fuzz bytes: every call ends in a value
//! or a clear panic (caught here), never a crash from an overflowing size. Tensors are realized
//! only when small, so the target measures the checks, not the machine's memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tinygrad_tensor::{DType, Tensor};

/// Reads fuzz bytes as numbers.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    /// A size: mostly small, sometimes near a power of two up to 2^63.
    fn size(&mut self) -> usize {
        match self.u8() {
            b @ 0..=191 => (b % 9) as usize,
            b => {
                let shift = (b - 192) as u32; // 0..=63
                (1usize << shift).wrapping_add(self.u8() as usize % 3).wrapping_sub(1)
            }
        }
    }
    fn shape(&mut self) -> Vec<usize> {
        let n = self.u8() % 5;
        (0..n).map(|_| self.size()).collect()
    }
}

const DTYPES: [DType; 5] = [
    DType::FLOAT32,
    DType::INT64,
    DType::UINT8,
    DType::FLOAT16,
    DType::BOOL,
];

fn run(mut b: Bytes<'_>) {
    let dt = DTYPES[b.u8() as usize % DTYPES.len()];
    let shape = b.shape();
    let mut t = match b.u8() % 3 {
        0 => Tensor::zeros(&shape, dt),
        1 => Tensor::empty(&shape, dt),
        _ => {
            let n: usize = shape.iter().product();
            let bytes = vec![0u8; (b.u8() as usize).min(n.saturating_mul(dt.itemsize()))];
            Tensor::from_bytes(&bytes, dt, &shape, "CPU")
        }
    };
    // realized only if every intermediate is small (a huge `contiguous` would be allocated and
    // a huge reduction looped over: the machine's limits, not a bug)
    let mut largest = t.numel();
    for _ in 0..(b.u8() % 6) {
        let nd = t.ndim();
        t = match b.u8() % 7 {
            0 => {
                let s: Vec<isize> = (0..(b.u8() % 5)).map(|_| b.size() as isize).collect();
                t.reshape(&s)
            }
            1 => {
                let mut s: Vec<isize> = t.shape().iter().map(|&d| d as isize).collect();
                for d in s.iter_mut() {
                    if *d == 1 {
                        *d = b.size() as isize;
                    }
                }
                s.insert(0, b.size() as isize);
                t.expand(&s)
            }
            2 => {
                let p: Vec<(usize, usize)> = (0..nd).map(|_| (b.size(), b.size())).collect();
                t.pad(&p, 0)
            }
            3 => {
                let s: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d / 2)).collect();
                t.shrink(&s)
            }
            4 if nd > 0 => t.sum((b.u8() as usize % nd) as isize),
            5 => t.cast(DTYPES[b.u8() as usize % DTYPES.len()]),
            _ => t.contiguous(),
        };
        largest = largest.max(t.numel());
    }
    if largest <= 1 << 16 {
        let _ = t.try_to_bytes();
    }
}

fuzz_target!(|data: &[u8]| {
    // Panics are the checks working (a message naming the op); crashes, aborts, hangs and
    // runaway memory are failures. libfuzzer-sys's panic hook aborts on every panic, caught or
    // not: replace it with a silent one.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let _ = std::panic::catch_unwind(|| run(Bytes(data)));
});

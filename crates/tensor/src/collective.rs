//! All-reduce for multi-device tensors: one partial result per device in, the same combined
//! result on every device out (tinygrad's `handle_allreduce` in `multi.py`).
//!
//! Three routes, chosen per all-reduce by [`route`]:
//! - **naive** — every device copies every other device's partial and combines them in device
//!   order: `n * (n - 1)` whole-size copies. Used for two devices or small tensors (tinygrad:
//!   the ring gains nothing there, and costs more kernels).
//! - **ring** — tinygrad's ring all-reduce: the flattened partials are cut into one chunk per
//!   device; chunk `i` starts on device `i` and travels the ring, each device adding its own
//!   piece (reduce-scatter), then every device copies the reduced chunks and puts them side by
//!   side (all-gather): `2 * (n - 1)` whole-size copies in all. Used for more than two devices
//!   and more than `RING_ALLREDUCE_THRESHOLD` (256,000) elements, or always with `RING=2`;
//!   never with `RING=0`.
//! - **all-to-all** — tinygrad's `ALL2ALL`: the same chunks, but device `i` copies chunk `i`
//!   of every partial and combines them in device order (reduce-scatter), then the ring's
//!   all-gather. Taken before the ring with `ALL2ALL=2`, or with `ALL2ALL=1` where the ring
//!   would be (more than two devices and more than `RING_ALLREDUCE_THRESHOLD` elements);
//!   never by default (`ALL2ALL=0`).
//! - **NCCL** — when the devices are distinct CUDA GPUs, the tensor is not empty, its dtype is
//!   one NCCL has, and `NCCL` is not `0` (this route comes before `RING`), the partials are
//!   realized and handed to NVIDIA's NCCL ([`tinygrad_runtime::nccl`]); a missing NCCL library
//!   is an `Err` naming it.
//!
//! Every replica holds the same bits: in the naive route every device adds the same terms in
//! the same order, in the ring each element is combined once, on one device, and copied to the
//! others, and NCCL gives every rank the same result.

use std::collections::HashMap;

use tinygrad_runtime::DeviceError;
use tinygrad_runtime::nccl::{self, CollectiveOp};
use tinygrad_uop::{Arg, Ops, UOp};

use crate::Tensor;
use crate::tensor::view_buffer;

/// How an all-reduce moves its data (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Naive,
    Ring,
    All2All,
    Nccl,
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Whether tinygrad's rule takes the ring for `n` devices and `numel` elements: `RING=2`
/// always, `RING=0` never, else more than two devices and more than `RING_ALLREDUCE_THRESHOLD`
/// elements.
pub(crate) fn ring_wanted(n: usize, numel: usize) -> bool {
    let ring = env_usize("RING", 1);
    let threshold = env_usize("RING_ALLREDUCE_THRESHOLD", 256_000);
    ring >= 2 || (ring >= 1 && n > 2 && numel > threshold)
}

/// Whether tinygrad's rule takes the all-to-all route (before the ring): `ALL2ALL=2` always,
/// `ALL2ALL=1` for more than two devices and more than `RING_ALLREDUCE_THRESHOLD` elements,
/// `ALL2ALL=0` (the default) never.
pub(crate) fn all2all_wanted(n: usize, numel: usize) -> bool {
    let all2all = env_usize("ALL2ALL", 0);
    let threshold = env_usize("RING_ALLREDUCE_THRESHOLD", 256_000);
    all2all >= 2 || (all2all >= 1 && n > 2 && numel > threshold)
}

/// The route for an all-reduce of `dtype` partials over `devices`.
pub(crate) fn route(devices: &[String], numel: usize, dtype: tinygrad_dtype::DType) -> Route {
    let all_cuda = devices.iter().all(|d| d.split(':').next() == Some("CUDA"));
    // (NCCL takes each GPU once: a tuple naming one twice takes the copies)
    let distinct = devices
        .iter()
        .enumerate()
        .all(|(i, d)| !devices[..i].contains(d));
    if all_cuda
        && distinct
        && devices.len() > 1
        && numel > 0
        && env_usize("NCCL", 1) != 0
        && nccl::supports(dtype)
    {
        Route::Nccl
    } else if all2all_wanted(devices.len(), numel) {
        Route::All2All
    } else if ring_wanted(devices.len(), numel) {
        Route::Ring
    } else {
        Route::Naive
    }
}

pub(crate) fn copy_between(u: &UOp, from: &str, to: &str) -> UOp {
    if from == to {
        return u.clone();
    }
    UOp::new(Ops::Copy, u.dtype(), vec![u.clone()], Arg::copy(from, to))
}

fn combine(op: Ops, a: UOp, b: UOp) -> UOp {
    UOp::new(op, a.dtype(), vec![a, b], Arg::None)
}

/// The naive all-reduce: device `j` combines copies of every partial, in device order.
pub(crate) fn naive(op: Ops, parts: &[UOp], devices: &[String]) -> Vec<UOp> {
    devices
        .iter()
        .map(|to| {
            parts
                .iter()
                .zip(devices)
                .map(|(p, from)| copy_between(p, from, to))
                .reduce(|acc, t| combine(op, acc, t))
                .expect("a multi-device tensor has devices")
        })
        .collect()
}

/// The chunks (start, end) of `numel` flattened elements over `n` devices, as tinygrad cuts
/// them: sizes a multiple of the largest of 32, 16, 8, 4, 2 dividing `numel`, the first ones one
/// unit larger when they do not split evenly; empty chunks dropped.
pub(crate) fn ring_chunks(numel: usize, n: usize) -> Vec<(usize, usize)> {
    let factor = [32, 16, 8, 4, 2]
        .into_iter()
        .find(|f| numel.is_multiple_of(*f))
        .unwrap_or(1);
    let (base, left) = ((numel / factor) / n, (numel / factor) % n);
    let mut start = 0;
    (0..n)
        .map(|i| {
            let size = if i < left { base + 1 } else { base } * factor;
            start += size;
            (start - size, start)
        })
        .filter(|(s, e)| s < e)
        .collect()
}

/// `parts` flattened, and the piece `(s, e)` of device `i`'s.
fn flat_pieces(parts: &[UOp], numel: usize) -> impl Fn(usize, (usize, usize)) -> UOp {
    let flat: Vec<UOp> = parts
        .iter()
        .map(|p| {
            UOp::new(
                Ops::Reshape,
                p.dtype(),
                vec![p.clone()],
                Arg::shape(&[numel]),
            )
        })
        .collect();
    move |i: usize, (s, e): (usize, usize)| {
        UOp::new(
            Ops::Shrink,
            flat[i].dtype(),
            vec![flat[i].clone()],
            Arg::pairs(&[(s, e)]),
        )
    }
}

/// tinygrad's ring all-reduce (see the module docs); `parts` are contiguous.
pub(crate) fn ring(op: Ops, parts: &[UOp], devices: &[String]) -> Vec<UOp> {
    let n = devices.len();
    let shape = parts[0].shape_vec();
    let numel: usize = shape.iter().product();
    if numel == 0 {
        // (no chunks to move: the empty result is every device's own)
        return naive(op, parts, devices);
    }
    let piece = flat_pieces(parts, numel);
    // reduce-scatter: chunk i starts on device i and moves one device on per step
    let reduced: Vec<(UOp, usize)> = ring_chunks(numel, n)
        .into_iter()
        .enumerate()
        .map(|(i, range)| {
            let (mut acc, mut at) = (piece(i, range), i);
            for step in 0..n - 1 {
                let dest = (i + step + 1) % n;
                let moved = copy_between(&acc, &devices[at], &devices[dest]);
                acc = combine(op, moved, piece(dest, range));
                at = dest;
            }
            (acc, at)
        })
        .collect();
    all_gather(&reduced, devices, &shape)
}

/// tinygrad's all-to-all all-reduce (`ALL2ALL`, see the module docs); `parts` are contiguous.
pub(crate) fn all2all(op: Ops, parts: &[UOp], devices: &[String]) -> Vec<UOp> {
    let shape = parts[0].shape_vec();
    let numel: usize = shape.iter().product();
    if numel == 0 {
        // (no chunks to move: the empty result is every device's own)
        return naive(op, parts, devices);
    }
    let piece = flat_pieces(parts, numel);
    // reduce-scatter: device i combines chunk i of every partial, in device order
    let reduced: Vec<(UOp, usize)> = ring_chunks(numel, devices.len())
        .into_iter()
        .enumerate()
        .map(|(i, range)| {
            let acc = devices
                .iter()
                .enumerate()
                .map(|(j, from)| copy_between(&piece(j, range), from, &devices[i]))
                .reduce(|acc, t| combine(op, acc, t))
                .expect("a multi-device tensor has devices");
            (acc, i)
        })
        .collect();
    all_gather(&reduced, devices, &shape)
}

/// The all-gather of the ring and all-to-all routes: every device copies every reduced chunk
/// (each on the device `at` it was reduced on) and puts them side by side, in `shape`.
fn all_gather(reduced: &[(UOp, usize)], devices: &[String], shape: &[usize]) -> Vec<UOp> {
    devices
        .iter()
        .map(|to| {
            let chunks: Vec<Tensor> = reduced
                .iter()
                .map(|(c, at)| Tensor::from_uop(copy_between(c, &devices[*at], to), to))
                .collect();
            let refs: Vec<&Tensor> = chunks.iter().collect();
            Tensor::cat(&refs, 0).reshape(shape).uop()
        })
        .collect()
}

/// The all-reduce through NCCL: the partials realized on their GPUs (reusing and extending
/// `known`), combined by NCCL, and returned as the new buffers (one per device).
pub(crate) fn through_nccl(
    op: Ops,
    parts: &[UOp],
    devices: &[String],
    known: &mut HashMap<UOp, UOp>,
) -> Result<Vec<UOp>, DeviceError> {
    let op = match op {
        Ops::Add => CollectiveOp::Sum,
        Ops::Mul => CollectiveOp::Prod,
        Ops::Max => CollectiveOp::Max,
        other => panic!("all-reduce: NCCL has no reduction {other:?}"),
    };
    let shape = parts[0].shape_vec();
    // (partials that copy from other devices: those realized first, as for any realize)
    let parts = crate::tensor::realize_copy_sources(parts, known)?;
    let tensors: Vec<Tensor> = parts
        .iter()
        .zip(devices)
        .map(|(p, d)| Tensor::from_uop(p.clone(), d))
        .collect();
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let views = Tensor::realize_snapshots_with(&refs, known)?;
    let buffers: Vec<_> = views
        .iter()
        .map(|v| view_buffer(v).expect("a realized snapshot is a buffer view"))
        .collect();
    let reduced = nccl::all_reduce(op, &buffers)?;
    Ok(reduced
        .iter()
        .map(|b| UOp::new(Ops::Reshape, b.dtype, vec![b.uop()], Arg::shape(&shape)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tinygrads_rule_picks_the_route() {
        if ["RING", "RING_ALLREDUCE_THRESHOLD", "NCCL", "ALL2ALL"]
            .iter()
            .any(|v| std::env::var_os(v).is_some())
        {
            println!("skipped: RING, RING_ALLREDUCE_THRESHOLD, NCCL or ALL2ALL is set");
            return;
        }
        let names = |d: &[&str]| -> Vec<String> { d.iter().map(|s| s.to_string()).collect() };
        let f32 = tinygrad_dtype::DType::FLOAT32;
        let three = names(&["CPU", "CPU:1", "WEBGPU"]);
        assert_eq!(route(&three, 256_001, f32), Route::Ring);
        assert_eq!(route(&three, 256_000, f32), Route::Naive);
        assert_eq!(route(&names(&["CPU", "CPU:1"]), 1 << 24, f32), Route::Naive);
        let gpus = names(&["CUDA", "CUDA:1"]);
        assert_eq!(route(&gpus, 10, f32), Route::Nccl);
        // NCCL has no 16-bit integers: copies instead
        assert_eq!(route(&gpus, 10, tinygrad_dtype::DType::INT16), Route::Naive);
        assert_eq!(route(&names(&["CUDA", "CPU"]), 10, f32), Route::Naive);
        assert_eq!(route(&names(&["CUDA", "CUDA"]), 10, f32), Route::Naive);
        assert_eq!(route(&gpus, 0, f32), Route::Naive);
    }

    #[test]
    fn ring_chunks_cover_the_elements_as_tinygrad_cuts_them() {
        // 32 | 960: 30 units of 32 over 4 devices -> 8, 8, 7, 7 units
        assert_eq!(
            ring_chunks(960, 4),
            vec![(0, 256), (256, 512), (512, 736), (736, 960)]
        );
        // odd: factor 1
        assert_eq!(ring_chunks(7, 3), vec![(0, 3), (3, 5), (5, 7)]);
        // fewer units than devices: the empty chunks are dropped
        assert_eq!(ring_chunks(2, 3), vec![(0, 2)]);
        assert_eq!(ring_chunks(0, 3), vec![]);
    }

    /// Bytes that the copies in `graphs` move (each distinct copy once).
    fn copied_bytes(graphs: &[UOp]) -> usize {
        let sink = UOp::new(
            Ops::Sink,
            tinygrad_dtype::DType::VOID,
            graphs.to_vec(),
            Arg::None,
        );
        sink.toposort()
            .iter()
            .filter(|u| u.op() == Ops::Copy)
            .map(|u| u.shape_vec().iter().product::<usize>() * u.dtype().itemsize())
            .sum()
    }

    #[test]
    fn the_ring_moves_2_n_minus_1_partials_and_the_naive_route_n_n_minus_1() {
        let devices: Vec<String> = ["CPU", "CPU:1", "CPU:2", "CPU:3"].map(String::from).into();
        let parts: Vec<UOp> = devices
            .iter()
            .map(|d| {
                tinygrad_runtime::with_default_device(d, || {
                    Tensor::ones(&[64, 30], tinygrad_dtype::DType::FLOAT32)
                        .contiguous()
                        .uop()
                })
            })
            .collect();
        let whole = 64 * 30 * 4;
        let ring_graphs = ring(Ops::Add, &parts, &devices);
        assert_eq!(copied_bytes(&ring_graphs), 2 * 3 * whole);
        // all-to-all: each chunk gathered from the three other devices, then the ring's gather
        let all2all_graphs = all2all(Ops::Add, &parts, &devices);
        assert_eq!(copied_bytes(&all2all_graphs), 2 * 3 * whole);
        assert_eq!(
            copied_bytes(&naive(Ops::Add, &parts, &devices)),
            4 * 3 * whole
        );
        for g in ring_graphs.iter().chain(&all2all_graphs) {
            assert_eq!(g.shape_vec(), vec![64, 30]);
        }
    }
}

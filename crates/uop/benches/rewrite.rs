//! `graph_rewrite` throughput with `sym()` on a large graph of kernel-style index arithmetic
//! (strided sums of loop ranges, div/mod re-linearization, padding gates), reported as input
//! nodes rewritten per second.
//!
//! `cargo bench -p tinygrad-uop --bench rewrite -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use tinygrad_uop::{Arg, AxisKind, DType, Ops, UOp, graph_rewrite, sym};

/// A fresh graph of `exprs` index expressions; `tag` makes its nodes distinct from every other
/// graph's, so no work is shared with earlier iterations.
fn index_graph(exprs: usize, tag: usize) -> UOp {
    let sizes = [4i64, 8, 16, 32, 3, 3];
    let r: Vec<UOp> = sizes
        .iter()
        .enumerate()
        .map(|(i, s)| UOp::range(*s, tag * 16 + i, AxisKind::Loop))
        .collect();
    let n = UOp::variable(&format!("n{tag}"), 1, 64);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ tag as u64;
    let mut rnd = |m: i64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) % m as u64) as i64
    };
    let mut outs = Vec::with_capacity(exprs);
    for k in 0..exprs as i64 {
        // a flattened index over a permuted, padded view: linear combination of ranges
        let idx = &r[0] * (sizes[1] * sizes[2]) + &r[1] * sizes[2] + &r[2] + k;
        let d = [2, 4, 8, 16, 3, 6][rnd(6) as usize];
        let m = [2, 4, 8, 3][rnd(4) as usize];
        let reshaped = (idx.idiv(d) % m) * (sizes[2] * 2) + (&idx % d) + &r[3] * 4 + k % 7;
        let conv = (&r[4] + &r[1] * 2 - 1) * 10 + &r[5] + &r[2] * 3 - rnd(3);
        let valid = (&r[4] + &r[1] * 2).lt(1).ne(true) & (&r[4] + &r[1] * 2).lt(16) & r[3].lt(&n);
        let e = valid
            .where_(&reshaped + &conv.idiv(3) * 2, 0)
            .maximum(&r[0] - 1);
        outs.push(e);
    }
    UOp::new(Ops::Sink, DType::VOID, outs, Arg::None)
}

fn bench_rewrite(c: &mut Criterion) {
    static TAG: AtomicUsize = AtomicUsize::new(1);
    let exprs = 1000;
    let nodes = index_graph(exprs, 0).toposort().len();
    let mut g = c.benchmark_group("graph_rewrite_sym");
    g.throughput(Throughput::Elements(nodes as u64));
    g.sample_size(10);
    g.bench_function(format!("index_arith_{nodes}_nodes"), |b| {
        b.iter_batched(
            || index_graph(exprs, TAG.fetch_add(1, Ordering::Relaxed)),
            |root| black_box(graph_rewrite(&root, sym(), &mut (), false)),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench_rewrite);
criterion_main!(benches);

//! The schedule cache: the same graph scheduled again reuses the kernels found the first time.
//!
//! A training step or a serving loop builds the same graph over and over; scheduling it (fusion
//! decisions, lowering movement ops to index math) costs more than launching its kernels when
//! they are small (a 20-op chain on a 4x4 tensor: ~27 µs of ~55 µs per warm realize). tinygrad
//! keeps such a cache too.
//!
//! Hash-consing makes structurally equal graphs share nodes while they live, but the previous
//! step's graph is usually freed before the next one is built, and holding it would hold its
//! input buffers' memory. So an entry keeps a *signature* instead: for every node of the graph
//! in topological order its op, dtype, argument and the positions of its sources. Buffers are
//! compared by size, dtype and device, not identity: an optimizer step writes new parameter
//! buffers every step, and the schedule depends only on where each buffer sits in the graph
//! (hash-consing gives one buffer one node, so aliasing shows in the positions). A lookup
//! compares the new graph with the entry's signature, node by node — equal signatures mean the
//! same graph up to which buffers fill its inputs, so the cached kernels and buffer plan, bound
//! to the new graph's buffers by position, are exactly what scheduling it would give. (A hash of
//! the signature only picks the entry; it is never trusted alone.)
//!
//! An entry stores each kernel's AST (kernel-level UOps: no tensor buffers) with where its
//! buffers come from — a node of the graph (an input buffer) or the `j`-th new buffer (created
//! again, in the same order, through the caller's `new_buffer`) — and the same for every node's
//! realized view. A custom-gradient node's opaque payload (its gradient rule) is compared as
//! "some payload": the scheduler treats the node as the identity of its first source and never
//! looks inside, so two graphs that differ only in those rules schedule identically (each
//! training step builds new rules for its `conv2d`s; keying on them would miss every time).
//!
//! `SCHEDULE_CACHE=0` turns the cache off.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use tinygrad_dtype::DType;
use tinygrad_uop::{Arg, Ops, UOp};

use crate::{Schedule, ScheduleItem};

/// At most this many entries; a full cache is emptied (a program that builds ever new graphs
/// gains nothing from it, and one that repeats a few refills it at once).
const MAX_ENTRIES: usize = 256;

static HITS: AtomicUsize = AtomicUsize::new(0);
static MISSES: AtomicUsize = AtomicUsize::new(0);

/// How many schedules were served from the cache in this process (for tests).
pub fn schedule_cache_hits() -> usize {
    HITS.load(Ordering::Relaxed)
}

/// How many graphs were scheduled anew (not found in the cache) in this process, with the
/// cache on (for tests: a repeated forward pass must schedule nothing new).
pub fn schedule_cache_misses() -> usize {
    MISSES.load(Ordering::Relaxed)
}

pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("SCHEDULE_CACHE").map_or(true, |v| v != "0"))
}

/// A node's argument as the signature compares it: buffers by size and class (device), not
/// identity; opaque payloads (custom-gradient rules, which scheduling ignores) all alike.
#[derive(PartialEq, Hash)]
enum ArgKey {
    Value(Arg),
    Buffer(usize, String),
    Opaque,
}

#[derive(PartialEq, Hash)]
struct NodeSig {
    op: Ops,
    dtype: DType,
    arg: ArgKey,
    src: Box<[u32]>,
}

/// Where a buffer of the cached schedule comes from.
#[derive(Clone)]
enum BufRef {
    /// The graph node at this topological position (an input buffer).
    Node(u32),
    /// The `j`-th buffer the schedule creates, viewed through a reshape with this argument
    /// (`None`: the flat buffer; a symbolic shape stays symbolic).
    New(usize, Option<Arg>),
}

struct Entry {
    sig: Vec<NodeSig>,
    new_buffers: Vec<(DType, usize)>,
    items: Vec<(UOp, Vec<BufRef>)>,
    /// The realized view of graph nodes (topological position -> view).
    becomes: Vec<(u32, BufRef)>,
}

/// Hashes a node as its structural hash (already well mixed): the lookup path builds a position
/// map of the whole graph, and SipHash would cost more than the rest of it.
#[derive(Default)]
struct NodeHashHasher(u64);

impl Hasher for NodeHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
}

type Positions = HashMap<UOp, u32, BuildHasherDefault<NodeHashHasher>>;

fn cache() -> &'static Mutex<HashMap<u64, Entry>> {
    static CACHE: OnceLock<Mutex<HashMap<u64, Entry>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The signature of a graph given in topological order.
fn signature(topo: &[UOp], pos: &Positions) -> Vec<NodeSig> {
    topo.iter()
        .map(|n| NodeSig {
            op: n.op(),
            dtype: n.dtype(),
            arg: match n.arg() {
                Arg::Opaque(_) => ArgKey::Opaque,
                Arg::Buffer(size, b) => ArgKey::Buffer(*size, b.class()),
                a => ArgKey::Value(a.clone()),
            },
            src: n.src().iter().map(|s| pos[s]).collect(),
        })
        .collect()
}

/// A multiply-rotate streaming hasher (FxHash's step): the key only picks an entry, which is
/// then compared node by node, so it needs speed, not resistance to chosen inputs.
#[derive(Default)]
struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.add(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
}

/// The cache key of the graph `topo` (in topological order, positions `pos`): a hash of what
/// its signature holds, computed without building it.
fn graph_hash(topo: &[UOp], pos: &Positions) -> u64 {
    use std::hash::Hash;
    let mut h = KeyHasher::default();
    for n in topo {
        n.op().hash(&mut h);
        n.dtype().hash(&mut h);
        match n.arg() {
            Arg::Opaque(_) => h.write_u8(0),
            Arg::Buffer(size, b) => {
                h.write_u8(1);
                h.write_usize(*size);
                b.class().hash(&mut h);
            }
            a => {
                h.write_u8(2);
                a.hash(&mut h);
            }
        }
        h.write_usize(n.src().len());
        for s in n.src() {
            h.write_u32(pos[s]);
        }
    }
    h.finish()
}

/// Whether the graph `topo` (positions `pos`) has the signature `sig`, compared node by node.
fn matches_signature(sig: &[NodeSig], topo: &[UOp], pos: &Positions) -> bool {
    sig.len() == topo.len()
        && sig.iter().zip(topo).all(|(s, n)| {
            s.op == n.op()
                && s.dtype == n.dtype()
                && match (&s.arg, n.arg()) {
                    (ArgKey::Opaque, Arg::Opaque(_)) => true,
                    (ArgKey::Buffer(size, class), Arg::Buffer(n_size, b)) => {
                        size == n_size && *class == b.class()
                    }
                    (ArgKey::Value(a), b) => {
                        !matches!(b, Arg::Opaque(_) | Arg::Buffer(..)) && a == b
                    }
                    _ => false,
                }
                && s.src.len() == n.src().len()
                && s.src.iter().zip(n.src()).all(|(&p, src)| pos[src] == p)
        })
}

/// A key of the structure of `outputs`' graph as the schedule cache compares it (buffers by
/// size, dtype and device, not identity): equal for graphs the cache serves with one schedule
/// (within one process).
pub fn graph_key(outputs: &[UOp]) -> u64 {
    let (topo, pos) = topo_positions(outputs);
    graph_hash(&topo, &pos)
}

/// The graph of `outputs` in topological order, and each node's position in it.
fn topo_positions(outputs: &[UOp]) -> (Vec<UOp>, Positions) {
    let sink = UOp::new(Ops::Sink, DType::VOID, outputs.to_vec(), Arg::None);
    let topo = sink.toposort();
    let pos: Positions = topo
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), i as u32))
        .collect();
    (topo, pos)
}

/// Schedules `outputs` through the cache: `schedule` computes a schedule on a miss.
// mnist: scheduling ~110 -> ~2 ms per step; warm 20-op chain ~27 -> ~6 us (see docs/performance.md)
pub(crate) fn cached_schedule(
    outputs: &[UOp],
    new_buffer: &mut dyn FnMut(DType, usize) -> UOp,
    schedule: impl FnOnce(&[UOp], &mut dyn FnMut(DType, usize) -> UOp) -> Schedule,
) -> Schedule {
    let (topo, pos) = topo_positions(outputs);
    let key = graph_hash(&topo, &pos);
    {
        let cache = cache().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = cache
            .get(&key)
            .filter(|e| matches_signature(&e.sig, &topo, &pos))
        {
            HITS.fetch_add(1, Ordering::Relaxed);
            return replay(e, &topo, new_buffer);
        }
    }
    let sig = signature(&topo, &pos);
    // a miss: schedule, recording the buffers created
    MISSES.fetch_add(1, Ordering::Relaxed);
    let mut created: Vec<(DType, usize, UOp)> = Vec::new();
    let sched = schedule(outputs, &mut |dt, n| {
        let b = new_buffer(dt, n);
        created.push((dt, n, b.clone()));
        b
    });
    if let Some(entry) = record(&sched, sig, &topo, &pos, &created) {
        let mut cache = cache().lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= MAX_ENTRIES {
            cache.clear();
        }
        cache.insert(key, entry);
    }
    sched
}

/// The cache entry for a freshly computed schedule; `None` if a buffer or view cannot be
/// expressed through the graph and the created buffers.
fn record(
    sched: &Schedule,
    sig: Vec<NodeSig>,
    topo: &[UOp],
    pos: &Positions,
    created: &[(DType, usize, UOp)],
) -> Option<Entry> {
    // only the buffers the schedule uses: lowering may create some for kernels it rebuilds
    let mut used: std::collections::HashSet<&UOp> = std::collections::HashSet::new();
    for b in sched
        .items
        .iter()
        .flat_map(|it| &it.bufs)
        .chain(sched.becomes.values())
    {
        used.insert(b);
        if b.op() == Ops::Reshape {
            used.insert(b.s(0));
        }
    }
    let created: Vec<&(DType, usize, UOp)> = created
        .iter()
        .filter(|(_, _, b)| used.contains(b))
        .collect();
    let new_index: HashMap<&UOp, usize> = created
        .iter()
        .enumerate()
        .map(|(j, (_, _, b))| (b, j))
        .collect();
    let buf_ref = |u: &UOp| -> Option<BufRef> {
        if let Some(&j) = new_index.get(u) {
            return Some(BufRef::New(j, None));
        }
        if u.op() == Ops::Reshape
            && let Some(&j) = new_index.get(u.s(0))
        {
            return Some(BufRef::New(j, Some(u.arg().clone())));
        }
        pos.get(u).map(|&p| BufRef::Node(p))
    };
    let items = sched
        .items
        .iter()
        .map(|it| {
            let bufs = it.bufs.iter().map(buf_ref).collect::<Option<Vec<_>>>()?;
            Some((it.ast.clone(), bufs))
        })
        .collect::<Option<Vec<_>>>()?;
    let mut becomes = Vec::new();
    for n in topo {
        if let Some(v) = sched.becomes.get(n) {
            becomes.push((pos[n], buf_ref(v)?));
        }
    }
    Some(Entry {
        sig,
        new_buffers: created.iter().map(|&&(dt, n, _)| (dt, n)).collect(),
        items,
        becomes,
    })
}

/// The schedule of a cached entry for the graph `topo` (equal to the entry's signature).
fn replay(e: &Entry, topo: &[UOp], new_buffer: &mut dyn FnMut(DType, usize) -> UOp) -> Schedule {
    let bufs: Vec<UOp> = e
        .new_buffers
        .iter()
        .map(|&(dt, n)| new_buffer(dt, n))
        .collect();
    let resolve = |r: &BufRef| -> UOp {
        match r {
            BufRef::Node(p) => topo[*p as usize].clone(),
            BufRef::New(j, None) => bufs[*j].clone(),
            BufRef::New(j, Some(arg)) => UOp::new(
                Ops::Reshape,
                bufs[*j].dtype(),
                vec![bufs[*j].clone()],
                arg.clone(),
            ),
        }
    };
    Schedule {
        items: e
            .items
            .iter()
            .map(|(ast, refs)| ScheduleItem {
                ast: ast.clone(),
                bufs: refs.iter().map(resolve).collect(),
            })
            .collect(),
        becomes: e
            .becomes
            .iter()
            .map(|(p, r)| (topo[*p as usize].clone(), resolve(r)))
            .collect(),
        var_vals: Default::default(),
    }
}

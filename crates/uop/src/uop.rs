//! [`UOp`]: an immutable, hash-consed IR node `(op, dtype, src, arg)`.
//!
//! Structurally equal nodes are the same allocation: building a node looks it up in a global
//! interner first. So `==` and hashing are pointer-cheap, common sub-expressions are shared for
//! free, and memo tables keyed by `UOp` work across passes. The interner holds weak references
//! only: a node is freed when the last `UOp` handle to it drops, and its interner entry with it.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tinygrad_dtype::DType;

use crate::{Arg, Ops};

/// The shared node behind a [`UOp`] handle.
pub struct UOpNode {
    /// The operation.
    pub op: Ops,
    /// The result dtype.
    pub dtype: DType,
    /// The sources (inputs).
    pub src: Box<[UOp]>,
    /// The payload.
    pub arg: Arg,
    /// Structural hash (from op, dtype, arg and the sources' hashes): stable across runs.
    hash: u64,
    /// Whether a `Copy` is this node or among its ancestors (set at construction).
    has_copy: bool,
    /// Whether a `Buffer` is this node or among its ancestors (set at construction).
    has_buffer: bool,
    /// Whether this node or an ancestor has symbolic sizes in its argument (set at
    /// construction).
    has_sym: bool,
    /// Lazily computed facts about this node (integer bounds, shape) cached by upper modules.
    pub(crate) cache: NodeCache,
}

/// Per-node caches. Not part of a node's identity.
#[derive(Default)]
pub(crate) struct NodeCache {
    /// `(vmin, vmax)` of integer/bool nodes, see `symbolic`.
    pub(crate) bounds: OnceLock<(i64, i64)>,
    /// The tensor-level shape, see [`UOp::shape`].
    pub(crate) shape: OnceLock<Option<Arc<[usize]>>>,
    /// The symbolic shape of nodes with symbolic sizes, see [`UOp::sym_shape`].
    pub(crate) sym_shape: OnceLock<Option<Arc<[crate::SInt]>>>,
}

/// A hasher for keys that are (or hash as) a node's structural hash, which is already a
/// well-mixed 64-bit value: one multiply-rotate instead of SipHash.
#[derive(Default)]
pub(crate) struct NodeHasher(u64);

impl Hasher for NodeHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A hash map keyed by nodes (or structural hashes) using [`NodeHasher`].
pub(crate) type NodeMap<K, V> = HashMap<K, V, BuildHasherDefault<NodeHasher>>;

/// A handle to a hash-consed IR node. Cloning is an `Arc` clone; equality is pointer equality.
#[derive(Clone)]
pub struct UOp(Arc<UOpNode>);

const SHARDS: usize = 16;

type Bucket = Vec<Weak<UOpNode>>;

/// The global interner: structural hash -> live nodes with that hash, sharded to cut contention.
fn interner() -> &'static [Mutex<NodeMap<u64, Bucket>>; SHARDS] {
    static INTERNER: OnceLock<[Mutex<NodeMap<u64, Bucket>>; SHARDS]> = OnceLock::new();
    INTERNER.get_or_init(|| std::array::from_fn(|_| Mutex::new(NodeMap::default())))
}

fn shard(hash: u64) -> &'static Mutex<NodeMap<u64, Bucket>> {
    &interner()[(hash as usize) % SHARDS]
}

/// Number of live interned nodes (all shards). For tests and debugging.
pub fn interned_count() -> usize {
    interner()
        .iter()
        .map(|s| {
            let map = s.lock().unwrap_or_else(|e| e.into_inner());
            map.values()
                .map(|b| b.iter().filter(|w| w.strong_count() > 0).count())
                .sum::<usize>()
        })
        .sum()
}

fn structural_hash(op: Ops, dtype: DType, src: &[UOp], arg: &Arg) -> u64 {
    // A fixed (unkeyed) hash: the same graph hashes the same in every run, so hashes can key
    // on-disk caches.
    let mut h = StableHasher::default();
    op.hash(&mut h);
    dtype.hash(&mut h);
    arg.hash(&mut h);
    h.write_usize(src.len());
    for s in src {
        h.write_u64(s.0.hash);
    }
    h.finish()
}

/// A fast, unkeyed, run-independent hasher: multiply-rotate per word, then a murmur3
/// finalizer so every output bit depends on every input bit.
#[derive(Default)]
struct StableHasher(u64);

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b) ^ ((chunk.len() as u64) << 59));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(v as u64);
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(v as u64);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

impl UOp {
    /// Builds (or finds) the node `(op, dtype, src, arg)`.
    pub fn new(op: Ops, dtype: DType, src: impl Into<Vec<UOp>>, arg: Arg) -> UOp {
        let src: Vec<UOp> = src.into();
        let hash = structural_hash(op, dtype, &src, &arg);
        let mut map = shard(hash).lock().unwrap_or_else(|e| e.into_inner());
        let bucket = map.entry(hash).or_default();
        for w in bucket.iter() {
            if let Some(n) = w.upgrade()
                && n.op == op
                && n.dtype == dtype
                && n.arg == arg
                && n.src.len() == src.len()
                && n.src.iter().zip(&src).all(|(a, b)| Arc::ptr_eq(&a.0, &b.0))
            {
                return UOp(n);
            }
        }
        let has_copy = op == Ops::Copy || src.iter().any(|s| s.0.has_copy);
        let has_buffer = op == Ops::Buffer || src.iter().any(|s| s.0.has_buffer);
        let has_sym = arg.is_symbolic() || src.iter().any(|s| s.0.has_sym);
        let node = Arc::new(UOpNode {
            op,
            dtype,
            src: src.into_boxed_slice(),
            arg,
            hash,
            has_copy,
            has_buffer,
            has_sym,
            cache: NodeCache::default(),
        });
        bucket.retain(|w| w.strong_count() > 0);
        bucket.push(Arc::downgrade(&node));
        UOp(node)
    }

    /// Whether this node or one of its ancestors is a `Copy` (a transfer between devices):
    /// known without walking the graph.
    #[inline]
    pub fn has_copy(&self) -> bool {
        self.0.has_copy
    }

    /// Whether this node or one of its ancestors is a `Buffer` (the graph reads device memory):
    /// known without walking the graph.
    #[inline]
    pub fn has_buffer(&self) -> bool {
        self.0.has_buffer
    }

    /// Whether this node or one of its ancestors has symbolic sizes (a movement op whose
    /// argument holds a variable): known without walking the graph.
    #[inline]
    pub fn has_sym(&self) -> bool {
        self.0.has_sym
    }

    /// The operation.
    #[inline]
    pub fn op(&self) -> Ops {
        self.0.op
    }

    /// The result dtype.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The sources.
    #[inline]
    pub fn src(&self) -> &[UOp] {
        &self.0.src
    }

    /// Source `i`.
    ///
    /// # Panics
    /// If there is no source `i` (the message names the op).
    #[inline]
    pub fn s(&self, i: usize) -> &UOp {
        self.0.src.get(i).unwrap_or_else(|| {
            panic!(
                "{}: has {} sources, asked for source {i}",
                self.op(),
                self.src().len()
            )
        })
    }

    /// The argument.
    #[inline]
    pub fn arg(&self) -> &Arg {
        &self.0.arg
    }

    /// The structural hash (stable across runs for the same graph).
    #[inline]
    pub fn structural_hash(&self) -> u64 {
        self.0.hash
    }

    /// The node behind the handle.
    pub fn node(&self) -> &UOpNode {
        &self.0
    }

    pub(crate) fn cache(&self) -> &NodeCache {
        &self.0.cache
    }

    /// The same node with other sources (a new or found node; `self` if unchanged).
    pub fn with_src(&self, src: impl Into<Vec<UOp>>) -> UOp {
        let src: Vec<UOp> = src.into();
        if src.len() == self.src().len() && src.iter().zip(self.src()).all(|(a, b)| a == b) {
            return self.clone();
        }
        UOp::new(self.op(), self.dtype(), src, self.arg().clone())
    }

    /// The same node with another argument.
    pub fn with_arg(&self, arg: Arg) -> UOp {
        UOp::new(self.op(), self.dtype(), self.src().to_vec(), arg)
    }

    /// The same node with another dtype.
    pub fn with_dtype(&self, dtype: DType) -> UOp {
        UOp::new(self.op(), dtype, self.src().to_vec(), self.arg().clone())
    }

    /// All nodes reachable from `self`, each once, sources before their users (`self` last).
    pub fn toposort(&self) -> Vec<UOp> {
        self.toposort_filtered(|_| true)
    }

    /// Like [`Self::toposort`], but does not descend into nodes for which `enter` is false
    /// (those nodes are still listed).
    pub fn toposort_filtered(&self, enter: impl Fn(&UOp) -> bool) -> Vec<UOp> {
        let mut out = Vec::new();
        let mut seen: NodeMap<UOp, bool> = NodeMap::default();
        let mut stack: Vec<(UOp, bool)> = vec![(self.clone(), false)];
        while let Some((n, children_done)) = stack.pop() {
            if children_done {
                out.push(n);
                continue;
            }
            if seen.contains_key(&n) {
                continue;
            }
            seen.insert(n.clone(), true);
            stack.push((n.clone(), true));
            if enter(&n) {
                for s in n.src().iter().rev() {
                    if !seen.contains_key(s) {
                        stack.push((s.clone(), false));
                    }
                }
            }
        }
        out
    }

    /// For every node reachable from `self`, the nodes that use it (its consumers).
    pub fn children_map(&self) -> HashMap<UOp, Vec<UOp>> {
        let mut map: HashMap<UOp, Vec<UOp>> = HashMap::new();
        for n in self.toposort() {
            map.entry(n.clone()).or_default();
            for s in n.src() {
                let users = map.entry(s.clone()).or_default();
                if !users.contains(&n) {
                    users.push(n.clone());
                }
            }
        }
        map
    }

    /// Whether `other` is reachable from `self` (including `self == other`).
    pub fn has_parent(&self, other: &UOp) -> bool {
        self.toposort().contains(other)
    }

    /// Replaces nodes per `map` everywhere in the graph below `self` (rebuilding users).
    pub fn substitute(&self, map: &HashMap<UOp, UOp>) -> UOp {
        let mut done: NodeMap<UOp, UOp> = NodeMap::default();
        for n in self.toposort_filtered(|n| !map.contains_key(n)) {
            let new = if let Some(r) = map.get(&n) {
                r.clone()
            } else {
                let src: Vec<UOp> = n.src().iter().map(|s| done[s].clone()).collect();
                n.with_src(src)
            };
            done.insert(n, new);
        }
        done[self].clone()
    }

    /// A multi-line listing: one line per node in topological order, shared sub-graphs once.
    pub fn pretty(&self) -> String {
        let nodes = self.toposort();
        let ids: HashMap<&UOp, usize> = nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
        let mut out = String::new();
        for (i, n) in nodes.iter().enumerate() {
            let srcs: Vec<String> = n.src().iter().map(|s| format!("%{}", ids[s])).collect();
            out.push_str(&format!(
                "%{i:<3} = {:<14} {:<16}",
                n.op().name(),
                n.dtype().to_string()
            ));
            out.push_str(&format!(" ({})", srcs.join(", ")));
            if !matches!(n.arg(), Arg::None) {
                out.push_str(&format!(" {}", n.arg()));
            }
            out.push('\n');
        }
        out
    }
}

impl Drop for UOpNode {
    fn drop(&mut self) {
        // Unregister: remove dead weak references in our bucket (ours among them).
        {
            let mut map = shard(self.hash).lock().unwrap_or_else(|e| e.into_inner());
            if let Some(bucket) = map.get_mut(&self.hash) {
                bucket.retain(|w| w.strong_count() > 0);
                if bucket.is_empty() {
                    map.remove(&self.hash);
                }
            }
        }
        // Drop sources iteratively: a deep chain must not overflow the stack.
        let mut stack: Vec<UOp> = std::mem::take(&mut self.src).into_vec();
        while let Some(u) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(u.0) {
                stack.extend(std::mem::take(&mut node.src).into_vec());
            }
        }
    }
}

impl PartialEq for UOp {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for UOp {}

impl Hash for UOp {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl fmt::Debug for UOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            return f.write_str(&self.pretty());
        }
        write!(f, "{}({}", self.op().name(), self.dtype())?;
        if !matches!(self.arg(), Arg::None) {
            write!(f, ", {}", self.arg())?;
        }
        for s in self.src() {
            write!(f, ", {s:?}")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for UOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::render::render_expr(self))
    }
}

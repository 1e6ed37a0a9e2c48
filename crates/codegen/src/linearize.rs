//! Linearization: a kernel AST (with `Range`s and `Reduce`s) becomes a flat list of UOps with
//! explicit loops (`Range` ... `End`) and register accumulators.
//!
//! Every node is placed in the innermost loop among the ranges it depends on, so loop-invariant
//! work is hoisted out of inner loops for free. Loops nest as: the kernel's output ranges in id
//! order (outermost first); a reduction's ranges nest inside the block where its result is
//! needed. A `Reduce(value, ranges)` becomes
//! ```text
//! acc = DefineReg; acc[0] = identity; for ranges { acc[0] = acc[0] op value }; result = acc[0]
//! ```
//! Reductions over the same ranges (the independent accumulators that kernel opts create) share
//! one loop nest: all accumulators are initialized before it and updated in its innermost body.

use std::collections::HashMap;

use tinygrad_dtype::{AddrSpace, DType};
use tinygrad_uop::{Arg, AxisKind, Ops, UOp};

/// Linearizes a kernel AST (a `Sink` of `Store`s) into program order.
pub fn linearize(ast: &UOp) -> Vec<UOp> {
    let topo = ast.toposort();
    // Ranges and their nesting.
    let reduces: Vec<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Reduce)
        .cloned()
        .collect();
    // Reduces with the same ranges form a group that shares one loop nest; its first reduce
    // (in topological order) is the group's leader.
    let mut reduce_ranges: HashMap<UOp, UOp> = HashMap::new(); // range -> its group's leader
    let mut members: HashMap<UOp, Vec<UOp>> = HashMap::new(); // leader -> the group
    let mut leader_of: HashMap<UOp, UOp> = HashMap::new(); // reduce -> its group's leader
    for r in &reduces {
        let leader = match r.src().get(1).and_then(|rng| reduce_ranges.get(rng)) {
            Some(l) if l.src()[1..] == r.src()[1..] => l.clone(),
            _ => r.clone(),
        };
        for rng in &r.src()[1..] {
            reduce_ranges.insert(rng.clone(), leader.clone());
        }
        members.entry(leader.clone()).or_default().push(r.clone());
        leader_of.insert(r.clone(), leader);
    }
    let mut out_ranges: Vec<UOp> = topo
        .iter()
        .filter(|n| n.op() == Ops::Range && !reduce_ranges.contains_key(*n))
        .cloned()
        .collect();
    out_ranges.sort_by_key(range_id);

    // deps: the ranges each node depends on (a reduce hides its own ranges).
    let mut deps: HashMap<UOp, Vec<UOp>> = HashMap::new();
    for n in &topo {
        let mut d: Vec<UOp> = Vec::new();
        let srcs = if n.op() == Ops::Reduce {
            &n.src()[..1]
        } else {
            n.src()
        };
        for s in srcs {
            for r in &deps[s] {
                if !d.contains(r) {
                    d.push(r.clone());
                }
            }
        }
        if n.op() == Ops::Range {
            d.push(n.clone());
        }
        if n.op() == Ops::Reduce {
            d.retain(|r| !n.src()[1..].contains(r));
        }
        deps.insert(n.clone(), d);
    }
    for group in members.values() {
        let mut d: Vec<UOp> = Vec::new();
        for r in group {
            for x in &deps[r] {
                if !d.contains(x) {
                    d.push(x.clone());
                }
            }
        }
        for r in group {
            deps.insert(r.clone(), d.clone());
        }
    }
    if members.values().any(|g| g.len() > 1) {
        // Users of a grouped reduce depend on everything the group does.
        for n in &topo {
            if n.op() == Ops::Reduce || n.src().is_empty() {
                continue;
            }
            let mut d: Vec<UOp> = Vec::new();
            for s in n.src() {
                for r in &deps[s] {
                    if !d.contains(r) {
                        d.push(r.clone());
                    }
                }
            }
            if n.op() == Ops::Range {
                d.push(n.clone());
            }
            deps.insert(n.clone(), d);
        }
    }

    let mut lin = Linearizer {
        topo: &topo,
        deps: &deps,
        out_ranges: &out_ranges,
        reduce_ranges: &reduce_ranges,
        members: &members,
        leader_of: &leader_of,
        depth: HashMap::new(),
        map: HashMap::new(),
        out: Vec::new(),
        next_acc: 0,
    };
    let blocks: Vec<Option<UOp>> = topo.iter().map(|n| lin.block_of(n)).collect();
    lin.emit_block(None, &blocks);
    lin.out
}

fn range_id(r: &UOp) -> usize {
    match r.arg() {
        Arg::Range(id, _) => *id,
        _ => usize::MAX,
    }
}

struct Linearizer<'a> {
    topo: &'a [UOp],
    deps: &'a HashMap<UOp, Vec<UOp>>,
    out_ranges: &'a [UOp],
    reduce_ranges: &'a HashMap<UOp, UOp>,
    members: &'a HashMap<UOp, Vec<UOp>>,
    leader_of: &'a HashMap<UOp, UOp>,
    depth: HashMap<UOp, usize>,
    map: HashMap<UOp, UOp>,
    out: Vec<UOp>,
    next_acc: i64,
}

impl Linearizer<'_> {
    /// Nesting depth of a range (outermost output range: 1).
    fn range_depth(&mut self, r: &UOp) -> usize {
        if let Some(d) = self.depth.get(r) {
            return *d;
        }
        let d = if let Some(red) = self.reduce_ranges.get(r).cloned() {
            let parent = self.innermost(&self.deps[&red].clone());
            let base = parent.map_or(0, |p| self.range_depth(&p));
            let mut rs: Vec<UOp> = red.src()[1..].to_vec();
            rs.sort_by_key(range_id);
            base + 1 + rs.iter().position(|x| x == r).expect("range of its reduce")
        } else {
            1 + self
                .out_ranges
                .iter()
                .position(|x| x == r)
                .expect("output range")
        };
        self.depth.insert(r.clone(), d);
        d
    }

    fn innermost(&mut self, rs: &[UOp]) -> Option<UOp> {
        let mut best: Option<(usize, UOp)> = None;
        for r in rs {
            let d = self.range_depth(r);
            if best.as_ref().is_none_or(|(bd, _)| d > *bd) {
                best = Some((d, r.clone()));
            }
        }
        best.map(|(_, r)| r)
    }

    fn block_of(&mut self, n: &UOp) -> Option<UOp> {
        let d = self.deps[n].clone();
        self.innermost(&d)
    }

    /// The range nested directly inside `r` in the same chain (output chain or a reduce's).
    fn child_range(&self, r: Option<&UOp>) -> Option<UOp> {
        match r {
            None => self.out_ranges.first().cloned(),
            Some(r) => {
                if let Some(red) = self.reduce_ranges.get(r) {
                    let mut rs: Vec<UOp> = red.src()[1..].to_vec();
                    rs.sort_by_key(range_id);
                    let i = rs.iter().position(|x| x == r)?;
                    rs.get(i + 1).cloned()
                } else {
                    let i = self.out_ranges.iter().position(|x| x == r)?;
                    self.out_ranges.get(i + 1).cloned()
                }
            }
        }
    }

    fn rebuild(&mut self, n: &UOp) -> UOp {
        let src: Vec<UOp> = n.src().iter().map(|s| self.map[s].clone()).collect();
        let new = n.with_src(src);
        self.map.insert(n.clone(), new.clone());
        new
    }

    fn emit_block(&mut self, block: Option<UOp>, blocks: &[Option<UOp>]) {
        for (i, n) in self.topo.iter().enumerate() {
            if blocks[i] != block || n.op() == Ops::Sink || self.map.contains_key(n) {
                continue;
            }
            if n.op() == Ops::Range {
                continue; // opened by its parent block
            }
            if n.op() == Ops::Reduce {
                let leader = self.leader_of[n].clone();
                self.emit_reduce(&leader, block.as_ref(), blocks);
            } else {
                let u = self.rebuild(n);
                self.out.push(u);
            }
        }
        // The next output loop opens at the end of its parent block (reduce chains are opened by
        // their reduce).
        let is_output_chain = block
            .as_ref()
            .is_none_or(|b| !self.reduce_ranges.contains_key(b));
        if is_output_chain && let Some(child) = self.child_range(block.as_ref()) {
            self.emit_loop(&child, blocks);
        }
    }

    fn emit_loop(&mut self, r: &UOp, blocks: &[Option<UOp>]) {
        let rr = self.rebuild(r);
        self.out.push(rr.clone());
        self.emit_block(Some(r.clone()), blocks);
        if let Some(red) = self.reduce_ranges.get(r).cloned() {
            match self.child_range(Some(r)) {
                Some(child) => self.emit_loop(&child, blocks),
                None => {
                    for m in self.members[&red].clone() {
                        self.emit_update(&m);
                    }
                }
            }
        }
        self.out
            .push(UOp::new(Ops::End, DType::VOID, vec![rr], Arg::None));
    }

    fn acc_of(&self, red: &UOp) -> UOp {
        self.map[&UOp::new(Ops::Noop, red.dtype(), vec![red.clone()], Arg::None)].clone()
    }

    /// Emits a group of reductions (given by its leader): accumulators, the shared loop nest,
    /// and the results.
    fn emit_reduce(&mut self, leader: &UOp, block: Option<&UOp>, blocks: &[Option<UOp>]) {
        let group = self.members[leader].clone();
        if group.len() > 1 {
            // Work of this block that any member's update needs (a value that does not depend
            // on the reduce's ranges) must come before the loop, even when it comes after the
            // leader in topological order.
            let needed: std::collections::HashSet<UOp> =
                group.iter().flat_map(|r| r.s(0).toposort()).collect();
            for (i, n) in self.topo.iter().enumerate() {
                if blocks[i].as_ref() == block
                    && needed.contains(n)
                    && !self.map.contains_key(n)
                    && !matches!(n.op(), Ops::Range | Ops::Reduce | Ops::Sink)
                {
                    let u = self.rebuild(n);
                    self.out.push(u);
                }
            }
        }
        let mut results = Vec::new();
        for red in &group {
            results.push(self.emit_acc(red));
        }
        let mut rs: Vec<UOp> = leader.src()[1..].to_vec();
        rs.sort_by_key(range_id);
        self.emit_loop(&rs[0], blocks);
        for (red, idx) in group.iter().zip(results) {
            let result = UOp::new(Ops::Load, red.dtype(), vec![idx], Arg::Int(1));
            self.out.push(result.clone());
            self.map.insert(red.clone(), result);
        }
    }

    /// Defines and initializes the accumulator of `red`; returns its register index.
    fn emit_acc(&mut self, red: &UOp) -> UOp {
        let dt = red.dtype();
        let Arg::Op(op) = red.arg() else {
            panic!("Reduce needs an Op arg")
        };
        let acc = UOp::new(
            Ops::DefineReg,
            dt.ptr(AddrSpace::Reg),
            vec![],
            Arg::Int(self.next_acc),
        );
        self.next_acc += 1;
        self.out.push(acc.clone());
        let idx = UOp::new(
            Ops::Index,
            acc.dtype(),
            vec![acc.clone(), UOp::index(0)],
            Arg::None,
        );
        let ident = tinygrad_schedule::rangeify::reduce_identity(*op, dt);
        self.out.push(ident.clone());
        self.out.push(idx.clone());
        self.out.push(UOp::new(
            Ops::Store,
            DType::VOID,
            vec![idx.clone(), ident],
            Arg::None,
        ));
        // remember the accumulator for the update at the innermost reduce loop
        self.map.insert(
            UOp::new(Ops::Noop, dt, vec![red.clone()], Arg::None),
            idx.clone(),
        );
        idx
    }

    fn emit_update(&mut self, red: &UOp) {
        let Arg::Op(op) = red.arg() else {
            unreachable!("checked in emit_reduce")
        };
        let idx = self.acc_of(red);
        let value = self.map[red.s(0)].clone();
        let cur = UOp::new(Ops::Load, red.dtype(), vec![idx.clone()], Arg::Int(0));
        let upd = cur.alu(*op, &[value]);
        self.out.push(cur);
        self.out.push(upd.clone());
        self.out
            .push(UOp::new(Ops::Store, DType::VOID, vec![idx, upd], Arg::None));
    }
}

/// A kernel name in tinygrad's style: `E_` (elementwise) or `r_` (reduce) and the loop sizes.
pub fn kernel_name(ast: &UOp) -> String {
    let topo = ast.toposort();
    let mut out: Vec<(usize, AxisKind, i64)> = topo
        .iter()
        .filter(|n| n.op() == Ops::Range)
        .filter_map(|n| match n.arg() {
            Arg::Range(id, k) => Some((*id, *k, n.s(0).as_int().unwrap_or(0))),
            _ => None,
        })
        .collect();
    out.sort();
    let has_reduce = topo.iter().any(|n| n.op() == Ops::Reduce);
    let mut name = String::from(if has_reduce { "r" } else { "E" });
    for (_, _, size) in &out {
        name.push_str(&format!("_{size}"));
    }
    if out.is_empty() {
        name.push_str("_1");
    }
    name
}

//! [`graph_rewrite`]: apply a [`PatternMatcher`] to every node of a graph until nothing changes.
//!
//! Two orders, as tinygrad's `graph_rewrite(..., bottom_up=...)`:
//! - default (`bottom_up = false`): a node's sources are rewritten first, then the node (rebuilt
//!   on the new sources) is rewritten to a fixed point; whatever a rule returns is itself
//!   rewritten the same way.
//! - `bottom_up = true`: a node is rewritten to a fixed point *before* its sources are visited;
//!   then its sources are processed and, if they changed, the rebuilt node is processed again.
//!
//! Every pass is memoized: each distinct node (shared sub-graphs included) is rewritten once.
//! The work is iterative (an explicit stack), so graph depth is not limited by the call stack.
//! A pass that keeps rewriting beyond a bound stops with a [`RewriteError`] naming the rules
//! that fired most, instead of looping forever.

use std::collections::HashMap;
use std::fmt;

use crate::uop::NodeMap;
use crate::{PatternMatcher, UOp};

/// A rewrite pass that did not converge.
#[derive(Debug, Clone)]
pub struct RewriteError {
    /// How many rewrites were applied before giving up.
    pub rewrites: usize,
    /// The rules that fired most, with their counts (most frequent first).
    pub top_rules: Vec<(String, usize)>,
}

impl fmt::Display for RewriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "graph_rewrite did not converge after {} rewrites; rules that fired most:",
            self.rewrites
        )?;
        for (name, n) in &self.top_rules {
            writeln!(f, "  {n:>8}x  {name}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RewriteError {}

enum Task {
    /// Visit a node for the first time.
    Enter(UOp),
    /// Sources of `orig` are done; `cur` is the (possibly pre-rewritten) node to rebuild.
    Rebuild { orig: UOp, cur: UOp },
    /// `orig` resolves to whatever `to` resolves to.
    Link { orig: UOp, to: UOp },
}

struct Pass<'a, C> {
    pm: &'a PatternMatcher<C>,
    done: NodeMap<UOp, UOp>,
    fired: Vec<usize>,
    rewrites: usize,
    limit: usize,
}

impl<C> Pass<'_, C> {
    fn apply(&mut self, u: &UOp, ctx: &mut C) -> Result<Option<UOp>, RewriteError> {
        let Some((r, rule)) = self.pm.rewrite_with_rule(u, ctx) else {
            return Ok(None);
        };
        self.fired[rule] += 1;
        self.rewrites += 1;
        if self.rewrites > self.limit {
            return Err(self.error());
        }
        Ok(Some(r))
    }

    fn error(&self) -> RewriteError {
        let mut counts: Vec<(String, usize)> = self
            .fired
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (self.pm.rules()[i].name.clone(), *n))
            .collect();
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        counts.truncate(5);
        RewriteError {
            rewrites: self.rewrites,
            top_rules: counts,
        }
    }
}

/// Rewrites `root` with `pm` to a fixed point (see the module docs), panicking if the pass does
/// not converge.
///
/// # Panics
/// With the [`RewriteError`] message if the rewrite does not converge.
pub fn graph_rewrite<C>(root: &UOp, pm: &PatternMatcher<C>, ctx: &mut C, bottom_up: bool) -> UOp {
    try_graph_rewrite(root, pm, ctx, bottom_up).unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`graph_rewrite`], returning an error instead of panicking when the pass does not
/// converge within `100_000 + 1_000 * nodes` rewrites.
pub fn try_graph_rewrite<C>(
    root: &UOp,
    pm: &PatternMatcher<C>,
    ctx: &mut C,
    bottom_up: bool,
) -> Result<UOp, RewriteError> {
    let limit = 100_000 + 1_000 * root.toposort().len();
    try_graph_rewrite_limit(root, pm, ctx, bottom_up, limit)
}

/// Like [`try_graph_rewrite`] with an explicit bound on the number of rewrites.
pub fn try_graph_rewrite_limit<C>(
    root: &UOp,
    pm: &PatternMatcher<C>,
    ctx: &mut C,
    bottom_up: bool,
    limit: usize,
) -> Result<UOp, RewriteError> {
    let mut pass = Pass {
        pm,
        done: HashMap::default(),
        fired: vec![0; pm.rules().len()],
        rewrites: 0,
        limit,
    };
    let mut stack = vec![Task::Enter(root.clone())];
    while let Some(task) = stack.pop() {
        match task {
            Task::Enter(n) => {
                if pass.done.contains_key(&n) {
                    continue;
                }
                let mut cur = n.clone();
                if bottom_up {
                    while let Some(r) = pass.apply(&cur, ctx)? {
                        if let Some(d) = pass.done.get(&r) {
                            cur = d.clone();
                            break;
                        }
                        cur = r;
                    }
                }
                stack.push(Task::Rebuild {
                    orig: n,
                    cur: cur.clone(),
                });
                for s in cur.src().iter().rev() {
                    if !pass.done.contains_key(s) {
                        stack.push(Task::Enter(s.clone()));
                    }
                }
            }
            Task::Rebuild { orig, cur } => {
                let new_src: Vec<UOp> = cur.src().iter().map(|s| pass.done[s].clone()).collect();
                let rebuilt = cur.with_src(new_src);
                if rebuilt != cur {
                    // New sources: the rebuilt node is a new node, process it from scratch.
                    if let Some(d) = pass.done.get(&rebuilt).cloned() {
                        pass.done.insert(orig, d);
                    } else if rebuilt == orig {
                        pass.done.insert(orig.clone(), orig);
                    } else {
                        stack.push(Task::Link {
                            orig,
                            to: rebuilt.clone(),
                        });
                        stack.push(Task::Enter(rebuilt));
                    }
                    continue;
                }
                if bottom_up {
                    // Already at a fixed point before visiting sources, which did not change.
                    pass.done.insert(cur.clone(), cur.clone());
                    pass.done.insert(orig, cur);
                    continue;
                }
                match pass.apply(&cur, ctx)? {
                    None => {
                        pass.done.insert(cur.clone(), cur.clone());
                        pass.done.insert(orig, cur);
                    }
                    Some(r) => {
                        if let Some(d) = pass.done.get(&r).cloned() {
                            pass.done.insert(orig, d);
                        } else {
                            stack.push(Task::Link {
                                orig,
                                to: r.clone(),
                            });
                            stack.push(Task::Enter(r));
                        }
                    }
                }
            }
            Task::Link { orig, to } => {
                let d = pass.done[&to].clone();
                pass.done.insert(orig, d);
            }
        }
    }
    Ok(pass.done[root].clone())
}

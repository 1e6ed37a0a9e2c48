//! Control flow: `If`, `Loop` and `Scan`, whose subgraphs run on the host (conditions and trip
//! counts read back) in a scope that sees the enclosing graph's values.

use tinygrad_tensor::{DType, Tensor};

use crate::error::Result;
use crate::model::{Scope, graph_id, run_graph};
use crate::narrow::Narrow;
use crate::node::Node;
use crate::proto::{GraphProto, NodeProto};
use crate::tensor_proto::to_tensor;

/// A graph attribute (`If`'s branches, `Loop`'s body).
fn subgraph<'a>(node: &Node, p: &'a NodeProto, name: &str) -> Result<&'a GraphProto> {
    p.attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| node.err(format!("the {name} graph is required")))
}

/// Runs a subgraph in a scope that sees `outer` (and `bound`), returning its outputs in order.
fn run_scoped(
    node: &Node,
    g: &GraphProto,
    outer: &Scope,
    bound: Vec<(String, Tensor)>,
    opset: i64,
    device: &str,
) -> Result<Vec<Tensor>> {
    let mut env = outer.clone();
    env.graph = graph_id(g);
    // (a profile times the main graph's nodes: this subgraph's time is its node's)
    env.profile = None;
    for t in &g.initializer {
        // constants: known before the run (nodes reading only them fold)
        env.bind_known(
            t.name.clone().unwrap_or_default(),
            to_tensor(t, None, device)?,
            Narrow::of(t.data_type.unwrap_or(0)),
            None,
        );
    }
    for (name, t) in bound {
        // an iteration's values may change shape from one iteration to the next
        env.ragged.insert(name.clone());
        env.bind(name, t, None);
    }
    run_graph(&g.node, &mut env, opset, device)?;
    g.output
        .iter()
        .map(|o| {
            let name = o.name.clone().unwrap_or_default();
            env.values
                .get(&name)
                .cloned()
                .ok_or_else(|| node.err(format!("the subgraph computes no {name:?}")))
        })
        .collect()
}

/// A boolean scalar read back.
fn host_bool(node: &Node, t: &Tensor) -> Result<bool> {
    let v = t
        .cast(DType::BOOL)
        .try_to_vec::<bool>()
        .map_err(|e| node.err(e.to_string()))?;
    single_bool(node, v)
}

/// The one value of a condition.
fn single_bool(node: &Node, v: Vec<bool>) -> Result<bool> {
    match v.as_slice() {
        [b] => Ok(*b),
        _ => Err(node.err(format!("condition of {} values: expected one", v.len()))),
    }
}

/// ONNX's `If`: the condition read on the host, then one branch run in the enclosing scope.
pub(crate) fn run_if(
    node: &Node,
    p: &NodeProto,
    env: &Scope,
    opset: i64,
    device: &str,
) -> Result<Vec<Tensor>> {
    node.check_attrs(&["then_branch", "else_branch"])?;
    let cond = node.input(0)?;
    if cond.numel() != 1 {
        return Err(node.err(format!(
            "condition of shape {:?}: expected one value",
            cond.shape()
        )));
    }
    let (then_g, else_g) = (
        subgraph(node, p, "then_branch")?,
        subgraph(node, p, "else_branch")?,
    );
    if node.host_input(0).is_none() {
        // a condition on the values (not known before the run): both branches, selected on
        // the device where they give outputs of the same shapes and dtypes (no host read, so
        // the run can be replayed); otherwise the condition is read back
        let both = run_scoped(node, then_g, env, vec![], opset, device)
            .and_then(|t| run_scoped(node, else_g, env, vec![], opset, device).map(|e| (t, e)));
        if let Ok((t, e)) = both
            && t.len() == e.len()
            && t.iter()
                .zip(&e)
                .all(|(a, b)| a.shape() == b.shape() && a.dtype() == b.dtype())
        {
            let c = cond.cast(DType::BOOL).reshape(&[] as &[isize]);
            return Ok(t.iter().zip(&e).map(|(a, b)| c.where_(a, b)).collect());
        }
    }
    let branch = if single_bool(node, node.bools_input(0)?.unwrap_or_default())? {
        then_g
    } else {
        else_g
    };
    run_scoped(node, branch, env, vec![], opset, device)
}

/// ONNX's `Loop`: the body run on the host while the trip count and condition allow; carried
/// values threaded through, scan outputs stacked along a new first axis.
pub(crate) fn run_loop(
    node: &Node,
    p: &NodeProto,
    env: &Scope,
    opset: i64,
    device: &str,
) -> Result<Vec<Tensor>> {
    node.check_attrs(&["body"])?;
    let body = subgraph(node, p, "body")?;
    let trips = match node.ints_input(0)? {
        Some(v) => Some(*v.first().ok_or_else(|| node.err("an empty trip count"))?),
        None => None,
    };
    let mut cond = match node.bools_input(1)? {
        Some(c) => single_bool(node, c)?,
        None => true,
    };
    let mut carried: Vec<Tensor> = (2..node.input_count())
        .map(|i| node.input(i).cloned())
        .collect::<Result<_>>()?;
    let n_carried = carried.len();
    if body.input.len() != n_carried + 2 || body.output.len() < n_carried + 1 {
        return Err(node.err(format!(
            "a body of {} inputs and {} outputs for {n_carried} carried values",
            body.input.len(),
            body.output.len()
        )));
    }
    let names: Vec<String> = body
        .input
        .iter()
        .map(|i| i.name.clone().unwrap_or_default())
        .collect();
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); body.output.len() - 1 - n_carried];
    let mut i = 0i64;
    while cond && trips.is_none_or(|m| i < m) {
        if i > 1_000_000 {
            return Err(node.err("more than 1,000,000 iterations"));
        }
        let mut bound = vec![
            (
                names[0].clone(),
                Tensor::from_bytes(&i.to_le_bytes(), DType::INT64, &[], device),
            ),
            (
                names[1].clone(),
                Tensor::from_bytes(&[u8::from(cond)], DType::BOOL, &[], device),
            ),
        ];
        bound.extend(names[2..].iter().cloned().zip(carried.iter().cloned()));
        let outs = run_scoped(node, body, env, bound, opset, device)?;
        cond = host_bool(node, &outs[0])?;
        carried = outs[1..=n_carried].iter().map(|t| t.contiguous()).collect();
        for (k, t) in outs[n_carried + 1..].iter().enumerate() {
            scans[k].push(t.clone());
        }
        i += 1;
    }
    let mut result = carried;
    for s in scans {
        if s.is_empty() {
            return Err(node.err("a scan output of a loop that ran no iteration"));
        }
        let refs: Vec<&Tensor> = s.iter().collect();
        result.push(Tensor::stack(&refs, 0));
    }
    Ok(result)
}

/// ONNX's `Scan` (opset 9+): the body run once per slice of the scan inputs along their scan
/// axes (forward or reversed), state values threaded through, the per-step scan outputs
/// stacked along their axes.
pub(crate) fn run_scan(
    node: &Node,
    p: &NodeProto,
    env: &Scope,
    opset: i64,
    device: &str,
) -> Result<Vec<Tensor>> {
    node.check_attrs(&[
        "body",
        "num_scan_inputs",
        "scan_input_axes",
        "scan_input_directions",
        "scan_output_axes",
        "scan_output_directions",
    ])?;
    if opset < 9 {
        return Err(node.err("Scan before opset 9 (batched, with sequence_lens) is not supported"));
    }
    let body = subgraph(node, p, "body")?;
    let m = node.int("num_scan_inputs", 0).max(0) as usize;
    let inputs: Vec<Tensor> = (0..node.input_count())
        .map(|i| node.input(i).cloned())
        .collect::<Result<_>>()?;
    if m == 0 || m > inputs.len() {
        return Err(node.err(format!("num_scan_inputs {m} for {} inputs", inputs.len())));
    }
    let n_state = inputs.len() - m;
    let k = body
        .output
        .len()
        .checked_sub(n_state)
        .ok_or_else(|| node.err("the body has fewer outputs than states"))?;
    let list = |name: &str, len: usize| node.ints(name).unwrap_or_else(|| vec![0; len]);
    let (in_axes, in_dirs) = (list("scan_input_axes", m), list("scan_input_directions", m));
    let (out_axes, out_dirs) = (
        list("scan_output_axes", k),
        list("scan_output_directions", k),
    );
    let scan_in: Vec<(Tensor, usize)> = inputs[n_state..]
        .iter()
        .enumerate()
        .map(|(j, t)| {
            Ok((
                t.clone(),
                node.axis(*in_axes.get(j).unwrap_or(&0), t.ndim())?,
            ))
        })
        .collect::<Result<_>>()?;
    let steps = scan_in[0].0.shape()[scan_in[0].1];
    if scan_in.iter().any(|(t, a)| t.shape()[*a] != steps) {
        return Err(node.err("scan inputs of different lengths along their axes"));
    }
    let names: Vec<String> = body
        .input
        .iter()
        .map(|i| i.name.clone().unwrap_or_default())
        .collect();
    if names.len() != n_state + m {
        return Err(node.err(format!(
            "a body of {} inputs for {n_state} states and {m} scan inputs",
            names.len()
        )));
    }
    let mut state: Vec<Tensor> = inputs[..n_state].to_vec();
    let mut outs: Vec<Vec<Tensor>> = vec![Vec::new(); k];
    for step in 0..steps {
        let mut bound: Vec<(String, Tensor)> = names[..n_state]
            .iter()
            .cloned()
            .zip(state.iter().cloned())
            .collect();
        for (j, (t, a)) in scan_in.iter().enumerate() {
            let i = if *in_dirs.get(j).unwrap_or(&0) != 0 {
                steps - 1 - step
            } else {
                step
            };
            let mut b: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
            b[*a] = (i, i + 1);
            bound.push((
                names[n_state + j].clone(),
                t.shrink(&b).squeeze(Some(*a as isize)),
            ));
        }
        let r = run_scoped(node, body, env, bound, opset, device)?;
        state = r[..n_state].iter().map(|t| t.contiguous()).collect();
        for (j, t) in r[n_state..].iter().enumerate() {
            outs[j].push(t.clone());
        }
    }
    let mut result = state;
    for (j, mut v) in outs.into_iter().enumerate() {
        if v.is_empty() {
            return Err(node.err("a scan output of a scan with no steps"));
        }
        if *out_dirs.get(j).unwrap_or(&0) != 0 {
            v.reverse();
        }
        let rank = v[0].ndim() + 1;
        let axis = node.axis(*out_axes.get(j).unwrap_or(&0), rank)?;
        let refs: Vec<&Tensor> = v.iter().collect();
        result.push(Tensor::stack(&refs, axis as isize));
    }
    Ok(result)
}

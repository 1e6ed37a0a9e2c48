//! [`OnnxModel`]: a decoded `ModelProto` with its initializers as tensors, run node by node on
//! [`Tensor`]s.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use indexmap::IndexMap;
use prost::Message;
use tinygrad_tensor::{DType, Tensor};

use crate::error::{OnnxError, Result};
use crate::node::Node;
use crate::proto::{GraphProto, ModelProto, NodeProto, ValueInfoProto, type_proto};
use crate::tensor_proto::{dtype_of, to_tensor};

/// One dimension of a declared input or output shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Fixed(usize),
    /// A named size the caller chooses (`batch`, `sequence`).
    Symbolic(String),
    /// Neither given.
    Unknown,
}

/// A graph input or output as the file declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueInfo {
    /// Its name.
    pub name: String,
    /// Its element type, when it is a tensor of a supported one.
    pub dtype: Option<DType>,
    /// Its shape, when declared.
    pub shape: Option<Vec<Dim>>,
}

/// An ONNX model ready to run on one device.
pub struct OnnxModel {
    graph: GraphProto,
    initializers: IndexMap<String, Tensor>,
    inputs: Vec<ValueInfo>,
    outputs: Vec<ValueInfo>,
    opset: i64,
    device: String,
}

impl OnnxModel {
    /// Loads `path` on the default device (external data files are read next to it).
    ///
    /// # Errors
    /// If the file can't be read or decoded, or an initializer can't be made.
    pub fn load(path: impl AsRef<Path>) -> Result<OnnxModel> {
        OnnxModel::load_on(path, &tinygrad_tensor::default_device())
    }

    /// [`OnnxModel::load`] on `device`.
    ///
    /// # Errors
    /// As [`OnnxModel::load`].
    pub fn load_on(path: impl AsRef<Path>, device: &str) -> Result<OnnxModel> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
            path: path.display().to_string(),
            source,
        })?;
        OnnxModel::decode(&bytes, path.parent(), device, &path.display().to_string())
    }

    /// A model from the bytes of an `.onnx` file (external data is refused: it has no folder).
    ///
    /// # Errors
    /// As [`OnnxModel::load`].
    pub fn from_bytes(bytes: &[u8], device: &str) -> Result<OnnxModel> {
        OnnxModel::decode(bytes, None, device, "model bytes")
    }

    fn decode(bytes: &[u8], dir: Option<&Path>, device: &str, what: &str) -> Result<OnnxModel> {
        let model = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode {
            what: what.to_string(),
            message: e.to_string(),
        })?;
        let graph = model.graph.ok_or_else(|| OnnxError::Decode {
            what: what.to_string(),
            message: "the model has no graph".into(),
        })?;
        let opset = model
            .opset_import
            .iter()
            .find(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
            .and_then(|o| o.version)
            .unwrap_or(1);
        let mut initializers = IndexMap::new();
        for t in &graph.initializer {
            let name = t.name.clone().unwrap_or_default();
            initializers.insert(name, to_tensor(t, dir, device)?);
        }
        let inputs = graph
            .input
            .iter()
            .filter(|v| !initializers.contains_key(v.name.as_deref().unwrap_or("")))
            .map(value_info)
            .collect();
        let outputs = graph.output.iter().map(value_info).collect();
        Ok(OnnxModel {
            graph,
            initializers,
            inputs,
            outputs,
            opset,
            device: device.to_string(),
        })
    }

    /// The inputs a caller gives (graph inputs that are not initializers), in order.
    pub fn inputs(&self) -> &[ValueInfo] {
        &self.inputs
    }

    /// The outputs [`OnnxModel::run`] returns, in order.
    pub fn outputs(&self) -> &[ValueInfo] {
        &self.outputs
    }

    /// The default domain's opset version the model imports.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// The device the model's tensors live on.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// Runs the graph on `inputs` (by name) and returns every graph output by name. The outputs
    /// are lazy tensors: reading them (`to_vec`) runs the kernels.
    ///
    /// # Errors
    /// An input missing, unknown, or of another dtype or shape than declared; a node whose op,
    /// attribute or dtype is not supported, or whose op fails on what it got.
    pub fn run(&self, inputs: &HashMap<String, Tensor>) -> Result<HashMap<String, Tensor>> {
        let mut env: HashMap<String, Tensor> = self
            .initializers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for name in inputs.keys() {
            if !self.inputs.iter().any(|i| &i.name == name) {
                return Err(OnnxError::Input {
                    name: name.clone(),
                    message: format!(
                        "not an input of the model (its inputs: {:?})",
                        self.inputs.iter().map(|i| &i.name).collect::<Vec<_>>()
                    ),
                });
            }
        }
        for info in &self.inputs {
            let t = inputs.get(&info.name).ok_or_else(|| OnnxError::Input {
                name: info.name.clone(),
                message: "missing".into(),
            })?;
            check_input(info, t)?;
            env.insert(
                info.name.clone(),
                t.try_to(&self.device).map_err(|e| OnnxError::Input {
                    name: info.name.clone(),
                    message: format!("moving it to {}: {e}", self.device),
                })?,
            );
        }
        run_graph(&self.graph.node, &mut env, self.opset, &self.device)?;
        self.outputs
            .iter()
            .map(|o| {
                env.remove(&o.name)
                    .map(|t| (o.name.clone(), t))
                    .ok_or_else(|| OnnxError::Node {
                        node: o.name.clone(),
                        op: "output".into(),
                        message: "no node computes this graph output".into(),
                    })
            })
            .collect()
    }
}

/// Runs `nodes` in order over `env` (name → value), binding each node's outputs.
fn run_graph(
    nodes: &[NodeProto],
    env: &mut HashMap<String, Tensor>,
    opset: i64,
    device: &str,
) -> Result<()> {
    for p in nodes {
        let op = p.op_type.as_deref().unwrap_or("");
        let node_name = || {
            p.name
                .clone()
                .filter(|n| !n.is_empty())
                .or_else(|| p.output.first().cloned())
                .unwrap_or_default()
        };
        if let Some(d) = p
            .domain
            .as_deref()
            .filter(|d| !d.is_empty() && *d != "ai.onnx")
        {
            return Err(OnnxError::Node {
                node: node_name(),
                op: op.to_string(),
                message: format!("domain {d:?} is not supported"),
            });
        }
        let mut args = Vec::with_capacity(p.input.len());
        for name in &p.input {
            if name.is_empty() {
                args.push(None);
                continue;
            }
            let t = env.get(name).ok_or_else(|| OnnxError::Node {
                node: node_name(),
                op: op.to_string(),
                message: format!("input {name:?} is not computed before it"),
            })?;
            args.push(Some(t.clone()));
        }
        let node = Node::new(p, opset, args, device);
        let outs = match op {
            "If" => run_if(&node, p, env, opset, device)?,
            "Loop" => run_loop(&node, p, env, opset, device)?,
            "Scan" => run_scan(&node, p, env, opset, device)?,
            _ => {
                // Tensor ops panic on misuse (shapes, dtypes) with a message naming the op: a
                // model whose node gets such inputs is an error of that node, not a crash.
                match catch_unwind(AssertUnwindSafe(|| crate::ops::run(&node))) {
                    Ok(r) => r?,
                    Err(panic) => {
                        let msg = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "the op panicked".into());
                        return Err(node.err(msg));
                    }
                }
            }
        };
        for (name, t) in p.output.iter().zip(outs) {
            if !name.is_empty() {
                env.insert(name.clone(), t);
            }
        }
    }
    Ok(())
}

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
    outer: &HashMap<String, Tensor>,
    bound: Vec<(String, Tensor)>,
    opset: i64,
    device: &str,
) -> Result<Vec<Tensor>> {
    let mut env = outer.clone();
    for t in &g.initializer {
        env.insert(
            t.name.clone().unwrap_or_default(),
            to_tensor(t, None, device)?,
        );
    }
    env.extend(bound);
    run_graph(&g.node, &mut env, opset, device)?;
    g.output
        .iter()
        .map(|o| {
            let name = o.name.clone().unwrap_or_default();
            env.get(&name)
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
    match v.as_slice() {
        [b] => Ok(*b),
        _ => Err(node.err(format!(
            "condition of shape {:?}: expected one value",
            t.shape()
        ))),
    }
}

/// ONNX's `If`: the condition read on the host, then one branch run in the enclosing scope.
fn run_if(
    node: &Node,
    p: &NodeProto,
    env: &HashMap<String, Tensor>,
    opset: i64,
    device: &str,
) -> Result<Vec<Tensor>> {
    node.check_attrs(&["then_branch", "else_branch"])?;
    let branch = if host_bool(node, node.input(0)?)? {
        "then_branch"
    } else {
        "else_branch"
    };
    run_scoped(node, subgraph(node, p, branch)?, env, vec![], opset, device)
}

/// ONNX's `Loop`: the body run on the host while the trip count and condition allow; carried
/// values threaded through, scan outputs stacked along a new first axis.
fn run_loop(
    node: &Node,
    p: &NodeProto,
    env: &HashMap<String, Tensor>,
    opset: i64,
    device: &str,
) -> Result<Vec<Tensor>> {
    node.check_attrs(&["body"])?;
    let body = subgraph(node, p, "body")?;
    let trips = match node.ints_input(0)? {
        Some(v) => Some(*v.first().ok_or_else(|| node.err("an empty trip count"))?),
        None => None,
    };
    let mut cond = match node.opt_input(1) {
        Some(c) => host_bool(node, c)?,
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
fn run_scan(
    node: &Node,
    p: &NodeProto,
    env: &HashMap<String, Tensor>,
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

fn value_info(v: &ValueInfoProto) -> ValueInfo {
    let name = v.name.clone().unwrap_or_default();
    let tensor = v.r#type.as_ref().and_then(|t| match &t.value {
        Some(type_proto::Value::TensorType(tt)) => Some(tt),
        _ => None,
    });
    let dtype = tensor
        .and_then(|t| t.elem_type)
        .and_then(|e| dtype_of(e).ok());
    let shape = tensor.and_then(|t| t.shape.as_ref()).map(|s| {
        s.dim
            .iter()
            .map(|d| match &d.value {
                Some(crate::proto::tensor_shape_proto::dimension::Value::DimValue(v))
                    if *v >= 0 =>
                {
                    Dim::Fixed(*v as usize)
                }
                Some(crate::proto::tensor_shape_proto::dimension::Value::DimParam(p)) => {
                    Dim::Symbolic(p.clone())
                }
                _ => Dim::Unknown,
            })
            .collect()
    });
    ValueInfo { name, dtype, shape }
}

fn check_input(info: &ValueInfo, t: &Tensor) -> Result<()> {
    let err = |message: String| OnnxError::Input {
        name: info.name.clone(),
        message,
    };
    if let Some(d) = info.dtype
        && d != t.dtype()
    {
        return Err(err(format!(
            "dtype {} where the model declares {d}",
            t.dtype()
        )));
    }
    if let Some(shape) = &info.shape {
        let got = t.shape();
        let fits = got.len() == shape.len()
            && got
                .iter()
                .zip(shape)
                .all(|(&g, d)| !matches!(d, Dim::Fixed(n) if *n != g));
        if !fits {
            return Err(err(format!(
                "shape {got:?} where the model declares {:?}",
                shape
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => n.to_string(),
                        Dim::Symbolic(s) => s.clone(),
                        Dim::Unknown => "?".into(),
                    })
                    .collect::<Vec<_>>()
            )));
        }
    }
    Ok(())
}

//! [`OnnxModel`]: a decoded `ModelProto` with its initializers as tensors, run node by node on
//! [`Tensor`]s.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use indexmap::IndexMap;
use prost::Message;
use tinygrad_tensor::{DType, Tensor};

use crate::error::{OnnxError, Result};
use crate::narrow::Narrow;
use crate::node::Node;
use crate::proto::{GraphProto, ModelProto, NodeProto, ValueInfoProto, type_proto};
use crate::tensor_proto::{container_of, to_tensor};

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
    /// Its element type, when it is a tensor of a supported one (for a [`Narrow`] type, the
    /// container dtype the tensor is given and returned in).
    pub dtype: Option<DType>,
    /// The element type when it is a [`Narrow`] one (`INT4`, `FLOAT8E4M3FNUZ`, ...).
    pub narrow: Option<Narrow>,
    /// Its shape, when declared.
    pub shape: Option<Vec<Dim>>,
}

/// An ONNX model ready to run on one device.
pub struct OnnxModel {
    graph: GraphProto,
    initializers: IndexMap<String, Tensor>,
    /// The [`Narrow`] tags of initializers held in a container dtype.
    initializer_narrow: HashMap<String, Narrow>,
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
        let mut initializer_narrow = HashMap::new();
        for t in &graph.initializer {
            let name = t.name.clone().unwrap_or_default();
            if let Some(n) = Narrow::of(t.data_type.unwrap_or(0)) {
                initializer_narrow.insert(name.clone(), n);
            }
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
            initializer_narrow,
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
    /// are lazy tensors: reading them (`to_vec`) runs the kernels. Values of a [`Narrow`] type
    /// are given and returned in its container dtype ([`ValueInfo::narrow`] says which).
    ///
    /// # Errors
    /// An input missing, unknown, or of another dtype or shape than declared; a node whose op,
    /// attribute or dtype is not supported, or whose op fails on what it got.
    pub fn run(&self, inputs: &HashMap<String, Tensor>) -> Result<HashMap<String, Tensor>> {
        let mut env = Scope {
            values: self
                .initializers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            narrow: self.initializer_narrow.clone(),
        };
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
            let t = t.try_to(&self.device).map_err(|e| OnnxError::Input {
                name: info.name.clone(),
                message: format!("moving it to {}: {e}", self.device),
            })?;
            env.bind(info.name.clone(), t, info.narrow);
        }
        run_graph(&self.graph.node, &mut env, self.opset, &self.device)?;
        self.outputs
            .iter()
            .map(|o| {
                env.values
                    .remove(&o.name)
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

/// The values a graph sees by name, with the [`Narrow`] tags of those held in a container dtype.
#[derive(Clone, Default)]
pub(crate) struct Scope {
    /// Each value by name.
    pub values: HashMap<String, Tensor>,
    /// The narrow element types of the values that have one.
    pub narrow: HashMap<String, Narrow>,
}

impl Scope {
    /// Binds `name` to `t`, tagged `narrow` (a rebinding drops an earlier tag).
    pub fn bind(&mut self, name: String, t: Tensor, narrow: Option<Narrow>) {
        match narrow {
            Some(n) => self.narrow.insert(name.clone(), n),
            None => self.narrow.remove(&name),
        };
        self.values.insert(name, t);
    }
}

/// Ops that take [`Narrow`]-typed inputs and compute on them by their tags.
const NARROW_AWARE: &[&str] = &[
    "Cast",
    "CastLike",
    "QuantizeLinear",
    "DequantizeLinear",
    "Shape",
    "Size",
];

/// Ops that move or select a [`Narrow`]-typed input 0's elements: their outputs keep its tag.
const KEEPS_NARROW: &[&str] = &[
    "Identity",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Expand",
    "Slice",
    "Gather",
    "Concat",
    "Split",
    "Tile",
];

/// The narrow tag of a node's outputs, after checking that its op accepts its inputs' tags.
fn narrow_outputs(node: &Node, p: &NodeProto, tags: &[Option<Narrow>]) -> Result<Option<Narrow>> {
    let op = node.op;
    if let Some((i, t)) = tags.iter().enumerate().find_map(|(i, t)| t.map(|t| (i, t))) {
        let moves = KEEPS_NARROW.contains(&op)
            && if op == "Concat" {
                tags.iter().all(|u| *u == Some(t))
            } else {
                i == 0 && tags[1..].iter().all(Option::is_none)
            };
        if !moves && !NARROW_AWARE.contains(&op) {
            return Err(node.err(format!(
                "input {i} has element type {} (held as {}), which this op does not take",
                t.name(),
                t.container()
            )));
        }
    }
    Ok(match op {
        "Cast" => Narrow::of(node.int("to", 0) as i32),
        "CastLike" => tags.get(1).copied().flatten(),
        "QuantizeLinear" => tags.get(2).copied().flatten().or_else(|| {
            Narrow::of(node.int("output_dtype", 0) as i32).filter(|_| node.has("output_dtype"))
        }),
        "Constant" => p
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("value"))
            .and_then(|a| a.t.as_ref())
            .and_then(|t| Narrow::of(t.data_type.unwrap_or(0))),
        op if KEEPS_NARROW.contains(&op) => tags.first().copied().flatten(),
        _ => None,
    })
}

/// Runs `nodes` in order over `env` (name → value), binding each node's outputs.
pub(crate) fn run_graph(
    nodes: &[NodeProto],
    env: &mut Scope,
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
            let t = env.values.get(name).ok_or_else(|| OnnxError::Node {
                node: node_name(),
                op: op.to_string(),
                message: format!("input {name:?} is not computed before it"),
            })?;
            args.push(Some(t.clone()));
        }
        let tags: Vec<Option<Narrow>> = p
            .input
            .iter()
            .map(|name| env.narrow.get(name).copied())
            .collect();
        let node = Node::new(p, opset, args, device).with_narrow(tags.clone());
        let out_tag = narrow_outputs(&node, p, &tags)?;
        let outs = match op {
            "If" => crate::control::run_if(&node, p, env, opset, device)?,
            "Loop" => crate::control::run_loop(&node, p, env, opset, device)?,
            "Scan" => crate::control::run_scan(&node, p, env, opset, device)?,
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
                env.bind(name.clone(), t, out_tag);
            }
        }
    }
    Ok(())
}

fn value_info(v: &ValueInfoProto) -> ValueInfo {
    let name = v.name.clone().unwrap_or_default();
    let tensor = v.r#type.as_ref().and_then(|t| match &t.value {
        Some(type_proto::Value::TensorType(tt)) => Some(tt),
        _ => None,
    });
    let elem = tensor.and_then(|t| t.elem_type);
    let dtype = elem.and_then(|e| container_of(e).ok());
    let narrow = elem.and_then(Narrow::of);
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
    ValueInfo {
        name,
        dtype,
        narrow,
        shape,
    }
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
    if let Some(n) = info.narrow {
        // the container holds more values than the type: each must be one of the type's
        let vals = t
            .cast(DType::FLOAT64)
            .try_to_vec::<f64>()
            .map_err(|e| err(format!("reading it: {e}")))?;
        if let Some(v) = vals.iter().find(|&&v| !n.holds(v)) {
            return Err(err(format!(
                "value {v} is not one of element type {} (given as {})",
                n.name(),
                n.container()
            )));
        }
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

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
pub(crate) fn run_graph(
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
                env.insert(name.clone(), t);
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

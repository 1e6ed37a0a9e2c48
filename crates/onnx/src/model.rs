//! [`OnnxModel`]: a decoded `ModelProto` with its initializers as tensors, run node by node on
//! [`Tensor`]s (replayed through a `Jit` once warm: `replay.rs`).

use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use prost::Message;
use tinygrad_tensor::nn::integer::Int8Weight;
use tinygrad_tensor::{DType, Tensor};

use crate::error::{OnnxError, Result};
use crate::narrow::Narrow;
use crate::node::{HostValues, Node};
use crate::proto::{GraphProto, ModelProto, NodeProto, ValueInfoProto, type_proto};
use crate::replay::{Folded, KnownValue, Replays};
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
///
/// [`OnnxModel::run`] replays: per signature of its inputs (shapes and dtypes), the first run
/// computes what is known before the model runs (initializers, constants, shapes, and what is
/// computed from them only) once and keeps it; the next two runs capture the rest of the graph
/// through a [`Jit`](tinygrad_tensor::Jit) (tinygrad's ONNX runner uses `TinyJit` the same
/// way), and later runs replay the captured kernels without building or scheduling a graph. A
/// graph that reads values back to the host while it runs (`NonZero`, a shape computed from
/// the inputs' values) is run node by node each time instead ([`OnnxModel::not_replayed`]
/// says why); so is every run under `JIT=0`.
pub struct OnnxModel {
    core: Arc<Core>,
    replays: Mutex<Replays>,
}

/// What a run needs of the model (shared with the replay's captured function).
pub(crate) struct Core {
    graph: GraphProto,
    initializers: IndexMap<String, Tensor>,
    /// The [`Narrow`] tags of initializers held in a container dtype.
    initializer_narrow: HashMap<String, Narrow>,
    /// Host copies of the small initializers (shapes, axes, scales).
    initializer_host: HashMap<String, Arc<HostValues>>,
    inputs: Vec<ValueInfo>,
    outputs: Vec<ValueInfo>,
    opset: i64,
    device: String,
    /// `MatMulInteger` weights prepared at load, by the node's first output.
    int8_weights: Arc<HashMap<String, Int8Weight>>,
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
        let mut graph = model.graph.ok_or_else(|| OnnxError::Decode {
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
        crate::fuse::fold_batchnorms(&mut graph, &mut initializers, &initializer_narrow);
        let int8_weights = Arc::new(crate::ops::quant::prepare_weights(
            &graph,
            &initializers,
            &initializer_narrow,
        )?);
        let mut initializer_host = HashMap::new();
        for (name, t) in &initializers {
            let host = HostValues::read(t).map_err(|message| OnnxError::Tensor {
                name: name.clone(),
                message: format!("reading it back: {message}"),
            })?;
            if let Some(h) = host {
                initializer_host.insert(name.clone(), Arc::new(h));
            }
        }
        let inputs = graph
            .input
            .iter()
            .filter(|v| !initializers.contains_key(v.name.as_deref().unwrap_or("")))
            .map(value_info)
            .collect();
        let outputs = graph.output.iter().map(value_info).collect();
        Ok(OnnxModel {
            core: Arc::new(Core {
                graph,
                initializers,
                initializer_narrow,
                initializer_host,
                inputs,
                outputs,
                opset,
                device: device.to_string(),
                int8_weights,
            }),
            replays: Mutex::new(Replays::default()),
        })
    }

    /// The inputs a caller gives (graph inputs that are not initializers), in order.
    pub fn inputs(&self) -> &[ValueInfo] {
        &self.core.inputs
    }

    /// The outputs [`OnnxModel::run`] returns, in order.
    pub fn outputs(&self) -> &[ValueInfo] {
        &self.core.outputs
    }

    /// The default domain's opset version the model imports.
    pub fn opset(&self) -> i64 {
        self.core.opset
    }

    /// The device the model's tensors live on.
    pub fn device(&self) -> &str {
        &self.core.device
    }

    /// Runs the graph on `inputs` (by name) and returns every graph output by name. Values of
    /// a [`Narrow`] type are given and returned in its container dtype ([`ValueInfo::narrow`]
    /// says which). The first runs with inputs of a new signature return lazy tensors (reading
    /// them, `to_vec`, runs the kernels); replays return them realized (see [`OnnxModel`]).
    ///
    /// # Errors
    /// An input missing, unknown, or of another dtype or shape than declared; a node whose op,
    /// attribute or dtype is not supported, or whose op fails on what it got; a device failure.
    pub fn run(&self, inputs: &HashMap<String, Tensor>) -> Result<HashMap<String, Tensor>> {
        let feeds = self.core.feeds(inputs)?;
        let outs = match self.replays.try_lock() {
            Ok(mut replays) => replays.run(&self.core, &feeds)?,
            // another thread is running the model: this run goes node by node
            Err(_) => self.core.run_plain(&feeds)?,
        };
        Ok(self.core.name_outputs(outs))
    }

    /// Runs the graph node by node, realizing each node's outputs before the next starts, and
    /// returns the outputs with each main-graph node's time (onnxruntime's profiler's view;
    /// nothing fuses across nodes here, so the total is more than a [`OnnxModel::run`]'s).
    ///
    /// # Errors
    /// As [`OnnxModel::run`].
    ///
    /// ```
    /// # let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/resnet_tiny.onnx")).unwrap();
    /// use std::collections::HashMap;
    /// use tinygrad_onnx::OnnxModel;
    /// use tinygrad_tensor::Tensor;
    /// let model = OnnxModel::from_bytes(&bytes, "CPU").unwrap();
    /// let x = Tensor::zeros(&[1, 3, 16, 16], tinygrad_tensor::DType::FLOAT32);
    /// let feeds = HashMap::from([(model.inputs()[0].name.clone(), x)]);
    /// let (outs, times) = model.run_profiled(&feeds).unwrap();
    /// assert!(times.iter().any(|t| t.op == "Conv" && t.ms >= 0.0));
    /// assert_eq!(outs.len(), model.outputs().len());
    /// ```
    pub fn run_profiled(
        &self,
        inputs: &HashMap<String, Tensor>,
    ) -> Result<(HashMap<String, Tensor>, Vec<NodeTime>)> {
        let feeds = self.core.feeds(inputs)?;
        let mut env = self.core.scope(&feeds, &[]);
        let times = Arc::new(Mutex::new(vec![]));
        env.profile = Some(times.clone());
        run_graph(
            &self.core.graph.node,
            &mut env,
            self.core.opset,
            &self.core.device,
        )?;
        let outs = self.core.outputs_of(&env)?;
        let times = std::mem::take(&mut *times.lock().unwrap_or_else(|p| p.into_inner()));
        Ok((self.core.name_outputs(outs), times))
    }

    /// How many runs were replays of a capture (see [`OnnxModel`]).
    ///
    /// ```
    /// # let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/resnet_tiny.onnx")).unwrap();
    /// use std::collections::HashMap;
    /// use tinygrad_onnx::OnnxModel;
    /// use tinygrad_tensor::Tensor;
    /// let model = OnnxModel::from_bytes(&bytes, "CPU").unwrap();
    /// let x = Tensor::zeros(&[1, 3, 16, 16], tinygrad_tensor::DType::FLOAT32);
    /// for _ in 0..5 {
    ///     model.run(&HashMap::from([(model.inputs()[0].name.clone(), x.clone())])).unwrap();
    /// }
    /// assert_eq!(model.replays(), 2); // folded, warmed up, captured, then replayed twice
    /// assert!(model.not_replayed().is_empty());
    /// ```
    pub fn replays(&self) -> usize {
        self.replays.lock().map_or(0, |r| r.replays())
    }

    /// For each input signature whose runs are not replayed, the signature and why (the
    /// capture's error): those runs go node by node.
    pub fn not_replayed(&self) -> Vec<String> {
        self.replays
            .lock()
            .map_or_else(|_| vec![], |r| r.not_replayed())
    }
}

impl Core {
    /// The model's inputs in order from `inputs` by name: checked against the declared
    /// dtypes and shapes, moved to the model's device.
    fn feeds(&self, inputs: &HashMap<String, Tensor>) -> Result<Vec<Tensor>> {
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
        self.inputs
            .iter()
            .map(|info| {
                let t = inputs.get(&info.name).ok_or_else(|| OnnxError::Input {
                    name: info.name.clone(),
                    message: "missing".into(),
                })?;
                check_input(info, t)?;
                t.try_to(&self.device).map_err(|e| OnnxError::Input {
                    name: info.name.clone(),
                    message: format!("moving it to {}: {e}", self.device),
                })
            })
            .collect()
    }

    /// The scope a run starts from: the initializers (known before the run, with host copies
    /// of the small ones) and the inputs.
    fn scope(&self, feeds: &[Tensor], keyed: &[Option<Arc<HostValues>>]) -> Scope {
        let mut env = Scope {
            values: self
                .initializers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            narrow: self.initializer_narrow.clone(),
            known: self
                .initializers
                .keys()
                .map(|k| (k.clone(), self.initializer_host.get(k).cloned()))
                .collect(),
            int8_weights: self.int8_weights.clone(),
            ..Scope::default()
        };
        for (k, (info, t)) in self.inputs.iter().zip(feeds).enumerate() {
            match keyed.get(k).cloned().flatten() {
                // an input whose values are part of the replay's signature
                Some(h) => env.bind_known(info.name.clone(), t.clone(), info.narrow, Some(h)),
                None => env.bind(info.name.clone(), t.clone(), info.narrow),
            }
        }
        env
    }

    /// The graph outputs from `env`, in order.
    fn outputs_of(&self, env: &Scope) -> Result<Vec<Tensor>> {
        self.outputs
            .iter()
            .map(|o| {
                env.values
                    .get(&o.name)
                    .cloned()
                    .ok_or_else(|| OnnxError::Node {
                        node: o.name.clone(),
                        op: "output".into(),
                        message: "no node computes this graph output".into(),
                    })
            })
            .collect()
    }

    /// `outs` (in the graph's output order) by name.
    pub(crate) fn name_outputs(&self, outs: Vec<Tensor>) -> HashMap<String, Tensor> {
        self.outputs
            .iter()
            .map(|o| o.name.clone())
            .zip(outs)
            .collect()
    }

    /// Runs every node.
    pub(crate) fn run_plain(&self, feeds: &[Tensor]) -> Result<Vec<Tensor>> {
        let mut env = self.scope(feeds, &[]);
        run_graph(&self.graph.node, &mut env, self.opset, &self.device)?;
        self.outputs_of(&env)
    }

    /// Runs every node, and folds: the values known before the run (`keyed`: the inputs whose
    /// values are part of the signature, with them) that a later run needs (read by a node that
    /// is not known, or a graph output; any inside a subgraph) are realized and kept, with host
    /// copies of the small ones, next to the nodes left to run.
    pub(crate) fn run_folding(
        &self,
        feeds: &[Tensor],
        keyed: Vec<Option<Arc<HostValues>>>,
    ) -> Result<(Vec<Tensor>, Folded)> {
        let mut env = self.scope(feeds, &keyed);
        let sink = Arc::new(Mutex::new(Vec::new()));
        env.fold_sink = Some(sink.clone());
        let mut folded_nodes = vec![];
        let nodes: Vec<&NodeProto> = self.graph.node.iter().collect();
        run_nodes(
            &nodes,
            &mut env,
            self.opset,
            &self.device,
            Some(&mut folded_nodes),
        )?;
        let folded: HashSet<usize> = folded_nodes.into_iter().collect();
        let rest: Vec<usize> = (0..nodes.len()).filter(|i| !folded.contains(i)).collect();
        let mut needed: HashSet<String> = self.outputs.iter().map(|o| o.name.clone()).collect();
        names_read(rest.iter().map(|&i| nodes[i]), &mut needed);
        let mut top = vec![];
        for &i in &folded {
            for name in &nodes[i].output {
                if let Some(t) = env.values.get(name).filter(|_| needed.contains(name)) {
                    top.push((name.clone(), t.clone(), env.narrow.get(name).copied()));
                }
            }
        }
        // a loop body records its values on every iteration: the last is kept (all are equal)
        let nested: IndexMap<(usize, String), (Tensor, Option<Narrow>)> =
            std::mem::take(&mut *sink.lock().unwrap_or_else(|p| p.into_inner()))
                .into_iter()
                .map(|(g, name, t, narrow)| ((g, name), (t, narrow)))
                .collect();
        let refs: Vec<&Tensor> = top
            .iter()
            .map(|(_, t, _)| t)
            .chain(nested.values().map(|(t, _)| t))
            .collect();
        Tensor::try_realize_all(&refs).map_err(|e| OnnxError::Run {
            message: format!("realizing the values known before the run: {e}"),
        })?;
        let with_host = |name: String, t: Tensor, narrow: Option<Narrow>| {
            let host = HostValues::read(&t).map_err(|message| OnnxError::Run {
                message: format!("reading {name:?} back: {message}"),
            })?;
            Ok((name, t, narrow, host.map(Arc::new)))
        };
        let values = top
            .into_iter()
            .map(|(name, t, narrow)| with_host(name, t, narrow))
            .collect::<Result<Vec<_>>>()?;
        let nested = nested
            .into_iter()
            .map(|((g, name), (t, narrow))| Ok(((g, name.clone()), with_host(name, t, narrow)?)))
            .collect::<Result<HashMap<_, _>>>()?;
        let outs = self.outputs_of(&env)?;
        Ok((
            outs,
            Folded {
                values,
                rest,
                nested: Arc::new(nested),
                keyed,
            },
        ))
    }

    /// Runs the nodes left after `folded`, with its values.
    pub(crate) fn run_folded(&self, feeds: &[Tensor], folded: &Folded) -> Result<Vec<Tensor>> {
        let mut env = self.scope(feeds, &folded.keyed);
        env.precomputed = Some(folded.nested.clone());
        for (name, t, narrow, host) in &folded.values {
            env.bind_known(name.clone(), t.clone(), *narrow, host.clone());
        }
        let rest: Vec<&NodeProto> = folded.rest.iter().map(|&i| &self.graph.node[i]).collect();
        run_nodes(&rest, &mut env, self.opset, &self.device, None)?;
        self.outputs_of(&env)
    }
}

/// Every value name `nodes` read, their subgraphs' nodes included (a subgraph reads the
/// enclosing graph's values by name).
fn names_read<'a>(nodes: impl Iterator<Item = &'a NodeProto>, out: &mut HashSet<String>) {
    for p in nodes {
        out.extend(p.input.iter().filter(|n| !n.is_empty()).cloned());
        for a in &p.attribute {
            for g in a.g.iter().chain(&a.graphs) {
                names_read(g.node.iter(), out);
                out.extend(g.output.iter().filter_map(|o| o.name.clone()));
            }
        }
    }
}

/// The values a graph sees by name, with the [`Narrow`] tags of those held in a container dtype
/// and which are known before the model runs.
#[derive(Clone, Default)]
pub(crate) struct Scope {
    /// Each value by name.
    pub values: HashMap<String, Tensor>,
    /// The narrow element types of the values that have one.
    pub narrow: HashMap<String, Narrow>,
    /// The values known before the model runs (initializers, constants, shapes, and values
    /// computed from them only), with host copies of those read back.
    pub known: HashMap<String, Option<Arc<HostValues>>>,
    /// The subgraph this scope runs ([`graph_id`]; 0 for the main graph).
    pub graph: usize,
    /// In a folding run: where nodes inside subgraphs whose values are known before the run
    /// record them.
    pub fold_sink: Option<Arc<Mutex<Vec<NestedValue>>>>,
    /// In later runs: those values, by subgraph and name (their nodes are not run again).
    pub precomputed: Option<Arc<HashMap<(usize, String), KnownValue>>>,
    /// In a profiled run ([`OnnxModel::run_profiled`]): each main-graph node's time.
    pub profile: Option<Arc<Mutex<Vec<NodeTime>>>>,
    /// Values whose shapes may depend on the data (an op read values back to size them, or a
    /// loop's values): their shapes are not known before the run.
    pub ragged: HashSet<String>,
    /// `MatMulInteger` weights prepared at load, by the node's first output (main graph).
    pub int8_weights: Arc<HashMap<String, Int8Weight>>,
}

/// One node's time in [`OnnxModel::run_profiled`].
#[derive(Clone, Debug, PartialEq)]
pub struct NodeTime {
    /// The node's name (or its first output's).
    pub node: String,
    /// Its op type.
    pub op: String,
    /// Milliseconds from its start until its outputs were realized.
    pub ms: f64,
}

/// A subgraph's value known before the run: subgraph, name, tensor, narrow tag.
pub(crate) type NestedValue = (usize, String, Tensor, Option<Narrow>);

/// A subgraph's identity in a run: its address inside the model (which never moves: the
/// model's graph is behind an `Arc`).
pub(crate) fn graph_id(g: &GraphProto) -> usize {
    g as *const GraphProto as usize
}

impl Scope {
    /// Binds `name` to `t`, tagged `narrow` (a rebinding drops an earlier tag), not known
    /// before the run.
    pub fn bind(&mut self, name: String, t: Tensor, narrow: Option<Narrow>) {
        self.known.remove(&name);
        self.bind_value(name, t, narrow);
    }

    /// Binds `name` to a value known before the run (with its host copy, when read).
    pub fn bind_known(
        &mut self,
        name: String,
        t: Tensor,
        narrow: Option<Narrow>,
        host: Option<Arc<HostValues>>,
    ) {
        self.known.insert(name.clone(), host);
        self.bind_value(name, t, narrow);
    }

    fn bind_value(&mut self, name: String, t: Tensor, narrow: Option<Narrow>) {
        match narrow {
            Some(n) => self.narrow.insert(name.clone(), n),
            None => self.narrow.remove(&name),
        };
        self.values.insert(name, t);
    }
}

/// Ops whose output is known before the run whatever their inputs: it depends on the inputs'
/// shapes only.
const SHAPE_ONLY: &[&str] = &["Shape", "Size"];

/// Ops whose outputs' shapes may depend on the data whatever they read (values read back
/// directly, loops' trip counts and carried values).
const DATA_SHAPED: &[&str] = &[
    "NonZero",
    "Unique",
    "NonMaxSuppression",
    "Compress",
    "Loop",
    "Scan",
];

/// Ops never computed ahead: random draws differ from run to run, and control flow runs
/// subgraphs that may read anything.
const NEVER_FOLDED: &[&str] = &[
    "RandomNormal",
    "RandomUniform",
    "RandomNormalLike",
    "RandomUniformLike",
    "Bernoulli",
    "Multinomial",
    "Dropout",
    "If",
    "Loop",
    "Scan",
];

/// Whether node `p`'s outputs are known before the run, given `env`.
fn is_known(p: &NodeProto, env: &Scope) -> bool {
    let op = p.op_type.as_deref().unwrap_or("");
    let inputs_shaped_ahead = p.input.iter().all(|n| !env.ragged.contains(n));
    !NEVER_FOLDED.contains(&op)
        && ((SHAPE_ONLY.contains(&op) && inputs_shaped_ahead)
            || p.input
                .iter()
                .filter(|n| !n.is_empty())
                .all(|n| env.known.contains_key(n)))
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
    let nodes: Vec<&NodeProto> = nodes.iter().collect();
    run_nodes(&nodes, env, opset, device, None)
}

/// [`run_graph`]. In a folding run (`env.fold_sink`), the outputs of nodes known before the run
/// are marked known; the main graph's such nodes are listed in `folded` (by index), a
/// subgraph's recorded in the sink. In later runs, a subgraph node whose outputs were recorded
/// (`env.precomputed`) is not run: its values are bound.
fn run_nodes(
    nodes: &[&NodeProto],
    env: &mut Scope,
    opset: i64,
    device: &str,
    mut folded: Option<&mut Vec<usize>>,
) -> Result<()> {
    for (index, &p) in nodes.iter().enumerate() {
        if env.graph != 0
            && let Some(pre) = env.precomputed.clone()
        {
            let values: Option<Vec<&KnownValue>> = p
                .output
                .iter()
                .filter(|o| !o.is_empty())
                .map(|o| pre.get(&(env.graph, o.clone())))
                .collect();
            if let Some(values) = values.filter(|v| !v.is_empty()) {
                for (name, t, narrow, host) in values {
                    env.bind_known(name.clone(), t.clone(), *narrow, host.clone());
                }
                continue;
            }
        }
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
        let host = p
            .input
            .iter()
            .map(|name| env.known.get(name).cloned().flatten())
            .collect();
        let started = std::time::Instant::now();
        let inputs_known = p
            .input
            .iter()
            .map(|name| env.known.contains_key(name))
            .collect();
        let node = Node::new(p, opset, args, device)
            .with_narrow(tags.clone())
            .with_host(host)
            .with_known(inputs_known)
            .with_int8_weight(
                p.output
                    .first()
                    .and_then(|o| env.int8_weights.get(o))
                    .cloned(),
            );
        let known = env.fold_sink.is_some() && is_known(p, env);
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
        let ragged = DATA_SHAPED.contains(&op)
            || node.read_values()
            || p.input.iter().any(|n| env.ragged.contains(n));
        for name in p.output.iter().filter(|n| !n.is_empty()) {
            if ragged {
                env.ragged.insert(name.clone());
            } else {
                env.ragged.remove(name);
            }
        }
        for (name, t) in p.output.iter().zip(outs) {
            if name.is_empty() {
            } else if known {
                if env.graph != 0
                    && let Some(sink) = &env.fold_sink
                {
                    let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
                    sink.push((env.graph, name.clone(), t.clone(), out_tag));
                }
                env.bind_known(name.clone(), t, out_tag, None);
            } else {
                env.bind(name.clone(), t, out_tag);
            }
        }
        if let Some(times) = env.profile.clone() {
            let outs: Vec<&Tensor> = p
                .output
                .iter()
                .filter_map(|name| env.values.get(name))
                .collect();
            Tensor::try_realize_all(&outs).map_err(|e| OnnxError::Run {
                message: format!("node {}: {e}", node_name()),
            })?;
            let mut times = times.lock().unwrap_or_else(|p| p.into_inner());
            times.push(NodeTime {
                node: node_name(),
                op: op.to_string(),
                ms: started.elapsed().as_secs_f64() * 1e3,
            });
        }
        if known
            && env.graph == 0
            && let Some(f) = folded.as_deref_mut()
        {
            f.push(index);
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

//! One graph node as the op functions see it: its attributes by name (with typed getters that
//! apply a default or name the missing attribute), its inputs (absent optional inputs are
//! `None`) and the errors that name it.

use std::cell::Cell;
use std::sync::Arc;

use indexmap::IndexMap;
use tinygrad_tensor::nn::integer::Int8Weight;
use tinygrad_tensor::{ConstValue, DType, Tensor};

use crate::error::{OnnxError, Result};
use crate::narrow::Narrow;
use crate::proto::{AttributeProto, NodeProto};
use crate::tensor_proto::to_tensor;

/// A node being run: its name, op, opset and attributes, and its input values.
pub struct Node<'a> {
    /// The node's name (or its first output's).
    pub name: String,
    /// The op type.
    pub op: &'a str,
    /// The opset version of the default domain the model imports.
    pub opset: i64,
    attrs: IndexMap<&'a str, &'a AttributeProto>,
    inputs: Vec<Option<Tensor>>,
    narrow: Vec<Option<Narrow>>,
    host: Vec<Option<Arc<HostValues>>>,
    /// Which inputs are known before the run (reading those does not make shapes depend on
    /// the data).
    known: Vec<bool>,
    /// Whether an op read the values of an input not known before the run.
    read_values: Cell<bool>,
    outputs: usize,
    device: &'a str,
    /// `MatMulInteger`'s weight prepared at load (its `b` and zero point are initializers).
    int8_weight: Option<Int8Weight>,
}

impl<'a> Node<'a> {
    /// The node `p` with its input values.
    pub fn new(p: &'a NodeProto, opset: i64, inputs: Vec<Option<Tensor>>, device: &'a str) -> Self {
        let name = match p.name.as_deref() {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => p.output.first().cloned().unwrap_or_default(),
        };
        Node {
            name,
            op: p.op_type.as_deref().unwrap_or(""),
            opset,
            attrs: p
                .attribute
                .iter()
                .map(|a| (a.name.as_deref().unwrap_or(""), a))
                .collect(),
            inputs,
            narrow: Vec::new(),
            host: Vec::new(),
            known: Vec::new(),
            read_values: Cell::new(false),
            outputs: p.output.len(),
            device,
            int8_weight: None,
        }
    }

    /// The node with its inputs' [`Narrow`] element types (by input position).
    pub fn with_narrow(mut self, narrow: Vec<Option<Narrow>>) -> Self {
        self.narrow = narrow;
        self
    }

    /// The node with the host copies of inputs whose values are known before the model runs
    /// (by input position): reading them costs no device read, and a replayed run
    /// ([`crate::OnnxModel::run`]) may read them.
    pub fn with_host(mut self, host: Vec<Option<Arc<HostValues>>>) -> Self {
        self.host = host;
        self
    }

    /// The node with which inputs are known before the run (by input position).
    pub fn with_known(mut self, known: Vec<bool>) -> Self {
        self.known = known;
        self
    }

    /// The node with its weight prepared at load (`MatMulInteger`'s `b`).
    pub fn with_int8_weight(mut self, w: Option<Int8Weight>) -> Self {
        self.int8_weight = w;
        self
    }

    /// The weight prepared at load, if any.
    pub fn int8_weight(&self) -> Option<&Int8Weight> {
        self.int8_weight.as_ref()
    }

    /// Notes a read of input `i`'s values from the device.
    fn note_read(&self, i: usize) {
        if !self.known.get(i).copied().unwrap_or(false) {
            self.read_values.set(true);
        }
    }

    /// Input `i`'s host copy, when its values are known before the run.
    pub fn host_input(&self, i: usize) -> Option<&HostValues> {
        self.host.get(i).and_then(Option::as_deref)
    }

    /// Whether the op read the values of an input not known before the run
    /// ([`Node::ints_input`] and the like): its outputs' shapes may then depend on the data.
    pub fn read_values(&self) -> bool {
        self.read_values.get()
    }

    /// Input `i`'s [`Narrow`] element type, when it is held in a container dtype.
    pub fn narrow_input(&self, i: usize) -> Option<Narrow> {
        self.narrow.get(i).copied().flatten()
    }

    /// An error naming this node and its op.
    pub fn err(&self, message: impl Into<String>) -> OnnxError {
        OnnxError::Node {
            node: self.name.clone(),
            op: self.op.to_string(),
            message: message.into(),
        }
    }

    /// The device its tensors live on.
    pub fn device(&self) -> &str {
        self.device
    }

    /// How many inputs the node lists (absent optional ones included).
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }

    /// How many outputs the node lists.
    pub fn output_count(&self) -> usize {
        self.outputs
    }

    /// Input `i`, which must be present.
    pub fn input(&self, i: usize) -> Result<&Tensor> {
        self.opt_input(i)
            .ok_or_else(|| self.err(format!("input {i} is required")))
    }

    /// Input `i` when given.
    pub fn opt_input(&self, i: usize) -> Option<&Tensor> {
        self.inputs.get(i).and_then(Option::as_ref)
    }

    /// Every present input, in order.
    pub fn present_inputs(&self) -> Vec<&Tensor> {
        self.inputs.iter().flatten().collect()
    }

    /// Input `i` read back as integers (a shape, axes, pads: ONNX passes them as tensors).
    pub fn ints_input(&self, i: usize) -> Result<Option<Vec<i64>>> {
        let Some(t) = self.opt_input(i) else {
            return Ok(None);
        };
        if !t.dtype().is_int() {
            return Err(self.err(format!("input {i} must be integers, got {}", t.dtype())));
        }
        if let Some(ints) = self.host_input(i).and_then(|h| h.ints.clone()) {
            return Ok(Some(ints));
        }
        self.note_read(i);
        let v = t
            .cast(DType::INT64)
            .try_to_vec::<i64>()
            .map_err(|e| self.err(format!("reading input {i}: {e}")))?;
        Ok(Some(v))
    }

    /// Input `i` read back as floats.
    pub fn floats_input(&self, i: usize) -> Result<Option<Vec<f64>>> {
        let Some(t) = self.opt_input(i) else {
            return Ok(None);
        };
        if let Some(h) = self.host_input(i) {
            return Ok(Some(h.floats.clone()));
        }
        self.note_read(i);
        let v = t
            .cast(DType::FLOAT64)
            .try_to_vec::<f64>()
            .map_err(|e| self.err(format!("reading input {i}: {e}")))?;
        Ok(Some(v))
    }

    /// Input `i` read back as booleans (a condition, a mask: nonzero is true).
    pub fn bools_input(&self, i: usize) -> Result<Option<Vec<bool>>> {
        let Some(t) = self.opt_input(i) else {
            return Ok(None);
        };
        if let Some(h) = self.host_input(i) {
            // (NaN is true, as a cast to bool makes it)
            return Ok(Some(h.floats.iter().map(|&v| v != 0.0).collect()));
        }
        self.note_read(i);
        let v = t
            .cast(DType::BOOL)
            .try_to_vec::<bool>()
            .map_err(|e| self.err(format!("reading input {i}: {e}")))?;
        Ok(Some(v))
    }

    fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.attrs.get(name).copied()
    }

    /// Whether the attribute is set.
    pub fn has(&self, name: &str) -> bool {
        self.attrs.contains_key(name)
    }

    /// An integer attribute, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).and_then(|a| a.i).unwrap_or(default)
    }

    /// A float attribute, or `default`.
    pub fn float(&self, name: &str, default: f64) -> f64 {
        self.attr(name).and_then(|a| a.f).map_or(default, f64::from)
    }

    /// A string attribute, or `default`.
    pub fn string(&self, name: &str, default: &str) -> String {
        self.attr(name).and_then(|a| a.s.as_ref()).map_or_else(
            || default.to_string(),
            |s| String::from_utf8_lossy(s).into_owned(),
        )
    }

    /// An integer-list attribute, when set.
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }

    /// A string-list attribute, when set.
    pub fn strings(&self, name: &str) -> Option<Vec<String>> {
        self.attr(name).map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
    }

    /// A float-list attribute, when set.
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr(name).map(|a| a.floats.clone())
    }

    /// A tensor attribute (`Constant`'s `value`), when set.
    pub fn tensor(&self, name: &str) -> Result<Option<Tensor>> {
        match self.attr(name).and_then(|a| a.t.as_ref()) {
            Some(t) => to_tensor(t, None, self.device).map(Some),
            None => Ok(None),
        }
    }

    /// The attributes this op function doesn't read, to refuse (an attribute ignored would be a
    /// silent wrong answer).
    pub fn check_attrs(&self, known: &[&str]) -> Result<()> {
        match self.attrs.keys().find(|k| !known.contains(k)) {
            Some(k) => Err(self.err(format!("attribute {k:?} is not supported"))),
            None => Ok(()),
        }
    }

    /// `axis` (may be negative) as an index into `rank` dims.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize> {
        let r = rank as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if (0..r.max(1)).contains(&a) {
            Ok(a as usize)
        } else {
            Err(self.err(format!("axis {axis} out of range for rank {rank}")))
        }
    }
}

/// The values of a small tensor known before the model runs (an initializer, a constant, a
/// shape, or what is computed from them only), read back once.
#[derive(Clone, Debug, PartialEq)]
pub struct HostValues {
    /// The values as integers, for an integer tensor.
    pub ints: Option<Vec<i64>>,
    /// The values as `f64`.
    pub floats: Vec<f64>,
}

impl HostValues {
    /// Tensors of at most this many elements get host copies (shapes, axes, scales).
    pub const MAX_ELEMENTS: usize = 4096;

    /// `t`'s values read back, when it has at most [`Self::MAX_ELEMENTS`] elements.
    ///
    /// # Errors
    /// When reading fails (a device error).
    pub fn read(t: &Tensor) -> std::result::Result<Option<HostValues>, String> {
        if t.numel() > Self::MAX_ELEMENTS {
            return Ok(None);
        }
        // converted on the host, as a cast on the device would (no float64 needed there)
        let dt = t.dtype();
        let bytes = t.try_to_bytes().map_err(|e| e.to_string())?;
        let values: Vec<ConstValue> = bytes
            .chunks_exact(dt.itemsize())
            .map(|b| ConstValue::from_le_bytes(dt, b))
            .collect();
        let ints = dt
            .is_int()
            .then(|| values.iter().map(ConstValue::as_i64).collect());
        let floats = values.iter().map(ConstValue::as_f64).collect();
        Ok(Some(HostValues { ints, floats }))
    }
}

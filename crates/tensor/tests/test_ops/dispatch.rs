//! Replays one traced tinygrad lambda on our API: each node of the trace is a tinygrad method,
//! operator, index or `Tensor.xxx(...)` call with its arguments as the test wrote them, and is
//! mapped here onto the Rust function that implements it, with tinygrad's defaults for the
//! arguments the call left out.

use serde_json::{Map, Value};
use tinygrad_tensor::{
    Axis, ConstValue, DType, Dims, Idx, IntoOperand, Operand, PadMode, Padding, Reduction,
    SplitSizes, Tensor,
};

use super::values::{f64_to_bytes, nested, typed_tensor};

/// What a node evaluates to.
#[derive(Clone)]
pub enum Out {
    /// One tensor.
    T(Tensor),
    /// A tuple or list of tensors (`sort`, `split`, `max_pool2d(return_indices=True)`, ...).
    Many(Vec<Tensor>),
}

/// The trace being replayed: node results so far, and the device everything is built on.
pub struct Trace<'a> {
    pub nodes: &'a [Value],
    pub results: Vec<Option<Out>>,
    pub inputs: &'a [Tensor],
    pub device: &'a str,
}

/// A node's arguments (positional after `self`, and keywords), resolved against the trace.
pub struct Call<'a, 'b> {
    pub op: &'a str,
    /// The keyword arguments read so far: one the op never reads is an error, as in Python.
    used: std::cell::RefCell<Vec<&'a str>>,
    pos: Vec<&'a Value>,
    kw: &'a Map<String, Value>,
    tr: &'b Trace<'a>,
}

/// A JSON argument as a number (`{"f": "inf"}` for non-finite floats; bools are 0/1).
pub fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("a number"),
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Object(o) if o.contains_key("f") => match o["f"].as_str() {
            Some("nan") => f64::NAN,
            Some("inf") => f64::INFINITY,
            Some("-inf") => f64::NEG_INFINITY,
            other => panic!("bad float {other:?}"),
        },
        other => panic!("expected a number, got {other}"),
    }
}

/// A Python scalar argument as a constant, keeping its kind (bool, int or float).
fn scalar(v: &Value) -> ConstValue {
    match v {
        Value::Bool(b) => ConstValue::Bool(*b),
        Value::Number(n) if n.is_i64() => ConstValue::Int(n.as_i64().expect("i64")),
        Value::Number(n) if n.is_u64() => ConstValue::UInt(n.as_u64().expect("u64")),
        _ => ConstValue::Float(number(v)),
    }
}

/// The items of a JSON list or `{"tuple": [...]}`.
fn items(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(a) => Some(a),
        Value::Object(o) if o.contains_key("tuple") => o["tuple"].as_array().map(Vec::as_slice),
        _ => None,
    }
}

fn is_tensor(v: &Value) -> bool {
    matches!(v, Value::Object(o) if o.len() == 1 && o.contains_key("t"))
}

impl<'a> Trace<'a> {
    fn tensor(&self, v: &Value) -> Tensor {
        let n = v["t"].as_u64().expect("tensor reference") as usize;
        match &self.results[n] {
            Some(Out::T(t)) => t.clone(),
            Some(Out::Many(_)) => panic!("node {n} is a tuple, used as a tensor"),
            None => panic!("node {n} used before it was computed"),
        }
    }

    /// Evaluates node `i` (its inputs are earlier nodes).
    pub fn eval(&mut self, i: usize) -> Out {
        let node = &self.nodes[i];
        let op = node["op"].as_str().expect("op");
        if op == "input" {
            return Out::T(self.inputs[node["index"].as_u64().expect("index") as usize].clone());
        }
        if op == "item" {
            let src = node["src"].as_u64().expect("src") as usize;
            let k = node["index"].as_u64().expect("index") as usize;
            return match &self.results[src] {
                Some(Out::Many(v)) => Out::T(v[k].clone()),
                _ => panic!("item of a node that is not a tuple"),
            };
        }
        let empty = Map::new();
        let kw = node["kwargs"].as_object().unwrap_or(&empty);
        let mut pos: Vec<&Value> = node["args"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        // `Tensor.relu(x)`, `Tensor.cat(a, b)`: an unbound method called on its first argument.
        let mut this = node
            .get("self")
            .filter(|s| !s.is_null())
            .map(|s| self.tensor(&serde_json::json!({ "t": s })));
        if this.is_none() && node.get("static").is_some() && !pos.is_empty() && is_tensor(pos[0]) {
            this = Some(self.tensor(pos[0]));
            pos.remove(0);
        }
        let call = Call {
            op,
            used: std::cell::RefCell::new(Vec::new()),
            pos,
            kw,
            tr: self,
        };
        let out = match this {
            Some(t) => call.method(&t),
            None => call.creation(node),
        };
        if let Some(k) = kw
            .keys()
            .find(|k| !call.used.borrow().contains(&k.as_str()))
        {
            panic!(
                "rust signature: {op}() got an unexpected keyword argument {k:?} (Rust has no such parameter)"
            );
        }
        out
    }
}

impl<'a> Call<'a, '_> {
    /// Argument `i` (positional) or `name` (keyword); a JSON `null` counts as absent.
    pub(super) fn arg(&self, i: usize, name: &str) -> Option<&'a Value> {
        if let Some((k, _)) = self.kw.get_key_value(name) {
            self.used.borrow_mut().push(k.as_str());
        }
        self.pos
            .get(i)
            .copied()
            .or_else(|| self.kw.get(name))
            .filter(|v| !v.is_null())
    }

    pub(super) fn t(&self, i: usize, name: &str) -> Tensor {
        let v = self
            .arg(i, name)
            .unwrap_or_else(|| panic!("{}: missing tensor argument {name}", self.op));
        self.tr.tensor(v)
    }

    pub(super) fn opt_t(&self, i: usize, name: &str) -> Option<Tensor> {
        self.arg(i, name).map(|v| self.tr.tensor(v))
    }

    pub(super) fn int(&self, i: usize, name: &str, default: i64) -> i64 {
        self.arg(i, name).map_or(default, |v| match v {
            Value::Bool(b) => i64::from(*b),
            _ => v
                .as_i64()
                .unwrap_or_else(|| panic!("{}: {name} should be an int, got {v}", self.op)),
        })
    }

    /// A size argument: Rust's `usize`, so a negative one cannot be passed at all (the call is
    /// rejected by the signature; messages of such rejections start with `rust signature:`).
    pub(super) fn size(&self, i: usize, name: &str, default: i64) -> usize {
        let v = self.int(i, name, default);
        usize::try_from(v).unwrap_or_else(|_| {
            panic!(
                "rust signature: {}: {name} = {v} is negative, and the Rust argument is a usize",
                self.op
            )
        })
    }

    pub(super) fn sizes_of(&self, v: &Value) -> Vec<usize> {
        self.ints_of(v)
            .into_iter()
            .map(|x| {
                usize::try_from(x).unwrap_or_else(|_| {
                    panic!("rust signature: {}: size {x} is negative, and the Rust argument is a usize", self.op)
                })
            })
            .collect()
    }

    pub(super) fn opt_int(&self, i: usize, name: &str) -> Option<i64> {
        self.arg(i, name).map(|_| self.int(i, name, 0))
    }

    pub(super) fn float(&self, i: usize, name: &str, default: f64) -> f64 {
        self.arg(i, name).map_or(default, number)
    }

    pub(super) fn flag(&self, i: usize, name: &str, default: bool) -> bool {
        self.arg(i, name).map_or(default, |v| number(v) != 0.0)
    }

    pub(super) fn string(&self, i: usize, name: &str, default: &'a str) -> &'a str {
        self.arg(i, name).map_or(default, |v| {
            v.as_str()
                .unwrap_or_else(|| panic!("{}: {name} should be a string", self.op))
        })
    }

    pub(super) fn dtype(&self, i: usize, name: &str) -> Option<DType> {
        self.arg(i, name).map(|v| {
            let n = v
                .as_str()
                .or_else(|| v["dtype"].as_str())
                .unwrap_or_else(|| panic!("{}: {name} should be a dtype, got {v}", self.op));
            super::values::dtype_named(n)
        })
    }

    /// A tensor argument, or a Python scalar as a constant operand.
    pub(super) fn operand(&self, i: usize, name: &str) -> Operand {
        let v = self
            .arg(i, name)
            .unwrap_or_else(|| panic!("{}: missing argument {name}", self.op));
        if is_tensor(v) {
            Operand::Tensor(self.tr.tensor(v))
        } else {
            scalar(v).into_operand()
        }
    }

    /// A Python scalar argument (the other side of a reflected operator).
    pub(super) fn scalar_arg(&self, i: usize) -> ConstValue {
        scalar(self.pos[i])
    }

    pub(super) fn ints_of(&self, v: &Value) -> Vec<isize> {
        match items(v) {
            Some(xs) => xs.iter().map(|x| number(x) as isize).collect(),
            None => vec![number(v) as isize],
        }
    }

    /// `f(shape, *args)`: one list argument, or the ints given one by one, from position `from`.
    pub(super) fn varargs(&self, from: usize, name: &str) -> Vec<isize> {
        match self.pos.get(from) {
            Some(v) if items(v).is_some() => self.ints_of(v),
            Some(_) => self.pos[from..]
                .iter()
                .map(|x| number(x) as isize)
                .collect(),
            None => self
                .kw
                .get(name)
                .map(|v| self.ints_of(v))
                .unwrap_or_default(),
        }
    }

    pub(super) fn axis(&self, i: usize, name: &str) -> Axis {
        match self.arg(i, name) {
            None => Axis::All,
            Some(v) => Axis::Some(self.ints_of(v)),
        }
    }

    pub(super) fn reduction(&self, i: usize) -> Reduction {
        match self.string(i, "reduction", "mean") {
            "mean" => Reduction::Mean,
            "sum" => Reduction::Sum,
            "none" => Reduction::None,
            other => panic!("{}: reduction {other:?}", self.op),
        }
    }

    pub(super) fn dims(&self, i: usize, name: &str, default: Dims) -> Dims {
        match self.arg(i, name) {
            None => default,
            Some(v) => match items(v) {
                Some(_) => Dims::Each(self.ints_of(v).iter().map(|&x| x as usize).collect()),
                None => Dims::All(number(v) as usize),
            },
        }
    }

    pub(super) fn padding(&self, i: usize, name: &str) -> Padding {
        match self.arg(i, name) {
            None => Padding::All(0),
            Some(v) => match items(v) {
                Some(_) => Padding::Flat(self.ints_of(v)),
                None => Padding::All(number(v) as isize),
            },
        }
    }

    /// Every tensor of `self` and the positional arguments (flattening lists), for cat/stack.
    pub(super) fn tensors_with(&self, this: &Tensor) -> Vec<Tensor> {
        let mut out = vec![this.clone()];
        for v in &self.pos {
            match items(v) {
                Some(xs) => out.extend(xs.iter().map(|x| self.tr.tensor(x))),
                None if is_tensor(v) => out.push(self.tr.tensor(v)),
                None => {}
            }
        }
        out
    }

    /// The constant `c` as a tensor shaped like `t`, with the dtype tinygrad gives a Python
    /// scalar next to `t` (a float next to an int tensor is the default float).
    pub(super) fn scalar_like(&self, t: &Tensor, c: ConstValue) -> Tensor {
        let dtype = match c {
            ConstValue::Float(_) if !t.dtype().is_float() => DType::FLOAT32,
            ConstValue::Int(_) | ConstValue::UInt(_) if t.dtype().is_bool() => DType::INT32,
            _ => t.dtype(),
        };
        Tensor::full_on(&t.shape(), c, dtype, self.tr.device)
    }

    pub(super) fn index(&self, v: &Value) -> Vec<Idx> {
        match v {
            Value::Object(o) if o.contains_key("tuple") => o["tuple"]
                .as_array()
                .expect("tuple")
                .iter()
                .map(|x| self.one_index(x))
                .collect(),
            _ => vec![self.one_index(v)],
        }
    }

    pub(super) fn one_index(&self, v: &Value) -> Idx {
        match v {
            Value::Null => Idx::NewAxis,
            Value::Number(_) => Idx::Int(number(v) as isize),
            Value::Bool(_) => {
                Idx::Tensor(Tensor::full_on(&[], scalar(v), DType::BOOL, self.tr.device))
            }
            Value::Array(_) | Value::Object(_) if items(v).is_some() => {
                // a (nested) list or tuple: tinygrad makes it a Tensor (bools only: a bool tensor)
                let (vals, shape) = nested(v);
                let all_bool = leaves_all_bool(v);
                let dtype = if all_bool { DType::BOOL } else { DType::INT32 };
                Idx::Tensor(Tensor::from_bytes(
                    &f64_to_bytes(&vals, dtype),
                    dtype,
                    &shape,
                    self.tr.device,
                ))
            }
            Value::Object(o) if o.contains_key("slice") => {
                let s = o["slice"].as_array().expect("slice");
                let b = |x: &Value| (!x.is_null()).then(|| number(x) as isize);
                Idx::Slice {
                    start: b(&s[0]),
                    stop: b(&s[1]),
                    step: b(&s[2]).unwrap_or(1),
                }
            }
            Value::Object(o) if o.contains_key("ellipsis") => Idx::Ellipsis,
            Value::Object(o) if o.contains_key("t") => Idx::Tensor(self.tr.tensor(v)),
            other => panic!("{}: index {other}", self.op),
        }
    }

    /// Calls that build a tensor from nothing (`Tensor(...)`, `Tensor.arange`, ...).
    pub(super) fn creation(&self, node: &Value) -> Out {
        let dev = self.tr.device;
        let default_float = DType::FLOAT32;
        let t = match self.op {
            "Tensor" => {
                // (the dtype tinygrad inferred or was given is the node's)
                let _ = (
                    self.arg(usize::MAX, "dtype"),
                    self.arg(usize::MAX, "requires_grad"),
                );
                let data = self.arg(0, "data").expect("Tensor data");
                let dtype = super::values::dtype_named(node["dtype"].as_str().expect("dtype"));
                match data {
                    Value::Object(o) if o.contains_key("array") => {
                        typed_tensor(&o["array"], dev).cast(dtype)
                    }
                    _ => {
                        let (vals, shape) = nested(data);
                        Tensor::from_bytes(&f64_to_bytes(&vals, dtype), dtype, &shape, dev)
                    }
                }
            }
            "arange" => {
                let (start, stop) = match self.arg(1, "stop") {
                    Some(stop) => (scalar(self.pos[0]), scalar(stop)),
                    None => (
                        ConstValue::Int(0),
                        scalar(self.arg(0, "start").expect("arange end")),
                    ),
                };
                let step = self.arg(2, "step").map_or(ConstValue::Int(1), scalar);
                let dtype = self
                    .dtype(3, "dtype")
                    .unwrap_or_else(|| Tensor::arange(start, stop, step).dtype());
                Tensor::arange_on(start.as_f64(), stop.as_f64(), step.as_f64(), dtype, dev)
            }
            "ones" | "zeros" | "empty" => {
                let shape: Vec<usize> = self
                    .varargs(0, "shape")
                    .iter()
                    .map(|&x| x as usize)
                    .collect();
                let dtype = self.dtype(usize::MAX, "dtype").unwrap_or(default_float);
                match self.op {
                    "ones" => Tensor::ones_on(&shape, dtype, dev),
                    // `empty`'s values are unspecified: zeros are as good as any
                    _ => Tensor::zeros_on(&shape, dtype, dev),
                }
            }
            "full" => {
                let shape: Vec<usize> = self
                    .ints_of(self.pos[0])
                    .iter()
                    .map(|&x| x as usize)
                    .collect();
                let fill = scalar(self.arg(1, "fill_value").expect("fill"));
                let dtype = self
                    .dtype(2, "dtype")
                    .unwrap_or_else(|| Tensor::full(&[], fill).dtype());
                Tensor::full_on(&shape, fill, dtype, dev)
            }
            "eye" => {
                let n = self.size(0, "n", 0);
                let m = self.arg(1, "m").map(|_| self.size(1, "m", 0));
                let dtype = self.dtype(2, "dtype").unwrap_or(default_float);
                Tensor::eye_on(n, m, dtype, dev)
            }
            "linspace" => {
                let dtype = self.dtype(3, "dtype").unwrap_or(default_float);
                Tensor::linspace_on(
                    self.float(0, "start", 0.0),
                    self.float(1, "stop", 0.0),
                    self.size(2, "steps", 0),
                    dtype,
                    dev,
                )
            }
            "einsum" => {
                let formula = self.string(0, "formula", "");
                let mut ops = Vec::new();
                for v in &self.pos[1..] {
                    match items(v) {
                        Some(xs) => ops.extend(xs.iter().map(|x| self.tr.tensor(x))),
                        None => ops.push(self.tr.tensor(v)),
                    }
                }
                let refs: Vec<&Tensor> = ops.iter().collect();
                Tensor::einsum(formula, &refs)
            }
            "stack" | "cat" => {
                // Tensor.stack((x, y), dim=d): the tensors come as one list
                let first = self.pos.first().copied().and_then(items).expect("tensors");
                let ts: Vec<Tensor> = first.iter().map(|x| self.tr.tensor(x)).collect();
                let refs: Vec<&Tensor> = ts.iter().collect();
                let dim = self.int(1, "dim", 0) as isize;
                if self.op == "stack" {
                    Tensor::stack(&refs, dim)
                } else {
                    Tensor::cat(&refs, dim)
                }
            }
            other => panic!("unsupported creation call Tensor.{other}"),
        };
        Out::T(t)
    }

    /// A method (or operator) called on `t`.
    #[allow(clippy::too_many_lines)]
    pub(super) fn method(&self, t: &Tensor) -> Out {
        let one = |x: Tensor| Out::T(x);
        let many = |x: Vec<Tensor>| Out::Many(x);
        let dev = self.tr.device;
        let o = |i: usize, name: &str| self.operand(i, name);
        if let Some(out) = self.reduce_or_nn(t) {
            return out;
        }
        let r = match self.op {
            // ---- elementwise, no arguments
            "neg" | "__neg__" => t.neg(),
            "__pos__" | "realize" | "contiguous" => t.contiguous(),
            "clone" => t.deep_clone(),
            "detach" => t.detach(),
            "relu" => t.relu(),
            "sigmoid" => t.sigmoid(),
            "tanh" => t.tanh(),
            "exp" => t.exp(),
            "exp2" => t.exp2(),
            "log" => t.log(),
            "log2" => t.log2(),
            "log10" => t.log10(),
            "sqrt" => t.sqrt(),
            "rsqrt" => t.rsqrt(),
            "sin" => t.sin(),
            "cos" => t.cos(),
            "tan" => t.tan(),
            "asin" => t.asin(),
            "acos" => t.acos(),
            "atan" => t.atan(),
            "sinh" => t.sinh(),
            "cosh" => t.cosh(),
            "asinh" => t.asinh(),
            "acosh" => t.acosh(),
            "atanh" => t.atanh(),
            "trunc" => t.trunc(),
            "floor" => t.floor(),
            "ceil" => t.ceil(),
            "round" => t.round(),
            "abs" | "__abs__" => t.abs(),
            "sign" => t.sign(),
            "erf" => t.erf(),
            "reciprocal" => t.reciprocal(),
            "square" => t.square(),
            "logical_not" => t.logical_not(),
            "bitwise_not" | "__invert__" => t.bitwise_not(),
            "relu6" => t.relu6(),
            "selu" => t.selu(),
            "gelu" => t.gelu_with(self.string(0, "approximate", "tanh")),
            "quick_gelu" => t.quick_gelu(),
            "silu" => t.silu(),
            "swish" => t.swish(),
            "mish" => t.mish(),
            "logsigmoid" => t.logsigmoid(),
            "softsign" => t.softsign(),
            "hardswish" => t.hardswish(),
            "isnan" => t.isnan(),
            "isfinite" => t.isfinite(),
            "isinf" => t.isinf_signed(
                self.flag(0, "detect_positive", true),
                self.flag(1, "detect_negative", true),
            ),
            "float" => t.float(),
            "half" => t.half(),
            "int" => t.int(),
            "bool" => t.bool(),
            "cast" => t.cast(self.dtype(0, "dtype").expect("cast dtype")),
            "bitcast" => t.bitcast(self.dtype(0, "dtype").expect("bitcast dtype")),
            "T" => t.t(),
            "mT" => t.transpose(-2, -1),
            // ---- elementwise with arguments
            "celu" => t.celu(self.float(0, "alpha", 1.0)),
            "elu" => t.elu(self.float(0, "alpha", 1.0)),
            "leaky_relu" => t.leaky_relu(self.float(0, "neg_slope", 0.01)),
            "softplus" => t.softplus(self.float(0, "beta", 1.0)),
            "hardtanh" => t.hardtanh(
                self.float(0, "min_val", -1.0),
                self.float(1, "max_val", 1.0),
            ),
            "hardsigmoid" => t.hardsigmoid(
                self.float(0, "alpha", 1.0 / 6.0),
                self.float(1, "beta", 0.5),
            ),
            "clip" | "clamp" => {
                let bound = |i: usize, name: &str| self.arg(i, name).map(number);
                t.clip(bound(0, "min_"), bound(1, "max_"))
            }
            "add" | "__add__" | "__radd__" => t.add(o(0, "x")),
            "sub" | "__sub__" => t.sub(o(0, "x")),
            "__rsub__" => t.rsub(o(0, "x")),
            "mul" | "__mul__" | "__rmul__" => t.mul(o(0, "x")),
            "div" => {
                let mode = self.arg(2, "rounding_mode").and_then(Value::as_str);
                if self.flag(1, "reverse", false) {
                    self.scalar_or_tensor(0, t).div_mode(t, mode)
                } else {
                    t.div_mode(o(0, "x"), mode)
                }
            }
            "__truediv__" => t.div(o(0, "x")),
            "__rtruediv__" => t.rdiv(o(0, "x")),
            "__floordiv__" => t.div_mode(o(0, "x"), Some("floor")),
            "__rfloordiv__" => self
                .scalar_like(t, self.scalar_arg(0))
                .div_mode(t, Some("floor")),
            "mod" | "__mod__" => t.modulo(o(0, "x")),
            "__rmod__" => self.scalar_like(t, self.scalar_arg(0)).modulo(t),
            "fmod" => t.fmod(o(0, "x")),
            "pow" | "__pow__" => {
                if self.flag(1, "reverse", false) {
                    self.scalar_or_tensor(0, t).pow(t)
                } else {
                    t.pow(o(0, "x"))
                }
            }
            "__rpow__" => self.scalar_like(t, self.scalar_arg(0)).pow(t),
            "maximum" => t.maximum(o(0, "x")),
            "minimum" => t.minimum(o(0, "x")),
            "copysign" => t.copysign(o(0, "other")),
            "logaddexp" => t.logaddexp(o(0, "x")),
            "lerp" => t.lerp(&self.t(0, "end"), o(1, "weight")),
            "bitwise_and" | "__and__" | "__rand__" => t.bitwise_and(o(0, "x")),
            "bitwise_or" | "__or__" | "__ror__" => t.bitwise_or(o(0, "x")),
            "bitwise_xor" | "__xor__" | "__rxor__" => t.bitwise_xor(o(0, "x")),
            "lshift" | "__lshift__" => t.lshift(o(0, "x")),
            "rshift" | "__rshift__" => t.rshift(o(0, "x")),
            "__rlshift__" => self.scalar_like(t, self.scalar_arg(0)).lshift(t),
            "__rrshift__" => self.scalar_like(t, self.scalar_arg(0)).rshift(t),
            "__lt__" => t.lt(o(0, "x")),
            "__gt__" => t.gt(o(0, "x")),
            "__le__" => t.le(o(0, "x")),
            "__ge__" => t.ge(o(0, "x")),
            "__eq__" => t.eq(o(0, "x")),
            "__ne__" => t.ne(o(0, "x")),
            "logical_and" => t.logical_and(&self.t(0, "x")),
            "logical_or" => t.logical_or(&self.t(0, "x")),
            "logical_xor" => t.logical_xor(&self.t(0, "x")),
            "where" => t.where_(o(0, "x"), o(1, "y")),
            "isclose" => t.isclose(
                o(0, "other"),
                self.float(1, "rtol", 1e-5),
                self.float(2, "atol", 1e-8),
                self.flag(3, "equal_nan", false),
            ),
            "masked_fill" => t.masked_fill(&self.t(0, "mask"), o(1, "value")),
            "__matmul__" | "matmul" => t.matmul(&self.t(0, "x")),
            "dot" => t.dot(&self.t(0, "w")),
            "__rmatmul__" => self.t(0, "x").matmul(t),
            // ---- indexing
            "__getitem__" => t.getitem(&self.index(self.pos[0])),
            "__setitem__" => {
                let value = o(1, "value");
                t.setitem(&self.index(self.pos[0]), value);
                t.clone()
            }
            "gather" => t.gather(self.int(0, "dim", 0) as isize, &self.t(1, "index")),
            "scatter" => t.scatter_with(
                self.int(0, "dim", 0) as isize,
                &self.t(1, "index"),
                o(2, "src"),
                self.arg(3, "reduce").and_then(Value::as_str),
            ),
            "scatter_reduce" => t.scatter_reduce(
                self.int(0, "dim", 0) as isize,
                &self.t(1, "index"),
                &self.t(2, "src"),
                self.string(3, "reduce", "sum"),
                self.flag(4, "include_self", true),
            ),
            "masked_select" => t.masked_select(&self.t(0, "mask")),
            "nonzero" => t.nonzero(),
            "one_hot" => t.one_hot(self.int(0, "num_classes", -1) as isize),
            "tril" => t.tril(self.int(0, "diagonal", 0) as isize),
            "triu" => t.triu(self.int(0, "diagonal", 0) as isize),
            "diag" => t.diag(),
            "diagonal" => t.diagonal_with(
                self.int(0, "offset", 0) as isize,
                self.int(1, "dim1", 0) as isize,
                self.int(2, "dim2", 1) as isize,
            ),
            // ---- movement
            "reshape" | "view" => {
                let shape: Vec<Option<isize>> = match self.pos.first() {
                    Some(v) if items(v).is_some() => {
                        items(v).expect("list").iter().map(opt_isize).collect()
                    }
                    _ => self.pos.iter().map(|v| opt_isize(v)).collect(),
                };
                if shape.iter().all(Option::is_some) {
                    let s: Vec<isize> = shape.into_iter().flatten().collect();
                    if self.op == "view" {
                        t.view(&s)
                    } else {
                        t.reshape(&s)
                    }
                } else {
                    t.reshape_opt(&shape)
                }
            }
            "expand" => t.expand(&self.varargs(0, "shape")),
            "permute" => t.permute(&self.varargs(0, "order")),
            "flip" => t.flip(&self.varargs(0, "axis")),
            "repeat" => {
                let r: Vec<usize> = self
                    .varargs(0, "repeats")
                    .iter()
                    .map(|&x| x as usize)
                    .collect();
                t.repeat(&r)
            }
            "repeat_interleave" => t.repeat_interleave(
                self.size(0, "repeats", 1),
                self.opt_int(1, "dim").map(|d| d as isize),
            ),
            "transpose" => t.transpose(
                self.int(0, "dim0", 1) as isize,
                self.int(1, "dim1", 0) as isize,
            ),
            "flatten" => t.flatten(
                self.int(0, "start_dim", 0) as isize,
                self.int(1, "end_dim", -1) as isize,
            ),
            "unflatten" => t.unflatten(
                self.int(0, "dim", 0) as isize,
                &self.ints_of(self.arg(1, "sizes").expect("sizes")),
            ),
            "squeeze" => t.squeeze(self.opt_int(0, "dim").map(|d| d as isize)),
            "unsqueeze" => t.unsqueeze(self.int(0, "dim", 0) as isize),
            "pad" => {
                let pads = self.pad_pairs(t, self.arg(0, "padding").expect("padding"));
                let mode = match self.string(1, "mode", "constant") {
                    "constant" => PadMode::Constant(
                        self.arg(2, "value").map_or(ConstValue::Float(0.0), scalar),
                    ),
                    "reflect" => PadMode::Reflect,
                    "replicate" => PadMode::Replicate,
                    "circular" => PadMode::Circular,
                    other => panic!("pad: mode {other:?}"),
                };
                t.pad_mode(&pads, mode)
            }
            "shrink" => {
                let arg = items(self.pos[0]).expect("shrink arg");
                let shape = t.shape();
                let b: Vec<(usize, usize)> = arg
                    .iter()
                    .zip(&shape)
                    .map(|(p, &s)| match items(p) {
                        Some(ab) => (number(&ab[0]) as usize, number(&ab[1]) as usize),
                        None => (0, s),
                    })
                    .collect();
                t.shrink(&b)
            }
            "cat" | "stack" => {
                let ts = self.tensors_with(t);
                let refs: Vec<&Tensor> = ts.iter().collect();
                let dim = self
                    .arg(usize::MAX, "dim")
                    .map_or(0, |d| number(d) as isize);
                if self.op == "cat" {
                    Tensor::cat(&refs, dim)
                } else {
                    Tensor::stack(&refs, dim)
                }
            }
            "split" => {
                let sizes = self.arg(0, "sizes").expect("sizes");
                let sizes = match items(sizes) {
                    Some(_) => SplitSizes::Sizes(self.sizes_of(sizes)),
                    None => SplitSizes::Size(self.size(0, "sizes", 1)),
                };
                return many(t.split(sizes, self.int(1, "dim", 0) as isize));
            }
            "chunk" => {
                return many(t.chunk(
                    self.int(0, "chunks", 1) as usize,
                    self.int(1, "dim", 0) as isize,
                ));
            }
            "meshgrid" => {
                let ts = self.tensors_with(t);
                let refs: Vec<&Tensor> = ts.iter().collect();
                return many(Tensor::meshgrid(
                    &refs,
                    self.string(usize::MAX, "indexing", "ij"),
                ));
            }
            "roll" => {
                let shifts = self.ints_of(self.arg(0, "shifts").expect("shifts"));
                match self.arg(1, "dims") {
                    Some(d) => t.roll(&shifts, &self.ints_of(d)),
                    None => {
                        let shape: Vec<isize> = t.shape().iter().map(|&s| s as isize).collect();
                        t.flatten(0, -1).roll(&shifts, &[0]).reshape(&shape)
                    }
                }
            }
            "unfold" => t.unfold(
                self.int(0, "dim", 0) as isize,
                self.size(1, "size", 1),
                self.size(2, "step", 1),
            ),
            // ---- creation from a tensor
            "full_like" => {
                let fill = scalar(self.arg(0, "fill_value").expect("fill"));
                let dtype = self
                    .dtype(1, "dtype")
                    .unwrap_or_else(|| Tensor::full_like(t, fill).dtype());
                Tensor::full_on(&t.shape(), fill, dtype, dev)
            }
            "zeros_like" | "ones_like" => {
                let v = ConstValue::Int(i64::from(self.op == "ones_like"));
                let dtype = self.dtype(0, "dtype").unwrap_or_else(|| t.dtype());
                Tensor::full_on(&t.shape(), v, dtype, dev)
            }
            "einsum" => panic!("einsum called on a tensor"),
            other => panic!("unsupported tinygrad call {other}"),
        };
        one(r)
    }

    /// Argument `i` as a tensor: a tensor argument, or a Python scalar shaped like `t`.
    pub(super) fn scalar_or_tensor(&self, i: usize, t: &Tensor) -> Tensor {
        let v = self.pos[i];
        if is_tensor(v) {
            self.tr.tensor(v)
        } else {
            self.scalar_like(t, scalar(v))
        }
    }

    /// tinygrad's `pad` argument as one `(before, after)` pair per axis: per-axis pairs (`None`
    /// for no padding), or torch's flat form (pairs for the last axes, innermost first).
    pub(super) fn pad_pairs(&self, t: &Tensor, v: &Value) -> Vec<(isize, isize)> {
        let xs = items(v).expect("pad padding");
        let n = t.ndim();
        if xs.iter().all(|x| x.is_null() || items(x).is_some()) {
            return xs
                .iter()
                .map(|x| match items(x) {
                    Some(ab) => (number(&ab[0]) as isize, number(&ab[1]) as isize),
                    None => (0, 0),
                })
                .collect();
        }
        let flat: Vec<isize> = xs.iter().map(|x| number(x) as isize).collect();
        // (the Rust function takes one pair per axis: converting the flat form is this
        // caller's job, and so is rejecting a flat form that makes no pairs)
        assert!(
            flat.len().is_multiple_of(2) && flat.len() / 2 <= n,
            "rust signature: pad: flat padding {flat:?} does not make pairs for a tensor of {n} dims"
        );
        let mut pairs = vec![(0, 0); n];
        for (k, ab) in flat.chunks(2).enumerate() {
            pairs[n - 1 - k] = (ab[0], ab[1]);
        }
        pairs
    }
}

fn opt_isize(v: &Value) -> Option<isize> {
    (!v.is_null()).then(|| number(v) as isize)
}

fn leaves_all_bool(v: &Value) -> bool {
    match v {
        Value::Array(a) => !a.is_empty() && a.iter().all(leaves_all_bool),
        Value::Bool(_) => true,
        _ => false,
    }
}

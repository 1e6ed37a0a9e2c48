//! The ONNX ops, each a small function of [`Tensor`]s (tinygrad's `onnx.py` is the model):
//! fusion, every backend and the kernels' speed come from the tensor library.
//!
//! - this file: the dispatch table and the elementwise ops (unary, binary with numpy
//!   broadcasting, variadic, casts);
//! - `shape`: movement, indexing and creation ops (`Reshape`, `Slice`, `Gather`, `Concat`, ...);
//! - `reduce`: the `Reduce*` family, `ArgMax`/`ArgMin`, `CumSum`, `TopK`;
//! - `nn`: `MatMul`, `Gemm`, `Conv`, pools, normalizations, `Softmax`;
//! - `loss`: `NegativeLogLikelihoodLoss`, `SoftmaxCrossEntropyLoss`;
//! - `attention`: `Attention`;
//! - `resize`: `Resize`;
//! - `grid`: `GridSample`;
//! - `col2im`: `Col2Im`;
//! - `signal`: `DFT`, `STFT`;
//! - `quant`: `QuantizeLinear`, `DequantizeLinear`;
//! - `rnn`: `RNN`, `GRU`, `LSTM`;
//! - `host`: `NonMaxSuppression`, `Unique`, `ReverseSequence` (sizes that depend on values).
//!
//! Every op refuses attributes it doesn't read ([`Node::check_attrs`]).

mod attention;
mod col2im;
mod grid;
mod host;
mod loss;
mod nn;
pub(crate) mod quant;
mod reduce;
mod resize;
mod rnn;
mod shape;
mod signal;

use tinygrad_tensor::{DType, Tensor};

use crate::error::Result;
use crate::narrow::{self, Narrow, RoundMode};
use crate::node::Node;
use crate::tensor_proto::dtype_of;

/// The op names this crate runs (the default domain), in byte order; `tests/node.rs` checks that every
/// op of a passing conformance case is listed.
pub const SUPPORTED: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Add",
    "AffineGrid",
    "And",
    "ArgMax",
    "ArgMin",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Attention",
    "AveragePool",
    "BatchNormalization",
    "BitCast",
    "BitShift",
    "BitwiseAnd",
    "BitwiseNot",
    "BitwiseOr",
    "BitwiseXor",
    "BlackmanWindow",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "CenterCropPad",
    "Clip",
    "Col2Im",
    "Compress",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvTranspose",
    "Cos",
    "Cosh",
    "CumProd",
    "CumSum",
    "DFT",
    "DepthToSpace",
    "DequantizeLinear",
    "Div",
    "Dropout",
    "DynamicQuantizeLinear",
    "Einsum",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "EyeLike",
    "Flatten",
    "Floor",
    "GRU",
    "Gather",
    "GatherElements",
    "GatherND",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "GridSample",
    "GroupNormalization",
    "HammingWindow",
    "HannWindow",
    "HardSigmoid",
    "HardSwish",
    "Hardmax",
    "Identity",
    "If",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LRN",
    "LSTM",
    "LayerNormalization",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "Loop",
    "LpNormalization",
    "LpPool",
    "MatMul",
    "MatMulInteger",
    "Max",
    "MaxPool",
    "Mean",
    "Min",
    "Mish",
    "Mod",
    "Mul",
    "Neg",
    "NegativeLogLikelihoodLoss",
    "NonMaxSuppression",
    "NonZero",
    "Not",
    "OneHot",
    "Or",
    "PRelu",
    "Pad",
    "Pow",
    "QuantizeLinear",
    "RMSNormalization",
    "RNN",
    "Range",
    "Reciprocal",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
    "Relu",
    "Reshape",
    "Resize",
    "ReverseSequence",
    "RotaryEmbedding",
    "Round",
    "STFT",
    "Scan",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "Selu",
    "Shape",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Sinh",
    "Size",
    "Slice",
    "Softmax",
    "SoftmaxCrossEntropyLoss",
    "Softplus",
    "Softsign",
    "SpaceToDepth",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Sum",
    "SwiGLU",
    "Swish",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
    "Tile",
    "TopK",
    "Transpose",
    "Trilu",
    "Unique",
    "Unsqueeze",
    "Where",
    "Xor",
];

/// Runs node `n`: its outputs, in order.
///
/// # Errors
/// An op not in [`SUPPORTED`], an attribute or dtype it doesn't support, a missing input.
pub fn run(n: &Node) -> Result<Vec<Tensor>> {
    if let Some(t) = unary(n)? {
        return Ok(vec![t]);
    }
    if let Some(t) = other_elementwise(n)? {
        return Ok(vec![t]);
    }
    if let Some(outs) = shape::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = reduce::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = nn::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = loss::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = attention::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = resize::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = grid::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = col2im::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = signal::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = quant::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = rnn::run(n)? {
        return Ok(outs);
    }
    if let Some(outs) = host::run(n)? {
        return Ok(outs);
    }
    Err(n.err("op is not supported"))
}

/// `t` as floats for a float-only formula, and back to `like`'s dtype.
fn keep_dtype(t: Tensor, like: &Tensor) -> Tensor {
    if t.dtype() == like.dtype() {
        t
    } else {
        t.cast(like.dtype())
    }
}

/// A unary op's formula (attributes read from the node).
type UnaryFn = fn(&Tensor, &Node) -> Tensor;

fn unary(n: &Node) -> Result<Option<Tensor>> {
    let no_attrs: &[&str] = &[];
    let (attrs, f): (&[&str], UnaryFn) = match n.op {
        "Abs" => (no_attrs, |x, _| x.abs()),
        "Neg" => (no_attrs, |x, _| x.neg()),
        "Exp" => (no_attrs, |x, _| x.exp()),
        "Log" => (no_attrs, |x, _| x.log()),
        "Sqrt" => (no_attrs, |x, _| x.sqrt()),
        "Reciprocal" => (no_attrs, |x, _| x.reciprocal()),
        "Relu" => (no_attrs, |x, _| x.relu()),
        "Sigmoid" => (no_attrs, |x, _| x.sigmoid()),
        "Tanh" => (no_attrs, |x, _| x.tanh()),
        "Sin" => (no_attrs, |x, _| x.sin()),
        "Cos" => (no_attrs, |x, _| x.cos()),
        "Tan" => (no_attrs, |x, _| x.tan()),
        "Asin" => (no_attrs, |x, _| x.asin()),
        "Acos" => (no_attrs, |x, _| x.acos()),
        "Atan" => (no_attrs, |x, _| x.atan()),
        "Sinh" => (no_attrs, |x, _| x.sinh()),
        "Cosh" => (no_attrs, |x, _| x.cosh()),
        "Asinh" => (no_attrs, |x, _| x.asinh()),
        "Acosh" => (no_attrs, |x, _| x.acosh()),
        "Atanh" => (no_attrs, |x, _| x.atanh()),
        "Floor" => (no_attrs, |x, _| x.floor()),
        "Ceil" => (no_attrs, |x, _| x.ceil()),
        "Round" => (no_attrs, |x, _| x.round()),
        "Sign" => (no_attrs, |x, _| x.sign()),
        "Erf" => (no_attrs, |x, _| x.erf()),
        "Softsign" => (no_attrs, |x, _| x.softsign()),
        "Softplus" => (no_attrs, |x, _| keep_dtype(x.softplus(1.0), x)),
        "Not" => (no_attrs, |x, _| x.logical_not()),
        "BitwiseNot" => (no_attrs, |x, _| x.bitwise_not()),
        "IsNaN" => (no_attrs, |x, _| x.isnan()),
        "Identity" => (no_attrs, |x, _| x.clone()),
        "Mish" => (no_attrs, |x, _| x.mish()),
        "Swish" => (&["alpha"], |x, n| x * (x * n.float("alpha", 1.0)).sigmoid()),
        "HardSwish" => (no_attrs, |x, _| x.hardswish()),
        "HardSigmoid" => (&["alpha", "beta"], |x, n| {
            x.hardsigmoid(n.float("alpha", 0.2), n.float("beta", 0.5))
        }),
        "LeakyRelu" => (&["alpha"], |x, n| x.leaky_relu(n.float("alpha", 0.01))),
        "Elu" => (&["alpha"], |x, n| x.elu(n.float("alpha", 1.0))),
        "Celu" => (&["alpha"], |x, n| x.celu(n.float("alpha", 1.0))),
        "Selu" => (&["alpha", "gamma"], |x, n| {
            x.selu_with(
                n.float("alpha", 1.673_263_192_176_818_8),
                n.float("gamma", 1.050_701_022_148_132_3),
            )
        }),
        "ThresholdedRelu" => (&["alpha"], |x, n| {
            x.gt(n.float("alpha", 1.0)).where_(x, 0.0).cast(x.dtype())
        }),
        "IsInf" => (&["detect_positive", "detect_negative"], |x, n| {
            x.isinf_signed(
                n.int("detect_positive", 1) != 0,
                n.int("detect_negative", 1) != 0,
            )
        }),
        "Shrink" => (&["bias", "lambd"], |x, n| {
            let (bias, lambd) = (n.float("bias", 0.0), n.float("lambd", 0.5));
            let below = x.lt(-lambd).where_(x + bias, 0.0);
            keep_dtype(x.gt(lambd).where_(x - bias, below), x)
        }),
        _ => return Ok(None),
    };
    n.check_attrs(attrs)?;
    Ok(Some(f(n.input(0)?, n)))
}

fn other_elementwise(n: &Node) -> Result<Option<Tensor>> {
    let t = match n.op {
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Equal" | "Less" | "LessOrEqual" | "Greater"
        | "GreaterOrEqual" | "And" | "Or" | "Xor" | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor"
        | "PRelu" => {
            n.check_attrs(&[])?;
            let (a, b) = (n.input(0)?, n.input(1)?);
            match n.op {
                "Add" => a + b,
                "Sub" => a - b,
                "Mul" => a * b,
                "Div" if a.dtype().is_int() => a.div_mode(b, Some("trunc")),
                "Div" => a / b,
                // a float raised to one known value: a constant exponent (an integer one is a
                // chain of multiplications, as `Tensor::pow` with a number; GELU's x^3)
                "Pow" => match n
                    .host_input(1)
                    .filter(|h| h.floats.len() == 1 && a.dtype().is_float() && b.ndim() <= a.ndim())
                {
                    Some(h) => keep_dtype(a.pow(h.floats[0]), a),
                    None => keep_dtype(a.pow(b), a),
                },
                "Equal" => a.eq(b),
                "Less" => a.lt(b),
                "LessOrEqual" => a.le(b),
                "Greater" => a.gt(b),
                "GreaterOrEqual" => a.ge(b),
                "And" => a.logical_and(b),
                "Or" => a.logical_or(b),
                "Xor" => a.logical_xor(b),
                "BitwiseAnd" => a.bitwise_and(b),
                "BitwiseOr" => a.bitwise_or(b),
                "BitwiseXor" => a.bitwise_xor(b),
                _ => a.lt(0.0).where_(a * b, a),
            }
        }
        "Mod" => {
            n.check_attrs(&["fmod"])?;
            let (a, b) = (n.input(0)?, n.input(1)?);
            if a.dtype().is_float() {
                // C's fmod, exact for infinite divisors (a finite `a` stays `a`), then for
                // fmod=0 numpy's floor mod: a nonzero remainder takes the divisor's sign
                let finite_a = a
                    .isinf()
                    .logical_not()
                    .logical_and(&a.isnan().logical_not());
                let r = b.isinf().logical_and(&finite_a).where_(a, a.fmod(b));
                if n.int("fmod", 0) != 0 {
                    r
                } else {
                    let differ = r.ne(0.0).logical_and(&r.lt(0.0).ne(&b.lt(0.0)));
                    differ.where_(&r + b, &r)
                }
            } else if n.int("fmod", 0) != 0 {
                a.fmod(b)
            } else {
                a.modulo(b)
            }
        }
        "BitShift" => {
            n.check_attrs(&["direction"])?;
            let (a, b) = (n.input(0)?, n.input(1)?);
            match n.string("direction", "").as_str() {
                "LEFT" => a.lshift(b),
                "RIGHT" => a.rshift(b),
                d => return Err(n.err(format!("direction {d:?}: expected LEFT or RIGHT"))),
            }
        }
        "Where" => {
            n.check_attrs(&[])?;
            n.input(0)?.where_(n.input(1)?, n.input(2)?)
        }
        "Max" | "Min" | "Sum" | "Mean" => {
            n.check_attrs(&[])?;
            let xs = n.present_inputs();
            let Some((first, rest)) = xs.split_first() else {
                return Err(n.err("needs at least one input"));
            };
            let mut acc = (*first).clone();
            for x in rest {
                acc = match n.op {
                    "Max" => acc.maximum(*x),
                    "Min" => acc.minimum(*x),
                    _ => acc + *x,
                };
            }
            if n.op == "Mean" {
                acc = keep_dtype(acc / xs.len() as f64, first);
            }
            acc
        }
        "SwiGLU" => {
            n.check_attrs(&["alpha"])?;
            let (a, b) = (n.input(0)?, n.input(1)?);
            if a.shape() != b.shape() || !a.dtype().is_float() || a.dtype() != b.dtype() {
                return Err(n.err(format!(
                    "A {:?} ({}) and B {:?} ({}) must be floats of one shape and dtype \
                     (SwiGLU does not broadcast)",
                    a.shape(),
                    a.dtype(),
                    b.shape(),
                    b.dtype()
                )));
            }
            a * (a * n.float("alpha", 1.0)).sigmoid() * b
        }
        "Gelu" => {
            n.check_attrs(&["approximate"])?;
            let x = n.input(0)?;
            match n.string("approximate", "none").as_str() {
                "none" => x * 0.5 * ((x * std::f64::consts::FRAC_1_SQRT_2).erf() + 1.0),
                "tanh" => x.gelu_with("tanh"),
                a => return Err(n.err(format!("approximate {a:?}: expected none or tanh"))),
            }
        }
        "Cast" => {
            n.check_attrs(&["to", "saturate", "round_mode"])?;
            let elem = n.int("to", 0) as i32;
            if let Some(to) = Narrow::of(elem) {
                return cast_narrow(n, n.input(0)?, to).map(Some);
            }
            let to = dtype_of(elem).map_err(|e| n.err(e))?;
            cast(n, n.input(0)?, to)?
        }
        "BitCast" => {
            n.check_attrs(&["to"])?;
            let to = dtype_of(n.int("to", 0) as i32).map_err(|e| n.err(e))?;
            let x = n.input(0)?;
            if to.itemsize() != x.dtype().itemsize() {
                return Err(n.err(format!(
                    "{} to {to}: only casts between types of one size are supported",
                    x.dtype()
                )));
            }
            x.bitcast(to)
        }
        "CastLike" => {
            n.check_attrs(&["saturate", "round_mode"])?;
            if let Some(to) = n.narrow_input(1) {
                return cast_narrow(n, n.input(0)?, to).map(Some);
            }
            let to = n.input(1)?.dtype();
            cast(n, n.input(0)?, to)?
        }
        _ => return Ok(None),
    };
    Ok(Some(t))
}

/// `Cast` to a [`Narrow`] type (its container dtype holds the result): `round_mode` applies to
/// `FLOAT8E8M0` only.
fn cast_narrow(n: &Node, x: &Tensor, to: Narrow) -> Result<Tensor> {
    let mode = match n.string("round_mode", "up").as_str() {
        "up" => RoundMode::Up,
        "down" if to == Narrow::Float8E8M0 => RoundMode::Down,
        "nearest" if to == Narrow::Float8E8M0 => RoundMode::Nearest,
        m => {
            return Err(n.err(format!(
                "round_mode {m:?} to {}: expected \"up\" (or down/nearest to FLOAT8E8M0)",
                to.name()
            )));
        }
    };
    narrow::cast_to(x, to, n.int("saturate", 1) != 0, mode, n.device()).map_err(|e| n.err(e))
}

/// ONNX's `Cast`: float to int truncates toward zero (a plain cast), to bool is `!= 0`.
fn cast(n: &Node, x: &Tensor, to: DType) -> Result<Tensor> {
    if n.has("round_mode") && n.string("round_mode", "up") != "up" {
        return Err(n.err("round_mode other than \"up\" is not supported"));
    }
    if n.int("saturate", 1) != 0 && (to == DType::FP8E4M3 || to == DType::FP8E5M2) {
        // saturate (the default): values beyond the format's range, infinities included,
        // become its largest; NaN stays NaN
        let max = if to == DType::FP8E4M3 { 448.0 } else { 57344.0 };
        let xf = x.cast(DType::FLOAT32);
        let clipped = xf.clip(Some(-max), Some(max));
        return Ok(clipped.cast(to));
    }
    if to == DType::FP8E4M3 {
        // without saturation, E4M3FN (no infinity) overflows to NaN: from 464 up, the midpoint
        // between its largest value 448 and the next power step, and for infinities
        let xf = x.cast(DType::FLOAT32);
        let over = xf.abs().ge(464.0);
        return Ok(over.where_(f64::NAN, &xf).cast(to));
    }
    Ok(if to == DType::BOOL {
        x.ne(0)
    } else {
        x.cast(to)
    })
}

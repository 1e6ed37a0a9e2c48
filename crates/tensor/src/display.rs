//! `Display` for tensors, printing values like numpy (`[[1. 2.]\n [3. 4.]]`).

use std::fmt;

use tinygrad_dtype::{ConstValue, DType};

use crate::Tensor;

fn fmt_value(v: f64, dt: DType) -> String {
    if dt.is_bool() {
        return if v != 0.0 {
            "True".into()
        } else {
            "False".into()
        };
    }
    if !dt.is_float() {
        return format!("{}", v as i128);
    }
    if v.is_nan() || v.is_infinite() {
        return ConstValue::Float(v).to_string();
    }
    // shortest representation in the tensor's own precision, numpy style ("1." for 1.0)
    let s = if dt.bitsize() <= 32 {
        format!("{}", v as f32)
    } else {
        format!("{v}")
    };
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.")
    }
}

fn write_nested(out: &mut String, vals: &[String], shape: &[usize], depth: usize, width: usize) {
    if shape.is_empty() {
        out.push_str(&vals[0]);
        return;
    }
    out.push('[');
    let inner: usize = shape[1..].iter().product();
    for i in 0..shape[0] {
        if i > 0 {
            if shape.len() > 1 {
                out.push_str(&"\n".repeat(shape.len() - 1));
                out.push_str(&" ".repeat(depth + 1));
            } else {
                out.push(' ');
            }
        }
        if shape.len() == 1 {
            out.push_str(&format!("{:>width$}", vals[i]));
        } else {
            write_nested(
                out,
                &vals[i * inner..(i + 1) * inner],
                &shape[1..],
                depth + 1,
                width,
            );
        }
    }
    out.push(']');
}

impl fmt::Display for Tensor {
    /// Realizes the tensor and prints its values in numpy's layout.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dt = self.dtype();
        let vals: Vec<String> = self
            .to_f64_vec()
            .into_iter()
            .map(|v| fmt_value(v, dt))
            .collect();
        let width = vals.iter().map(|s| s.len()).max().unwrap_or(0);
        let mut out = String::new();
        write_nested(&mut out, &vals, &self.shape(), 0, width);
        f.write_str(&out)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<Tensor {:?} {} on {}>",
            self.shape(),
            self.dtype(),
            self.device()
        )
    }
}

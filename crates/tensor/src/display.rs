//! `Display` for tensors, printing values like numpy (`[[1. 2.]\n [3. 4.]]`).

use std::fmt;

use tinygrad_dtype::{ConstValue, DType};

use crate::Tensor;

fn fmt_value(v: f64, is_float: bool, is_bool: bool) -> String {
    if is_bool {
        return if v != 0.0 {
            "True".into()
        } else {
            "False".into()
        };
    }
    if !is_float {
        return format!("{}", v as i128);
    }
    ConstValue::Float(v)
        .to_string()
        .trim_end_matches('0')
        .to_string()
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
            .map(|v| fmt_value(v, dt.is_float(), dt.is_bool()))
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

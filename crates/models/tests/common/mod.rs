//! Helpers the model tests share: reading reference values from JSON and comparing them.

use serde_json::Value;

/// Every number in `v` (nested arrays flattened), as f32.
pub fn floats(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(floats).collect(),
        x => vec![x.as_f64().expect("a number") as f32],
    }
}

/// The largest absolute difference of two equally long slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

//! Losses: `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss`.

use tinygrad_tensor::{DType, Tensor};

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is one of this file's ops.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    match n.op {
        "NegativeLogLikelihoodLoss" => {
            n.check_attrs(&["ignore_index", "reduction"])?;
            let loss = nll(n, n.input(0)?, n.input(1)?, n.opt_input(2))?;
            Ok(Some(vec![loss]))
        }
        "SoftmaxCrossEntropyLoss" => {
            n.check_attrs(&["ignore_index", "reduction"])?;
            let scores = n.input(0)?;
            if scores.ndim() < 2 {
                return Err(n.err(format!("scores {:?}: expected (N, C, ...)", scores.shape())));
            }
            let log_prob = scores.log_softmax(1);
            let loss = nll(n, &log_prob, n.input(1)?, n.opt_input(2))?;
            Ok(Some(vec![loss, log_prob]))
        }
        _ => Ok(None),
    }
}

/// `-x[n, target[n, ...], ...]`, weighted per class, targets equal to `ignore_index` left out,
/// reduced by `reduction` (`mean` divides by the weights' sum, as ONNX does).
fn nll(n: &Node, x: &Tensor, target: &Tensor, weight: Option<&Tensor>) -> Result<Tensor> {
    let xs = x.shape();
    let ts = target.shape();
    if xs.len() < 2 || ts.len() != xs.len() - 1 || ts[0] != xs[0] || ts[1..] != xs[2..] {
        return Err(n.err(format!(
            "input {xs:?} and target {ts:?}: expected (N, C, d...) and (N, d...)"
        )));
    }
    let c = xs[1] as i64;
    let target = target.cast(DType::INT64);
    let valid = if n.has("ignore_index") {
        target.ne(n.int("ignore_index", 0))
    } else {
        Tensor::full_on(&ts, true, DType::BOOL, n.device())
    };
    let safe = valid
        .where_(&target, 0i64)
        .clip(Some(0.0), Some((c - 1) as f64));
    let picked = x.gather(1, &safe.unsqueeze(1)).squeeze(Some(1)).neg();
    let w = match weight {
        Some(w) => w.gather(0, &safe.flatten(0, -1)).reshape(&ts),
        None => Tensor::full_on(&ts, 1.0, x.dtype(), n.device()),
    };
    let w = valid.where_(&w, 0.0).cast(x.dtype());
    let loss = picked * &w;
    Ok(match n.string("reduction", "mean").as_str() {
        "none" => loss,
        "sum" => loss.sum(tinygrad_tensor::Axis::All),
        "mean" => loss.sum(tinygrad_tensor::Axis::All) / w.sum(tinygrad_tensor::Axis::All),
        r => return Err(n.err(format!("reduction {r:?}: expected none, sum or mean"))),
    })
}

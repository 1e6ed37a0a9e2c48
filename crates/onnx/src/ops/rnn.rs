//! The recurrent layers `RNN`, `GRU` and `LSTM`: the time loop runs on the host, each step a few
//! tensor ops on the whole batch (forward, reverse or both directions; `sequence_lens` masks
//! finished sequences, which keep their last state; both layouts; custom activations; clip;
//! GRU's `linear_before_reset`; LSTM's peepholes and `input_forget`).

use tinygrad_tensor::Tensor;

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is one of this file's ops.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    let gates = match n.op {
        "RNN" => 1,
        "GRU" => 3,
        "LSTM" => 4,
        _ => return Ok(None),
    };
    let mut known = vec![
        "activation_alpha",
        "activation_beta",
        "activations",
        "clip",
        "direction",
        "hidden_size",
        "layout",
    ];
    if n.op == "GRU" {
        known.push("linear_before_reset");
    }
    if n.op == "LSTM" {
        known.push("input_forget");
    }
    n.check_attrs(&known)?;
    let layout = n.int("layout", 0);
    let x = n.input(0)?;
    let x = if layout == 1 {
        x.transpose(0, 1)
    } else {
        x.clone()
    };
    let xs = x.shape();
    if xs.len() != 3 {
        return Err(n.err(format!("X {xs:?}: expected (seq, batch, input)")));
    }
    let (seq, batch) = (xs[0], xs[1]);
    let (w, r) = (n.input(1)?, n.input(2)?);
    let hidden = match n.int("hidden_size", 0) {
        h if h > 0 => h as usize,
        _ => r.shape()[2],
    };
    let dirs: Vec<bool> = match n.string("direction", "forward").as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        d => return Err(n.err(format!("direction {d:?} is not supported"))),
    };
    if w.shape() != [dirs.len(), gates * hidden, xs[2]]
        || r.shape() != [dirs.len(), gates * hidden, hidden]
    {
        return Err(n.err(format!(
            "W {:?} and R {:?} for {} direction(s), {gates} gates of {hidden}, input {}",
            w.shape(),
            r.shape(),
            dirs.len(),
            xs[2]
        )));
    }
    let lens: Option<Vec<i64>> = n.ints_input(4)?;
    if lens.is_some() && dirs.contains(&true) {
        return Err(n.err("sequence_lens with a reverse direction is not supported"));
    }
    let acts = activations(n, gates)?;
    let clip = n.has("clip").then(|| n.float("clip", 0.0));
    let clipped = |t: Tensor| match clip {
        Some(c) => t.clip(Some(-c), Some(c)),
        None => t,
    };
    let dev = n.device();
    let dt = x.dtype();
    let mut ys = Vec::new();
    let (mut hs, mut cs) = (Vec::new(), Vec::new());
    // ONNX lists the activations of the forward direction, then the reverse one's
    let per = acts.len() / dirs.len().max(1);
    for (d, &reverse) in dirs.iter().enumerate() {
        let acts = &acts[d * per..(d + 1) * per];
        let pick = |t: &Tensor| {
            t.shrink(&{
                let mut b: Vec<(usize, usize)> = t.shape().iter().map(|&s| (0, s)).collect();
                b[0] = (d, d + 1);
                b
            })
            .squeeze(Some(0))
        };
        let (wd, rd) = (pick(w), pick(r));
        // the gate slices of W, R and the biases, in ONNX's order (zrh, iofc)
        let part =
            |t: &Tensor, g: usize| t.shrink(&[(g * hidden, (g + 1) * hidden), (0, t.shape()[1])]);
        let bias = match n.opt_input(3) {
            Some(b) => pick(b),
            None => Tensor::zeros(&[2 * gates * hidden], dt).to(dev),
        };
        let bpart = |g: usize| bias.shrink(&[(g * hidden, (g + 1) * hidden)]);
        let rbpart = |g: usize| bias.shrink(&[((gates + g) * hidden, (gates + g + 1) * hidden)]);
        let mut h = match n.opt_input(5) {
            Some(h0) => pick(h0),
            None => Tensor::zeros(&[batch, hidden], dt).to(dev),
        };
        let mut c = match n.opt_input(6) {
            Some(c0) if n.op == "LSTM" => pick(c0),
            _ => Tensor::zeros(&[batch, hidden], dt).to(dev),
        };
        let peep = n.opt_input(7).filter(|_| n.op == "LSTM").map(pick);
        let mut out = vec![None; seq];
        for step in 0..seq {
            let t = if reverse { seq - 1 - step } else { step };
            let xt = x
                .shrink(&[(t, t + 1), (0, batch), (0, xs[2])])
                .squeeze(Some(0));
            let lin = |g: usize, hin: &Tensor| {
                xt.matmul(&part(&wd, g).t()) + hin.matmul(&part(&rd, g).t()) + bpart(g) + rbpart(g)
            };
            let (h_new, c_new) = match n.op {
                "RNN" => (act(&acts[0], clipped(lin(0, &h))), c.clone()),
                "GRU" => {
                    let z = act(&acts[0], clipped(lin(0, &h)));
                    let rg = act(&acts[0], clipped(lin(1, &h)));
                    let pre = if n.int("linear_before_reset", 0) != 0 {
                        xt.matmul(&part(&wd, 2).t())
                            + bpart(2)
                            + &rg * (h.matmul(&part(&rd, 2).t()) + rbpart(2))
                    } else {
                        lin(2, &(&rg * &h))
                    };
                    let hh = act(&acts[1], clipped(pre));
                    ((z.neg() + 1.0) * hh + &z * &h, c.clone())
                }
                _ => {
                    let p = |g: usize| {
                        peep.as_ref()
                            .map(|p| p.shrink(&[(g * hidden, (g + 1) * hidden)]))
                    };
                    let with_peep = |pre: Tensor, g: usize, cell: &Tensor| match p(g) {
                        Some(pg) => pre + pg * cell,
                        None => pre,
                    };
                    let i = act(&acts[0], clipped(with_peep(lin(0, &h), 0, &c)));
                    let f = if n.int("input_forget", 0) != 0 {
                        i.neg() + 1.0
                    } else {
                        act(&acts[0], clipped(with_peep(lin(2, &h), 2, &c)))
                    };
                    let g = act(&acts[1], clipped(lin(3, &h)));
                    let c2 = &f * &c + &i * &g;
                    let o = act(&acts[0], clipped(with_peep(lin(1, &h), 1, &c2)));
                    (o * act(&acts[2], c2.clone()), c2)
                }
            };
            match &lens {
                Some(l) => {
                    let valid: Vec<u8> = l.iter().map(|&len| u8::from((t as i64) < len)).collect();
                    let v =
                        Tensor::from_bytes(&valid, tinygrad_tensor::DType::BOOL, &[batch, 1], dev);
                    out[t] = Some(v.where_(&h_new, 0.0).cast(dt));
                    h = v.where_(&h_new, &h);
                    c = v.where_(&c_new, &c);
                }
                None => {
                    out[t] = Some(h_new.clone());
                    h = h_new;
                    c = c_new;
                }
            }
            // keep each step's graph small: the next step reads realized states
            h = h.contiguous();
            c = c.contiguous();
        }
        let steps: Vec<Tensor> = out
            .into_iter()
            .map(|o| o.expect("every step ran"))
            .collect();
        let refs: Vec<&Tensor> = steps.iter().collect();
        ys.push(Tensor::stack(&refs, 0));
        hs.push(h);
        cs.push(c);
    }
    let ys_ref: Vec<&Tensor> = ys.iter().collect();
    // (seq, dirs, batch, hidden)
    let y = Tensor::stack(&ys_ref, 1);
    let y = if layout == 1 {
        y.permute(&[2, 0, 1, 3])
    } else {
        y
    };
    let stack = |v: &[Tensor]| {
        let r: Vec<&Tensor> = v.iter().collect();
        let s = Tensor::stack(&r, 0);
        if layout == 1 { s.transpose(0, 1) } else { s }
    };
    let mut outs = vec![y, stack(&hs)];
    if n.op == "LSTM" {
        outs.push(stack(&cs));
    }
    Ok(Some(outs))
}

/// An activation by name with its alpha and beta.
struct Act {
    name: String,
    alpha: Option<f64>,
    beta: Option<f64>,
}

fn activations(n: &Node, gates: usize) -> Result<Vec<Act>> {
    let defaults: &[&str] = match gates {
        1 => &["Tanh"],
        3 => &["Sigmoid", "Tanh"],
        _ => &["Sigmoid", "Tanh", "Tanh"],
    };
    let names: Vec<String> = match n.strings("activations") {
        Some(v) if !v.is_empty() => v,
        _ => defaults.iter().map(|s| s.to_string()).collect(),
    };
    let alphas = n.floats("activation_alpha").unwrap_or_default();
    let betas = n.floats("activation_beta").unwrap_or_default();
    let acts: Vec<Act> = names
        .iter()
        .enumerate()
        .map(|(i, name)| Act {
            name: name.clone(),
            alpha: alphas.get(i).map(|&a| f64::from(a)),
            beta: betas.get(i).map(|&b| f64::from(b)),
        })
        .collect();
    for a in &acts {
        if ![
            "Tanh",
            "Sigmoid",
            "Relu",
            "HardSigmoid",
            "LeakyRelu",
            "Affine",
            "ScaledTanh",
            "Elu",
            "Softsign",
            "Softplus",
            "ThresholdedRelu",
        ]
        .contains(&a.name.as_str())
        {
            return Err(n.err(format!("activation {:?} is not supported", a.name)));
        }
    }
    let dirs = if n.string("direction", "forward") == "bidirectional" {
        2
    } else {
        1
    };
    // the defaults serve every direction; a given list names each direction's in turn
    let mut acts = acts;
    if n.strings("activations").is_none_or(|v| v.is_empty()) && dirs == 2 {
        let again: Vec<Act> = acts
            .iter()
            .map(|a| Act {
                name: a.name.clone(),
                alpha: a.alpha,
                beta: a.beta,
            })
            .collect();
        acts.extend(again);
    }
    if acts.len() != defaults.len() * dirs {
        return Err(n.err(format!(
            "{} activations: expected {} per direction for {dirs} direction(s)",
            acts.len(),
            defaults.len()
        )));
    }
    Ok(acts)
}

fn act(a: &Act, x: Tensor) -> Tensor {
    let (al, be) = (a.alpha, a.beta);
    match a.name.as_str() {
        "Sigmoid" => x.sigmoid(),
        "Relu" => x.relu(),
        "HardSigmoid" => x.hardsigmoid(al.unwrap_or(0.2), be.unwrap_or(0.5)),
        "LeakyRelu" => x.leaky_relu(al.unwrap_or(0.01)),
        "Affine" => x * al.unwrap_or(1.0) + be.unwrap_or(0.0),
        "ScaledTanh" => (x * be.unwrap_or(1.0)).tanh() * al.unwrap_or(1.0),
        "Elu" => x.elu(al.unwrap_or(1.0)),
        "Softsign" => x.softsign(),
        "Softplus" => x.softplus(1.0),
        "ThresholdedRelu" => x.gt(al.unwrap_or(1.0)).where_(&x, 0.0).cast(x.dtype()),
        _ => x.tanh(),
    }
}

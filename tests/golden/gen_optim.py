#!/usr/bin/env python3
"""Generate tests/golden/optim.json: reference parameter trajectories for the optimizers of
crates/tensor/src/nn/optim.rs.

Independent of tinygrad and of the Rust code: each update rule is written here from its paper or
the PyTorch documentation, in numpy float64:
- SGD: PyTorch's `torch.optim.SGD` algorithm (weight decay added to the gradient, momentum buffer
  `b = mu*b + g` started at `g`, Nesterov `g + mu*b`), `p -= lr*g`.
- LARS: You, Gitman & Ginsburg 2017 (arXiv:1708.03888), Algorithm 1: local lr
  `eta*|w| / (|g| + beta*|w|)`, `v = m*v + gamma*local_lr*(g + beta*w)`, `w -= v`.
- Adam: Kingma & Ba 2014 (arXiv:1412.6980), Algorithm 1 with bias correction.
- AdamW: PyTorch's `torch.optim.AdamW` algorithm (decoupled decay `p -= lr*wd*p`, then Adam).
- LAMB: You et al. 2019 (arXiv:1904.00962), Algorithm 2 with bias correction, phi = identity,
  ratio 1 when a norm is zero.
- Muon: Keller Jordan's reference: Newton-Schulz quintic iteration (a, b, c) = (3.4445, -4.7750,
  2.0315) on the Nesterov-momentum update (`X = G/(|G|_F + 1e-7)`, transposed if taller than
  wide, then `A = X X^T; X = a X + (b A + c A A) X`, 5 times), `p -= lr * X`. The momentum is the
  SGD form `b = mu*b + g`, `g + mu*b` (tinygrad's Muon, as Keller Jordan's first release), and
  each parameter is viewed as `(shape[0], -1)`.

The problem: least squares, loss = mean((X W^T + b - Y)^2) with X (8, 4), Y (8, 3), W (3, 4),
b (3,); the gradients are computed analytically. Initial values and data are rounded to float32
(so the Rust test starts from exactly the same numbers). Each case records the loss before each
step and the parameters after it.

Run from anywhere:  python3 tests/golden/gen_optim.py     (needs only numpy; deterministic)
"""
from __future__ import annotations

import json
import os

import numpy as np

SEED = 0x0971
STEPS = 6
rng = np.random.default_rng(SEED)


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


X = f32(rng.standard_normal((8, 4)))
Y = f32(rng.standard_normal((8, 3)))
W0 = f32(rng.uniform(-1, 1, (3, 4)))
B0 = f32(rng.uniform(-0.5, 0.5, (3,)))
N = Y.size


def loss_and_grads(p):
    w, b = p
    r = X @ w.T + b - Y
    loss = float((r * r).mean())
    gw = (2.0 / N) * r.T @ X
    gb = (2.0 / N) * r.sum(0)
    return loss, [gw, gb]


def norm(x):
    return float(np.sqrt((x * x).sum()))


# ---- update rules: state is a dict per optimizer; each returns new params ----

def sgd(cfg):
    lr, mu, wd, nesterov = cfg["lr"], cfg.get("momentum", 0.0), cfg.get("weight_decay", 0.0), cfg.get("nesterov", False)
    bufs = [None, None]

    def step(params, grads, t):
        out = []
        for i, (p, g) in enumerate(zip(params, grads)):
            g = g + wd * p
            if mu != 0:
                bufs[i] = g.copy() if bufs[i] is None else mu * bufs[i] + g
                g = g + mu * bufs[i] if nesterov else bufs[i]
            out.append(p - lr * g)
        return out
    return step


def lars(cfg):
    gamma, m, beta, eta = cfg["lr"], cfg["momentum"], cfg["weight_decay"], cfg["tcoef"]
    v = [np.zeros_like(W0), np.zeros_like(B0)]

    def step(params, grads, t):
        out = []
        for i, (w, g) in enumerate(zip(params, grads)):
            nw, ng = norm(w), norm(g)
            local = eta * nw / (ng + beta * nw) if nw > 0 and ng > 0 else 1.0
            v[i] = m * v[i] + gamma * local * (g + beta * w)
            out.append(w - v[i])
        return out
    return step


def adam_like(cfg, decoupled, lamb):
    lr, b1, b2, eps, wd = cfg["lr"], cfg["b1"], cfg["b2"], cfg["eps"], cfg.get("weight_decay", 0.0)
    m = [np.zeros_like(W0), np.zeros_like(B0)]
    v = [np.zeros_like(W0), np.zeros_like(B0)]

    def step(params, grads, t):
        out = []
        for i, (p, g) in enumerate(zip(params, grads)):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mh = m[i] / (1 - b1 ** t)
            vh = v[i] / (1 - b2 ** t)
            r = mh / (np.sqrt(vh) + eps)
            if lamb:
                u = r + wd * p
                nw, nu = norm(p), norm(u)
                ratio = nw / nu if nw > 0 and nu > 0 else 1.0
                out.append(p - lr * ratio * u)
            elif decoupled:
                p = p - lr * wd * p
                out.append(p - lr * r)
            else:
                out.append(p - lr * r)
        return out
    return step


def newton_schulz5(g, steps=5, eps=1e-7):
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g / (np.linalg.norm(g) + eps)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(steps):
        A = x @ x.T
        B = b * A + c * A @ A
        x = a * x + B @ x
    return x.T if tall else x


def muon(cfg):
    lr, mu = cfg["lr"], cfg["momentum"]
    bufs = [np.zeros_like(W0), np.zeros_like(B0)]

    def step(params, grads, t):
        out = []
        for i, (p, g) in enumerate(zip(params, grads)):
            bufs[i] = mu * bufs[i] + g
            u = g + mu * bufs[i]
            o = newton_schulz5(u.reshape(u.shape[0], -1)).reshape(p.shape)
            out.append(p - lr * o)
        return out
    return step


CASES = [
    ("sgd", {"opt": "sgd", "lr": 0.1}, sgd),
    ("sgd_momentum", {"opt": "sgd", "lr": 0.1, "momentum": 0.9}, sgd),
    ("sgd_nesterov_wd", {"opt": "sgd", "lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.05}, sgd),
    ("lars_default", {"opt": "lars", "lr": 0.5, "momentum": 0.9, "weight_decay": 1e-4, "tcoef": 0.001}, lars),
    ("lars_tcoef", {"opt": "lars", "lr": 0.5, "momentum": 0.5, "weight_decay": 0.01, "tcoef": 0.05}, lars),
    ("adam", {"opt": "adam", "lr": 0.01, "b1": 0.9, "b2": 0.999, "eps": 1e-8}, lambda c: adam_like(c, False, False)),
    ("adam_betas", {"opt": "adam", "lr": 0.05, "b1": 0.8, "b2": 0.95, "eps": 1e-6}, lambda c: adam_like(c, False, False)),
    ("adamw", {"opt": "adamw", "lr": 0.01, "b1": 0.9, "b2": 0.999, "eps": 1e-8, "weight_decay": 0.01}, lambda c: adam_like(c, True, False)),
    ("adamw_wd", {"opt": "adamw", "lr": 0.02, "b1": 0.9, "b2": 0.999, "eps": 1e-8, "weight_decay": 0.5}, lambda c: adam_like(c, True, False)),
    ("lamb", {"opt": "lamb", "lr": 0.01, "b1": 0.9, "b2": 0.999, "eps": 1e-6, "weight_decay": 0.0}, lambda c: adam_like(c, False, True)),
    ("lamb_wd", {"opt": "lamb", "lr": 0.05, "b1": 0.9, "b2": 0.999, "eps": 1e-6, "weight_decay": 0.1}, lambda c: adam_like(c, False, True)),
    ("muon", {"opt": "muon", "lr": 0.02, "momentum": 0.95}, muon),
    ("muon_lowmom", {"opt": "muon", "lr": 0.05, "momentum": 0.5}, muon),
]


def main():
    cases = []
    for name, cfg, make in CASES:
        step = make(cfg)
        params = [W0.copy(), B0.copy()]
        losses, traj = [], []
        for t in range(1, STEPS + 1):
            loss, grads = loss_and_grads(params)
            params = step(params, grads, t)
            losses.append(loss)
            traj.append({"W": params[0].ravel().tolist(), "b": params[1].ravel().tolist()})
        cases.append({"name": name, "config": cfg, "loss": losses, "params": traj})
        print(f"{name:18s} loss {losses[0]:.6f} -> {losses[-1]:.6f}")
    out = {
        "problem": {
            "X": X.ravel().tolist(), "X_shape": list(X.shape),
            "Y": Y.ravel().tolist(), "Y_shape": list(Y.shape),
            "W0": W0.ravel().tolist(), "W0_shape": list(W0.shape),
            "b0": B0.ravel().tolist(), "b0_shape": list(B0.shape),
        },
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()

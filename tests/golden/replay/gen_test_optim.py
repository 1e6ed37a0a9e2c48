"""Expected values for the replay of tinygrad's `test/backend/test_optim.py`
(`crates/tensor/tests/replay_test_optim.rs`), and the methods it does not replay with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_test_optim.py /tmp/tinygrad

(needs numpy and torch; `/tmp/tinygrad` a checkout of tinygrad at the pinned commit).

tinygrad's `TestOptim._test_optim` runs `step(Tensor, ...)` and `step(torch.tensor, ...)` from the
same initial values and compares the parameters. This generator draws those initial values as
the file does (`np.random.seed(1337)`, then `x_init`, `W_init`, `m_init`), runs the torch side
(`step(torch.tensor, torch.optim.X, steps, **opts)`, the file's own `TeenyNet`/`TinyNet`), and
stores, per method, the initial values and every `_test_sgd/_test_adam/_test_adamw/_test_muon`
call of the method (read from the file's source with `ast`: optimizer, steps, options,
tolerances) with torch's final `x` and `W`. The Rust side runs the same steps on our optimizers
and checks the call it writes matches the stored one.
"""
import ast, os, sys
import numpy as np
import torch
from common import arr, write

np.random.seed(1337)
x_init = np.random.randn(1, 4).astype(np.float32)
W_init = np.random.randn(4, 4).astype(np.float32)
m_init = np.random.randn(1, 4).astype(np.float32)


def _param(val): return torch.tensor(val, requires_grad=True)


class TeenyNet:
  def __init__(self):
    self.x, self.W = _param(x_init.copy()), _param(W_init.copy())
  def forward(self): return (self.x * self.W).sum()


class TinyNet:
  def __init__(self):
    self.x, self.W = _param(x_init.copy()), _param(W_init.copy())
    self.m = torch.tensor(m_init.copy())
  def forward(self):
    out = self.x.matmul(self.W).relu()
    out = out.log_softmax(1)
    return out.mul(self.m).add(self.m).sum()


def step(optim, steps=1, teeny=False, **kwargs):
  """The file's `step(torch.tensor, optim, steps, **opts)`."""
  net = TeenyNet() if teeny else TinyNet()
  optim = optim([net.x, net.W], **kwargs)
  for _ in range(steps):
    out = net.forward()
    optim.zero_grad()
    out.backward()
    optim.step()
  return net.x.detach().numpy(), net.W.detach().numpy()


TORCH = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "muon": torch.optim.Muon}

EXCLUDED = {}


def calls(tinygrad):
  """{method: [(optimizer, steps, opts, atol, rtol), ...]}: the `self._test_<opt>(...)` calls of
  each TestOptim method, literal arguments as written in the file."""
  with open(os.path.join(tinygrad, "test/backend/test_optim.py")) as f: tree = ast.parse(f.read())
  out = {}
  for cls in tree.body:
    if not (isinstance(cls, ast.ClassDef) and cls.name == "TestOptim"): continue
    for fn in cls.body:
      if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test")): continue
      for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in \
            ("_test_sgd", "_test_adam", "_test_adamw", "_test_muon"):
          steps, opts, atol, rtol = (ast.literal_eval(a) for a in node.args)
          out.setdefault(f"TestOptim.{fn.name}", []).append((node.func.attr[len("_test_"):], steps, opts, atol, rtol))
  return out


def values(tinygrad):
  init = {"x_init": arr(x_init), "W_init": arr(W_init), "m_init": arr(m_init)}
  out = {}
  for name, cs in calls(tinygrad).items():
    if name in EXCLUDED: continue
    runs = []
    for opt, steps, opts, atol, rtol in cs:
      x, W = step(TORCH[opt], steps, **opts)
      opts = {k: list(v) if isinstance(v, tuple) else v for k, v in opts.items()}
      runs.append({"opt": opt, "steps": steps, "opts": opts, "atol": atol, "rtol": rtol, "x": arr(x), "W": arr(W)})
    out[name] = {**init, "runs": runs}
  # the other methods read the initial values only
  for name in ("TestOptim.test_duped_weights", "TestOptim.test_lamb_cpu_offload", "TestOptim.test_lamb_cpu_offload_multi"):
    out[name] = {"x_init": arr(x_init)}
  out["TestOptim.test_assert_tensor_train"] = {}
  return out


if __name__ == "__main__":
  write("test_optim", sys.argv[1], "test/backend/test_optim.py", EXCLUDED, values(sys.argv[1]))

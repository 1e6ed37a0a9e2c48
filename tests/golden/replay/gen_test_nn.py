"""Expected values for the replay of tinygrad's `test/backend/test_nn.py`
(`crates/tensor/tests/replay_test_nn.rs`), and the methods it does not replay with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_test_nn.py /tmp/tinygrad

(needs numpy and torch; `/tmp/tinygrad` a checkout of tinygrad at the pinned commit).

tinygrad's test draws its inputs and layer weights with tinygrad's own RNG and hands the same
numbers to torch. Here they are drawn with numpy's legacy MT19937 stream instead
(`np.random.seed(seed)` once per case, then `standard_normal` for `Tensor.randn`, `uniform` for
`Tensor.uniform` and for the layers' uniform initializations, each cast to float32, in the order
the test draws them), which the Rust side regenerates; each case stores the float64 sum of
everything it drew so that the Rust side checks it drew the same numbers. Integer inputs the test
draws with numpy (`np.random.randint`) are stored.

Expected values are torch's, computed as the test computes them. An array of up to `FULL`
elements is stored whole (float32 bytes, base64); a larger one keeps an evenly spaced sample of
`SAMPLE` elements plus the float64 sum and sum of magnitudes of all of them (as the replay of
test_ops does: the Rust side checks the sampled elements with the test's tolerances and the sums
with the bound those tolerances imply).
"""
import base64, math, sys
import numpy as np
import torch
from common import methods, write

FULL = 4096
SAMPLE = 1024
REL = "test/backend/test_nn.py"


def f32(a):
  """A float array as {"shape", "b64"} (float32 little-endian), sampled when large."""
  a = np.asarray(a.detach().numpy() if isinstance(a, torch.Tensor) else a, dtype=np.float32)
  flat = a.reshape(-1)
  if flat.size <= FULL:
    return {"shape": list(a.shape), "b64": base64.b64encode(flat.astype("<f4").tobytes()).decode()}
  idx = np.round(np.arange(SAMPLE) * ((flat.size - 1) / (SAMPLE - 1))).astype(np.int64)
  wide = flat.astype(np.float64)
  return {"shape": list(a.shape), "b64": base64.b64encode(flat[idx].astype("<f4").tobytes()).decode(),
          "sample_of": int(flat.size), "sum": float(wide.sum()), "abs_sum": float(np.abs(wide).sum())}


class Stream:
  """numpy's legacy stream after `np.random.seed(seed)`; what `crates/.../replay_test_nn.rs` redraws."""
  def __init__(self, seed):
    np.random.seed(seed)
    self.seed, self.total = seed, 0.0

  def _keep(self, a):
    a = a.astype(np.float32)
    self.total += float(a.astype(np.float64).sum())
    return a

  def normal(self, *shape): return self._keep(np.random.standard_normal(shape))
  def uniform(self, low, high, *shape): return self._keep(np.random.uniform(low, high, shape))
  def done(self, v):
    v["seed"], v["draws_sum"] = self.seed, self.total
    return v


SEEDS = {}
def stream(name):
  return Stream(SEEDS[name])


def t(a, grad=False): return torch.tensor(np.asarray(a), requires_grad=grad)


# ---------------------------------------------------------------------------------------------
# the cases

def batchnorm(name, training, threed, track):
  s, out = stream(name), {"sizes": []}
  for sz in [4, 8, 16, 32]:
    w, b = s.normal(sz), s.normal(sz)
    rm = rv = None
    if track: rm, rv = s.normal(sz), s.normal(sz)  # the test's `running_var[<0] = 0` edits a copy
    with torch.no_grad():
      tbn = (torch.nn.BatchNorm3d if threed else torch.nn.BatchNorm2d)(sz, track_running_stats=track).eval()
      tbn.training = training
      tbn.weight[:] = t(w); tbn.bias[:] = t(b)
      if track: tbn.running_mean[:] = t(rm); tbn.running_var[:] = t(rv)
    case = {"sz": sz}
    if track: case["rm_before"], case["rv_before"] = f32(tbn.running_mean), f32(tbn.running_var)
    inn = s.normal(2, sz, 3, 3, 3) if threed else s.normal(2, sz, 3, 3)
    case["out"] = f32(tbn(t(inn)))
    if track: case["rm_after"], case["rv_after"] = f32(tbn.running_mean), f32(tbn.running_var)
    out["sizes"].append(case)
  return s.done(out)


def linear(name):
  s, out = stream(name), {"calls": []}
  BS, T, in_dim, out_dim = 4, 2, 8, 16
  for shape in [(BS, in_dim), (BS, T, in_dim)]:
    bound = 1 / math.sqrt(in_dim)  # Linear's init: kaiming_uniform(a=sqrt(5)) and the bias's
    w, b = s.uniform(-bound, bound, out_dim, in_dim), s.uniform(-bound, bound, out_dim)
    x = s.normal(*shape)
    with torch.no_grad():
      tl = torch.nn.Linear(in_dim, out_dim).eval()
      tl.weight[:] = t(w); tl.bias[:] = t(b)
      out["calls"].append({"z": f32(tl(t(x)))})
  return s.done(out)


def conv(name, transposed, BS, C1, DIMS, C2, K, S, P, D=1):
  s = stream(name)
  nd = len(DIMS)
  if transposed:
    wshape = (C1, C2, *([K] * nd))
  else:
    wshape = (C2, C1, *([K] * nd))
  scale = 1 / math.sqrt(C1 * K ** nd)  # the layers' init: uniform in +-1/sqrt(in_channels*prod(kernel_size))
  w, b = s.uniform(-scale, scale, *wshape), s.uniform(-scale, scale, C2)
  x = s.uniform(0, 1, BS, C1, *DIMS)  # Tensor.uniform: low=0.0, high=1.0
  cls = {(False, 1): torch.nn.Conv1d, (False, 2): torch.nn.Conv2d,
         (True, 1): torch.nn.ConvTranspose1d, (True, 2): torch.nn.ConvTranspose2d}[(transposed, nd)]
  with torch.no_grad():
    tl = cls(C1, C2, kernel_size=K, stride=S, padding=P, dilation=D).eval()
    tl.weight[:] = t(w); tl.bias[:] = t(b)
    z = tl(t(x))
  return s.done({"scale": scale, "z": f32(z)})


def norm_loop(name, make_torch, xshape, to_torch=None, iters=10, affine=True):
  """The norms' loop: 10 fresh inputs through one layer, `sum().backward()` each time (the
  parameters' gradients accumulate over the iterations, in torch as in tinygrad)."""
  s = stream(name)
  tl = make_torch()
  out = {"iters": []}
  if affine and hasattr(tl, "bias"):
    out["weight"], out["bias"] = f32(tl.weight), f32(tl.bias)
  for _ in range(iters):
    x = s.normal(*xshape)
    tx = t(x, grad=True)
    tz = to_torch(tl, tx) if to_torch else tl(tx)
    tz.sum().backward()
    it = {"z": f32(tz), "x_grad": f32(tx.grad)}
    if affine and getattr(tl, "weight", None) is not None:
      it["weight_grad"] = f32(tl.weight.grad)
      if getattr(tl, "bias", None) is not None: it["bias_grad"] = f32(tl.bias.grad)
    out["iters"].append(it)
  return s.done(out)


class TorchRMSNorm(torch.nn.Module):
  # the test's own reference (llama's RMSNorm)
  def __init__(self, dim, eps=1e-6, elementwise_affine=True):
    super().__init__()
    self.eps = eps
    self.elementwise_affine = elementwise_affine
    self.weight = torch.nn.Parameter(torch.ones(dim)) if elementwise_affine else None
  def _norm(self, x): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
  def forward(self, x):
    output = self._norm(x.float()).type_as(x)
    return output if self.weight is None else output * self.weight


def rmsnorm(name):
  s = stream(name)
  B, T, E = 4, 10, 20
  out = {}
  for key, affine in [("affine", True), ("no_affine", False)]:
    tl = TorchRMSNorm(E, elementwise_affine=affine)
    its = []
    for _ in range(10):
      x = s.normal(B, T, E)
      tx = t(x, grad=True)
      tz = tl(tx)
      tz.sum().backward()
      it = {"z": f32(tz), "x_grad": f32(tx.grad)}
      if affine: it["weight_grad"] = f32(tl.weight.grad)
      its.append(it)
    out[key] = its
  return s.done(out)


def embedding(name):
  s = stream(name)
  B, T, E, V = 4, 10, 20, 28
  bound = math.sqrt(6 / (V + E))  # glorot_uniform
  w = s.uniform(-bound, bound, V, E)
  with torch.no_grad():
    tl = torch.nn.Embedding(V, E).eval()
    tl.weight[:] = t(w)
  calls = []
  for shape in [(B, T), (B, 0), (B, T), (B, T), (B, T)]:  # the plain call, the empty one, the 3 jitted
    idx = np.random.randint(0, V, shape, dtype=np.int32)
    calls.append({"idx": {"shape": list(shape), "data": [int(i) for i in idx.reshape(-1)]},
                  "z": f32(tl(torch.tensor(idx)))})
  return s.done({"bound": bound, "calls": calls})


def lstm_cell(name):
  s = stream(name)
  stdv = 1 / math.sqrt(16)  # torch's LSTMCell init, which the test copies into tinygrad's
  ws = {k: s.uniform(-stdv, stdv, *shape) for k, shape in
        [("weight_hh", (64, 16)), ("weight_ih", (64, 32)), ("bias_hh", (64,)), ("bias_ih", (64,))]}
  inp = s.normal(1, 32)
  with torch.no_grad():
    tl = torch.nn.LSTMCell(32, 16)
    for k, v in ws.items(): getattr(tl, k)[:] = t(v)
    h, c = tl(t(inp))
    out = {"h1": f32(h), "c1": f32(c)}
    h, c = tl(t(inp), (h, c))
    out["h2"], out["c2"] = f32(h), f32(c)
  return s.done(out)


# REF (the reference interpreter) runs one element at a time: there the largest cases take a
# smaller batch and spatial size (same layers: channels, kernel, stride, padding, dilation); the
# Rust side passes the same sizes. Each keeps the test's shape of the problem (odd/even dims).
REF_SIZES = {
  "test_conv2d": dict(BS=1, DIMS=[10, 10]),
  "test_conv2d_same_padding_odd_input": dict(BS=1, DIMS=[5, 7]),
  "test_conv2d_same_padding_large_kernel": dict(BS=1, DIMS=[4, 5]),
  "test_conv2d_same_padding_with_dilation": dict(BS=2, DIMS=[14, 14]),
  "test_conv_transpose2d": dict(BS=1, DIMS=[3, 3]),
  "test_instancenorm_2d": dict(xshape=(8, 10, 10, 10)),
  "test_instancenorm_3d": dict(xshape=(4, 10, 6, 6, 6)),
}


def sized(fn, cpu, ref):
  """A case's values at the test's sizes ("CPU") and at REF's ("REF": smaller ones, or the same)."""
  out = {"CPU": fn(**cpu)}
  out["REF"] = fn(**{**cpu, **ref}) if ref else out["CPU"]
  return out


def values():
  v = {}
  for training, threed, track, n in [(False, False, True, "test_batchnorm2d"), (True, False, True, "test_batchnorm2d_training"),
                                     (False, False, False, "test_batchnorm2d_no_running_stats"),
                                     (True, False, False, "test_batchnorm2d_training_no_running_stats"),
                                     (False, True, True, "test_batchnorm3d"), (True, True, True, "test_batchnorm3d_training"),
                                     (False, True, False, "test_batchnorm3d_no_running_stats"),
                                     (True, True, False, "test_batchnorm3d_training_no_running_stats")]:
    v[f"TestNN.{n}"] = batchnorm(f"TestNN.{n}", training, threed, track)
  v["TestNN.test_linear"] = linear("TestNN.test_linear")
  convs = {
    "test_conv1d": (False, dict(BS=4, C1=16, DIMS=[224//4], C2=64, K=7, S=2, P=1)),
    "test_conv2d": (False, dict(BS=4, C1=16, DIMS=[224//4, 224//4], C2=64, K=7, S=2, P=1)),
    "test_conv1d_same_padding": (False, dict(BS=8, C1=3, DIMS=[32], C2=16, K=3, S=1, P='same')),
    "test_conv2d_same_padding_odd_input": (False, dict(BS=16, C1=16, DIMS=[29, 31], C2=32, K=5, S=1, P='same')),
    "test_conv2d_same_padding_large_kernel": (False, dict(BS=16, C1=16, DIMS=[28, 33], C2=32, K=9, S=1, P='same')),
    "test_conv2d_same_padding_with_dilation": (False, dict(BS=16, C1=3, DIMS=[28, 28], C2=32, K=3, S=1, P='same', D=3)),
    "test_conv_transpose1d": (True, dict(BS=4, C1=16, DIMS=[224//4], C2=64, K=7, S=2, P=1)),
    "test_conv_transpose2d": (True, dict(BS=4, C1=16, DIMS=[224//4, 224//4], C2=64, K=7, S=2, P=1)),
  }
  for n, (tr, kw) in convs.items():
    v[f"TestNN.{n}"] = sized(lambda **k: conv(f"TestNN.{n}", tr, **k), kw, REF_SIZES.get(n, {}))
  v["TestNN.test_groupnorm"] = norm_loop("TestNN.test_groupnorm", lambda: torch.nn.GroupNorm(3, 6).eval(), (20, 6, 10, 10))
  v["TestNN.test_layernorm"] = norm_loop("TestNN.test_layernorm", lambda: torch.nn.LayerNorm([10, 10]).eval(), (20, 5, 10, 10))
  v["TestNN.test_layernorm_2d"] = norm_loop("TestNN.test_layernorm_2d", lambda: torch.nn.LayerNorm([5]).eval(), (20, 5, 10, 10),
                                            to_torch=lambda tl, tx: tl(tx.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))
  v["TestNN.test_instancenorm_2d"] = sized(
    lambda xshape: norm_loop("TestNN.test_instancenorm_2d", lambda: torch.nn.InstanceNorm2d(10, affine=True).eval(), xshape),
    dict(xshape=(20, 10, 10, 10)), REF_SIZES["test_instancenorm_2d"])
  v["TestNN.test_instancenorm_3d"] = sized(
    lambda xshape: norm_loop("TestNN.test_instancenorm_3d", lambda: torch.nn.InstanceNorm3d(10, affine=True).eval(), xshape),
    dict(xshape=(20, 10, 10, 10, 10)), REF_SIZES["test_instancenorm_3d"])
  # Tensor.empty's contents are undefined: the replay feeds zeros (what the test's TODO says torch saw)
  tl = torch.nn.LayerNorm([10, 10]).eval()
  tx = torch.zeros(20, 5, 10, 10, requires_grad=True)
  tz = tl(tx); tz.sum().backward()
  v["TestNN.test_layernorm_forward"] = {"weight": f32(tl.weight), "bias": f32(tl.bias), "z": f32(tz)}
  v["TestNN.test_rmsnorm"] = rmsnorm("TestNN.test_rmsnorm")
  v["TestNN.test_embedding"] = embedding("TestNN.test_embedding")
  v["TestNN.test_lstm_cell"] = lstm_cell("TestNN.test_lstm_cell")
  return v


EXCLUDED = {
  "TestNN.test_conv2d_same_padding_invalid_padding_str":
    "Python ValueError of a padding string other than 'same': the Rust Padding enum has no string to misspell",
  "TestNN.test_load_state_dict_sharded_dict":
    "never run by tinygrad: @unittest.skipIf(not_support_multi_device, ...) passes the function itself (always truthy), not its result",
  "TestNN.test_load_state_dict_sharded_model_dict_different_axis":
    "never run by tinygrad: @unittest.skipIf(not_support_multi_device, ...) passes the function itself (always truthy), not its result",
}


if __name__ == "__main__":
  names, _ = methods(sys.argv[1], REL)
  SEEDS.update({n: i for i, n in enumerate(names)})
  write("test_nn", sys.argv[1], REL, EXCLUDED, values())

"""tinygrad's own op tests (`test/backend/test_ops.py`), turned into data our Rust suite replays.

Every `helper_test_op` / `helper_test_exception` call of that file is run as tinygrad runs it,
with two changes: the torch side is computed here (forward output and, unless the call is
forward-only, the gradients of `out.sum()` with respect to every input), and the tinygrad side is
*traced*: the test's tinygrad lambda is called on proxy tensors that record every Tensor method,
operator, index and `Tensor.xxx(...)` call it makes (with the arguments as given), while a real
tinygrad Tensor, never realized, answers shape/dtype questions. `crates/tensor/tests/test_ops.rs`
replays each trace on our API and compares with torch using the call's own tolerances.

Inputs are not stored: they are numpy's legacy MT19937 stream after `np.random.seed(0)` (as the
test's `prepare_test_op` draws them), which the Rust side regenerates; a sample of each input is
stored so that it checks it draws the same numbers. `vals=` inputs are stored.

Usage (needs torch, numpy, and tinygrad's source at the commit below; nothing is realized on the
tinygrad side, so its pure-Python `PYTHON` device is enough):

    git clone https://github.com/tinygrad/tinygrad /tmp/tinygrad   # commit a9069c17
    DEV=PYTHON PYTHONPATH=/tmp/tinygrad python3 tests/golden/gen_test_ops.py \
        /tmp/tinygrad/test/backend/test_ops.py

It rewrites `tests/golden/test_ops_cases.json` (one case per line) and prints what it covered.
"""
import base64, importlib.util, json, math, os, random, signal, sys, traceback, unittest

import numpy as np
import torch
from tinygrad import Tensor as RealTensor
from tinygrad.dtype import DType

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_ops_cases.json")

# ---------------------------------------------------------------------------------------------
# the trace: a global list of nodes; a case keeps the nodes its output depends on

NODES = []


class Unportable(Exception):
  """The lambda does something a trace cannot express (a callable argument, a leaked real tensor)."""


def add_node(node, real=None):
  if isinstance(real, RealTensor):
    node["shape"] = [int(s) if isinstance(s, int) else str(s) for s in real.shape]
    node["dtype"] = real.dtype.name
  NODES.append(node)
  return len(NODES) - 1


def enc(v):
  """An argument as JSON: tensors as {"t": node}, and tagged objects for what JSON lacks."""
  if isinstance(v, P): return {"t": v._n}
  if isinstance(v, RealTensor): raise Unportable("a tinygrad tensor that was not traced")
  if isinstance(v, bool) or v is None or isinstance(v, str): return v
  if isinstance(v, int): return v
  if isinstance(v, float):
    if math.isnan(v): return {"f": "nan"}
    if math.isinf(v): return {"f": "inf" if v > 0 else "-inf"}
    return v
  if isinstance(v, tuple): return {"tuple": [enc(x) for x in v]}
  if isinstance(v, list): return [enc(x) for x in v]
  if isinstance(v, slice): return {"slice": [enc(v.start), enc(v.stop), enc(v.step)]}
  if v is Ellipsis: return {"ellipsis": True}
  if isinstance(v, DType): return {"dtype": v.name}
  if isinstance(v, np.ndarray): return {"array": typed(v)}
  if isinstance(v, np.generic): return enc(v.item())
  if isinstance(v, dict): return {"dict": {k: enc(x) for k, x in v.items()}}
  raise Unportable(f"argument of type {type(v).__name__}")


def dec(v):
  if isinstance(v, P): return v._t
  if isinstance(v, tuple): return tuple(dec(x) for x in v)
  if isinstance(v, list): return [dec(x) for x in v]
  if isinstance(v, dict): return {k: dec(x) for k, x in v.items()}
  return v


LAST_RAISE = [None]


def call(name, fn, self_p, args, kwargs, static=False):
  node = {"op": name, "self": None if self_p is None else self_p._n,
          "args": [enc(a) for a in args], "kwargs": {k: enc(v) for k, v in kwargs.items()}}
  if static: node["static"] = True
  try:
    res = fn(*dec(list(args)), **dec(kwargs))
  except Exception as e:
    node["raises"] = type(e).__name__
    LAST_RAISE[0] = add_node(node)
    raise
  return wrap(res, node)


def wrap(res, node):
  if isinstance(res, RealTensor):
    return P(_node=add_node(node, res), _real=res)
  if isinstance(res, (tuple, list)) and res and all(isinstance(r, RealTensor) for r in res):
    node["multi"] = len(res)
    src = add_node(node)
    items = [P(_node=add_node({"op": "item", "src": src, "index": i}, r), _real=r) for i, r in enumerate(res)]
    return type(res)(items)
  return res  # a Python value (a shape, a number): the trace holds it as a constant


class PMeta(type):
  def __getattr__(cls, name):  # Tensor.xxx(...): static and class methods, or unbound methods
    real = getattr(RealTensor, name)
    if not callable(real): return real
    return lambda *a, **k: call(name, real, None, a, k, static=True)


class P(metaclass=PMeta):
  """A traced tinygrad Tensor; `Tensor(...)` inside the test file builds one."""
  def __init__(self, *args, _node=None, _real=None, **kwargs):
    if _node is not None:
      self._n, self._t = _node, _real
      return
    real = RealTensor(*dec(list(args)), **dec(kwargs))
    self._t = real
    self._n = add_node({"op": "Tensor", "self": None, "args": [enc(a) for a in args],
                        "kwargs": {k: enc(v) for k, v in kwargs.items()}, "static": True}, real)

  def __getattr__(self, name):
    if name.startswith("_") and name not in ("__array__",): raise AttributeError(name)
    attr = getattr(self._t, name)
    if isinstance(attr, RealTensor):  # a property such as .T or .mT
      return P(_node=add_node({"op": name, "self": self._n, "args": [], "kwargs": {}, "attr": True}, attr), _real=attr)
    if callable(attr):
      return lambda *a, **k: call(name, attr, self, a, k)
    return attr

  def __setitem__(self, idx, v):
    node = {"op": "__setitem__", "self": self._n, "args": [enc(idx), enc(v)], "kwargs": {}}
    try:
      self._t[dec(idx)] = dec(v)
    except Exception as e:
      node["raises"] = type(e).__name__
      LAST_RAISE[0] = add_node(node)
      raise
    self._n = add_node(node, self._t)

  def __iter__(self): return (self[i] for i in range(self._t.shape[0]))

  __hash__ = object.__hash__


def _dunder(name):
  def f(self, *args): return call(name, getattr(self._t, name), self, args, {})
  f.__name__ = name
  return f


for _name in ["add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv", "rfloordiv",
              "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand", "or", "ror", "xor", "rxor",
              "lshift", "rlshift", "rshift", "rrshift", "lt", "le", "gt", "ge", "eq", "ne", "neg", "invert",
              "abs", "pos", "getitem", "len", "bool", "float", "int", "index"]:
  setattr(P, f"__{_name}__", _dunder(f"__{_name}__"))

# ---------------------------------------------------------------------------------------------
# values

TORCH_TO_NAME = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64",
                 torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
                 torch.uint8: "uint8", torch.bool: "bool", torch.uint16: "uint16", torch.uint32: "uint32", torch.uint64: "uint64"}


def typed(a):
  """A numpy array as {dtype, shape, b64}: its little-endian bytes, row-major."""
  a = np.array(a, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
  name = "bool" if a.dtype == np.bool_ else a.dtype.name
  if a.dtype == np.float16: name = "float16"
  return {"dtype": name, "shape": list(a.shape), "b64": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes()).decode()}


# Expected values with more elements than this keep an evenly spaced sample of this many, plus the
# float64 sum and sum of magnitudes of all of them (the Rust side checks both: if every element is
# within atol + rtol*|x|, the sums differ by at most n*atol + rtol*sum|x|).
SAMPLE = 1024


def torch_typed(t, limit=None):
  t = t.detach().cpu()
  if t.dtype == torch.bfloat16:
    return {"dtype": "bfloat16", "shape": list(t.shape), "b64": base64.b64encode(t.view(torch.int16).numpy().astype("<i2").tobytes()).decode()}
  a = t.numpy()
  if limit is None or a.size <= limit: return typed(a)
  flat = a.reshape(-1)
  idx = np.round(np.arange(limit) * ((flat.size - 1) / (limit - 1))).astype(np.int64)
  d = typed(flat[idx])
  d["shape"], d["sample_of"] = list(a.shape), flat.size
  wide = flat.astype(np.float64)
  d["sum"], d["abs_sum"] = enc(float(wide.sum())), enc(float(np.abs(wide).sum()))
  return d

# ---------------------------------------------------------------------------------------------
# the recorders that replace test_ops' helpers

CASES = []
CURRENT = {"test": None, "k": 0}
STATS = {"calls": 0, "recorded": 0, "torch_failed": 0, "unportable": 0, "tinygrad_failed": 0}


def make_inputs(low, high, shps, vals, forward_only):
  """Exactly `prepare_test_op`, returning the torch tensors and the input descriptions."""
  descs = []
  if shps is None:
    ts = [torch.tensor(x, requires_grad=(not forward_only)) for x in vals]
  else:
    np.random.seed(0)
    np_data = [np.random.uniform(low=low, high=high, size=size).astype(np.float32) for size in shps]
    ts = [torch.tensor(data, requires_grad=(not forward_only)) for data in np_data]
  for i in range(len(ts)):
    if ts[i].dtype == torch.int64: ts[i] = ts[i].type(torch.int32)
  for i, t in enumerate(ts):
    if shps is None:
      descs.append({"vals": torch_typed(t)})
    else:
      flat = t.detach().numpy().reshape(-1)
      descs.append({"uniform": [low, high], "shape": list(t.shape), "sample": [float(x) for x in flat[:4]]})
  tst = [P(_node=add_node({"op": "input", "index": i}, RealTensor(t.detach().cpu().numpy())), _real=RealTensor(t.detach().cpu().numpy()))
         for i, t in enumerate(ts)]
  return ts, tst, descs


def subgraph(roots):
  """The nodes the roots depend on, renumbered in order; returns (nodes, new ids of roots)."""
  need, stack = set(), [r for r in roots if r is not None]
  while stack:
    n = stack.pop()
    if n in need: continue
    need.add(n)
    node = NODES[n]
    refs = []
    def collect(v):
      if isinstance(v, dict):
        if set(v) == {"t"}: refs.append(v["t"])
        else:
          for x in v.values(): collect(x)
      elif isinstance(v, list):
        for x in v: collect(x)
    collect(node.get("args")); collect(node.get("kwargs"))
    if node.get("self") is not None: refs.append(node["self"])
    if node["op"] == "item": refs.append(node["src"])
    stack.extend(refs)
  order = sorted(need)
  new = {old: i for i, old in enumerate(order)}
  def remap(v):
    if isinstance(v, dict):
      if set(v) == {"t"}: return {"t": new[v["t"]]}
      return {k: remap(x) for k, x in v.items()}
    if isinstance(v, list): return [remap(x) for x in v]
    return v
  out = []
  for old in order:
    node = dict(NODES[old])
    node["args"] = remap(node.get("args", [])); node["kwargs"] = remap(node.get("kwargs", {}))
    if node.get("self") is not None: node["self"] = new[node["self"]]
    if node["op"] == "item": node["src"] = new[node["src"]]
    out.append(node)
  return out, [None if r is None else new[r] for r in roots]


def case_name():
  CURRENT["k"] += 1
  return f"{CURRENT['test']}#{CURRENT['k']}"


def record_op(shps, torch_fxn, tinygrad_fxn=None, atol=1e-6, rtol=1e-3, grad_atol=1e-4, grad_rtol=1e-3,
              forward_only=False, vals=None, low=-2, high=2):
  STATS["calls"] += 1
  name = case_name()
  if tinygrad_fxn is None: tinygrad_fxn = torch_fxn
  ts, tst, descs = make_inputs(low, high, shps, vals, forward_only)
  case = {"name": name, "kind": "op", "inputs": descs, "atol": atol, "rtol": rtol, "grad_atol": grad_atol,
          "grad_rtol": grad_rtol, "forward_only": bool(forward_only)}
  try:
    out = torch_fxn(*ts)
  except Exception as e:
    STATS["torch_failed"] += 1
    CASES.append({"name": name, "kind": "skip", "reason": f"torch raised {type(e).__name__}: {str(e)[:200]}"})
    return
  try:
    ret = tinygrad_fxn(*tst)
    if not isinstance(ret, P): raise Unportable(f"the lambda returned {type(ret).__name__}")
  except Unportable as e:
    STATS["unportable"] += 1
    CASES.append({"name": name, "kind": "skip", "reason": f"not traceable: {e}"})
    return
  except Exception as e:
    STATS["tinygrad_failed"] += 1
    CASES.append({"name": name, "kind": "skip", "reason": f"tinygrad raised {type(e).__name__}: {str(e)[:200]}"})
    return
  nodes, (root,) = subgraph([ret._n])
  case["nodes"], case["output"] = nodes, root
  case["out"] = torch_typed(out, SAMPLE)
  if not forward_only and ts and tst:
    grads = torch.autograd.grad(torch_fxn(*ts).sum(), ts, allow_unused=True)
    case["grads"] = [None if g is None else torch_typed(g, SAMPLE) for g in grads]
  STATS["recorded"] += 1
  CASES.append(case)


def record_exception(self, shps, torch_fxn, tinygrad_fxn=None, expected=None, forward_only=False, exact=False, vals=None,
                     low=-1.5, high=1.5):
  STATS["calls"] += 1
  name = case_name()
  if tinygrad_fxn is None: tinygrad_fxn = torch_fxn
  ts, tst, descs = make_inputs(low, high, shps, vals, forward_only)
  exp = expected if isinstance(expected, tuple) else (expected,)
  try:
    torch_fxn(*ts)
    torch_raised = None
  except Exception as e:
    torch_raised = e
  LAST_RAISE[0] = None
  first = len(NODES)
  try:
    tinygrad_fxn(*tst)
    tiny_raised = None
  except Exception as e:
    tiny_raised = e
  if not isinstance(torch_raised, exp):
    CASES.append({"name": name, "kind": "skip", "reason": f"torch did not raise {expected}"}); return
  if not isinstance(tiny_raised, exp) or LAST_RAISE[0] is None or LAST_RAISE[0] < first:
    CASES.append({"name": name, "kind": "skip", "reason": f"tinygrad raised {type(tiny_raised).__name__} outside a traced call"}); return
  nodes, (root,) = subgraph([LAST_RAISE[0]])
  STATS["recorded"] += 1
  CASES.append({"name": name, "kind": "exception", "inputs": descs, "nodes": nodes, "output": root,
                "expected": [e.__name__ for e in exp], "tinygrad_message": str(tiny_raised)[:300]})


class Timeout(Exception): pass


def on_alarm(*_): raise Timeout()


def main():
  # deterministic output: set iteration order in messages (hash seed), and the random draws some
  # tests make in their own body (reseeded before each test; tinygrad's own run draws them from
  # whatever state earlier tests left)
  if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, "PYTHONHASHSEED": "0"})
  path = sys.argv[1]
  spec = importlib.util.spec_from_file_location("test_ops", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  mod.Tensor = P
  mod.helper_test_op = record_op
  classes = [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, unittest.TestCase) and v.__module__ == "test_ops"]
  signal.signal(signal.SIGALRM, on_alarm)
  outcome = {}
  for cls in classes:
    cls.helper_test_exception = record_exception
    for tname in sorted(n for n in dir(cls) if n.startswith("test")):
      if os.environ.get("ONLY") and os.environ["ONLY"] not in tname: continue
      CURRENT["test"], CURRENT["k"] = f"{cls.__name__}.{tname}", 0
      before = len(CASES)
      inst = cls(tname)
      np.random.seed(0); random.seed(0); torch.manual_seed(0)
      signal.alarm(60)
      try:
        getattr(inst, tname)()
        outcome[CURRENT["test"]] = "ran"
      except unittest.SkipTest as e:
        outcome[CURRENT["test"]] = f"skipped: {e}"
      except Exception as e:
        if os.environ.get("TRACE"): traceback.print_exc()
        outcome[CURRENT["test"]] = f"stopped after {len(CASES) - before} calls: {type(e).__name__}: {str(e)[:160]}"
      finally:
        signal.alarm(0)
      NODES.clear()
  with open(OUT, "w") as f:
    f.write("[\n" + ",\n".join(json.dumps(c, separators=(",", ":")) for c in CASES) + "\n]\n")
  for t, o in outcome.items():
    if o != "ran": print(f"{t}: {o}")
  kinds = {}
  for c in CASES: kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
  print(json.dumps(STATS), kinds, f"{os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
  main()

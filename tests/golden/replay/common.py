"""What the generators of tinygrad's test-file replays share (`gen_<file>.py` next to this one).

A replay turns one of tinygrad's test files (at the commit `tests/golden/gen_test_ops.py` pins)
into data a Rust test replays on our API. The file's test methods are listed here from its
source (`ast`, so the count is the file's own, not a hand-kept list); a generator adds the
expected values it computes with torch/numpy (the same computation the tinygrad test compares
with) and the methods it does not replay, each with its reason. It writes
`tests/golden/replay/<stem>.json`:

    {"source": "test/backend/test_tensor.py", "commit": "...",
     "methods": ["TestTinygrad.test_zerodim_initialization", ...],
     "excluded": {"Class.test_x": "why it cannot be replayed on our API", ...},
     "values": {"Class.test_y": {...whatever that case reads...}}}

`crates/tensor/tests/replay/mod.rs` checks that every method is either replayed (a Rust case of
the same name) or excluded, never both, and prints per file: methods / replayed / passing.
"""
import ast, json, math, os, subprocess

COMMIT = "a9069c177a"  # the tinygrad commit gen_test_ops.py pins
HERE = os.path.dirname(os.path.abspath(__file__))


def _skip_reason(decorators):
  """The message of an unconditional `@unittest.skip("...")` among `decorators`, else None."""
  for d in decorators:
    if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "skip":
      msg = d.args[0].value if d.args and isinstance(d.args[0], ast.Constant) else ""
      return f"skipped by tinygrad itself (@unittest.skip: {msg!r})"
  return None


def methods(tinygrad, rel):
  """`Class.test_name` of every test method a class of `rel` (in the checkout) defines, in order,
  and, for those tinygrad skips unconditionally (the method or its class), the skip's reason."""
  with open(os.path.join(tinygrad, rel)) as f: tree = ast.parse(f.read())
  out, skipped = [], {}
  for node in tree.body:
    if isinstance(node, ast.ClassDef):
      class_skip = _skip_reason(node.decorator_list)
      for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
          name = f"{node.name}.{item.name}"
          out.append(name)
          why = class_skip or _skip_reason(item.decorator_list)
          if why: skipped[name] = why
  return out, skipped


def check_commit(tinygrad):
  head = subprocess.run(["git", "-C", tinygrad, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
  if not head.startswith(COMMIT):
    raise SystemExit(f"{tinygrad} is at {head or '?'}; check out {COMMIT} (the commit gen_test_ops.py pins)")


def num(x):
  """A number as JSON: NaN and the infinities as the strings "nan", "inf", "-inf" (JSON has none)."""
  x = float(x) if not isinstance(x, (bool, int)) else x
  if isinstance(x, float) and not math.isfinite(x): return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
  return x


class Draws:
  """Random float32 inputs rounded to 3 decimals (short in JSON, read back exactly): numpy's
  `default_rng(seed)`, `randn(*shape)` and `rand(*shape)` as tinygrad's `Tensor.randn/rand`."""
  def __init__(self, seed):
    import numpy as np
    self.np, self.rng = np, np.random.default_rng(seed)

  def randn(self, *shape):
    return self.np.round(self.rng.standard_normal(shape), 3).astype(self.np.float32)

  def rand(self, *shape):
    return self.np.round(self.rng.random(shape), 3).astype(self.np.float32)


def f64(xs):
  """A list of float32 values as Python floats (what tinygrad's `.tolist()` gives)."""
  import numpy as np
  return [float(x) for x in np.asarray(xs, dtype=np.float32).reshape(-1)]


def arr(a):
  """A numpy array (or torch tensor) as JSON: its shape and its values as a flat list (see `num`)."""
  import numpy as np
  a = np.asarray(a)
  return {"shape": list(a.shape), "data": [num(x) if a.dtype.kind == "f" else x.item() for x in a.reshape(-1)]}


def dumps(doc):
  """The data as JSON with one method, exclusion or case's values per line (values compact)."""
  c = lambda v: json.dumps(v, separators=(",", ":"), allow_nan=False)
  def block(items, open_, close):
    return open_ + "\n" + ",\n".join(" " + it for it in items) + ("\n" if items else "") + close
  parts = [f"{c(k)}:{c(doc[k])}" for k in ("source", "commit")]
  parts.append('"methods":' + block([c(m) for m in doc["methods"]], "[", "]"))
  parts.append('"excluded":' + block([f"{c(k)}:{c(v)}" for k, v in doc["excluded"].items()], "{", "}"))
  parts.append('"values":' + block([f"{c(k)}:{c(v)}" for k, v in doc["values"].items()], "{", "}"))
  return "{\n" + ",\n".join(parts) + "\n}\n"


def write(stem, tinygrad, rel, excluded, values, replayed_skips=()):
  """Writes the data; methods tinygrad skips unconditionally are excluded with the skip's message,
  unless named in `replayed_skips` (replayed anyway)."""
  check_commit(tinygrad)
  names, skipped = methods(tinygrad, rel)
  excluded = dict(excluded)
  for name, why in skipped.items():
    if name not in replayed_skips and name not in values: excluded.setdefault(name, why)
  unknown = sorted((set(excluded) | set(values)) - set(names))
  if unknown: raise SystemExit(f"{rel}: not methods of the file: {unknown}")
  both = sorted(set(excluded) & set(values))
  if both: raise SystemExit(f"{rel}: both excluded and given values: {both}")
  doc = {"source": rel, "commit": COMMIT, "methods": names, "excluded": excluded, "values": values}
  path = os.path.join(HERE, f"{stem}.json")
  with open(path, "w") as f: f.write(dumps(doc))
  print(f"{rel}: {len(names)} methods, {len(excluded)} excluded, {len(names) - len(excluded)} to replay -> {path}")

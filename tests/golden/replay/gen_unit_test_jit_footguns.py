"""Inputs and expected values for the replay of tinygrad's `test/unit/test_jit_footguns.py`
(`crates/tensor/tests/replay_unit_test_jit_footguns.rs`), and the methods it does not replay
with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_unit_test_jit_footguns.py /tmp/tinygrad

(needs numpy; `/tmp/tinygrad` a checkout of tinygrad at the pinned commit).

The file documents what tinygrad's JIT silently does or refuses. Most expected values are
written in the tinygrad test itself (the Rust side uses those literals, the "should be X!"
value where ours gives the intuitive result). The inputs tinygrad draws with
`Tensor.randn`/`Tensor.rand` and compares with numpy are drawn here once with numpy (float32,
rounded to 3 decimals: the Rust side reads the same float32 values) and stored with the
expected values computed from them with numpy as the tinygrad test computes them.
"""
import sys
import numpy as np
from common import Draws, arr, write

EXCLUDED = {
  "TestJitFootguns.test_non_tensor_outputs_error":
    "a jitted function returning a non-tensor value (`mult * 10`, an int): the Rust function's "
    "return type is Vec<Tensor>, so the function cannot be written",
  "TestJitFootguns.test_positional_kwargs_cannot_mix":
    "Python keyword arguments to a jitted function (`f(a=.., b=..)` after positional calls): "
    "Jit::call takes a positional slice of tensors, there are no names to pass",
  "TestJitCorrectBehavior.test_kwargs_order_doesnt_matter":
    "Python keyword arguments to a jitted function in either order (`f(second=b, first=a)`): "
    "Jit::call takes a positional slice of tensors, there are no names to pass",
}

DRAWS = Draws(20262)
randn, rand = DRAWS.randn, DRAWS.rand


def inp(a):
  """A stored input: its float32 values, written with their 3 decimals (the Rust side reads them
  back as the same float32 values)."""
  short = np.round(a.astype(np.float64), 3)
  assert (short.astype(np.float32) == a).all()
  return arr(short)


def values():
  v = {}
  # a = Tensor.rand(3, 10): (a+1) padded is non-zero exactly where a's columns are kept
  v["TestJitFootguns.test_symbolic_pad_view_frozen"] = {"a": inp(rand(3, 10))}

  # base = Tensor.randn(10, 10); f(base[:, i:i+2]) = base[:, i:i+2] + 1 (ours gives the values)
  base = randn(10, 10)
  v["TestJitFootguns.test_views_with_different_offsets_fail"] = {
    "base": inp(base), "want": [arr(base[:, i:i + 2] + 1) for i in range(1, 5)]}

  # outer(Tensor([2])) = inner(t) * 3 = (t + 1) * 3 (ours replays it instead of a RuntimeError)
  t = np.array([2], dtype=np.int32)
  v["TestJitFootguns.test_nested_jit_fails_on_second_call"] = {"want_second": int(((t + 1) * 3)[0])}

  # a, b = Tensor.randn(10), Tensor.randn(10); assert_allclose(f(a, b), a.numpy() + b.numpy(), atol=1e-5)
  calls = []
  for _ in range(5):
    a, b = randn(10), randn(10)
    calls.append({"a": inp(a), "b": inp(b), "want": arr(a + b)})
  v["TestJitCorrectBehavior.test_unrealized_return_auto_realized"] = {"calls": calls}
  return v


if __name__ == "__main__":
  write("unit_test_jit_footguns", sys.argv[1], "test/unit/test_jit_footguns.py", EXCLUDED, values())

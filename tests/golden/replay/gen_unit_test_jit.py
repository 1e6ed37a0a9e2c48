"""Inputs and expected values for the replay of tinygrad's `test/unit/test_jit.py`
(`crates/tensor/tests/replay_unit_test_jit.rs`), and the methods it does not replay with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_unit_test_jit.py /tmp/tinygrad

(needs numpy; `/tmp/tinygrad` a checkout of tinygrad at the pinned commit).

tinygrad draws its inputs with `Tensor.randn`/`Tensor.rand` inside the test; here they are drawn
once with numpy (float32, rounded to 3 decimals to keep the file small: the Rust side reads the
same float32 values) and stored, and each expected value is computed from them with numpy exactly
as the tinygrad test computes it (`a.numpy()+b.numpy()`, `[x*2+y for x,y in zip(..)]`, ...).
The cases that compare a jitted run with tinygrad itself (random regeneration, `JIT=0` against
`JIT=1`, the gradient after a replay against one without the JIT) compute both sides in Rust, as
the tinygrad test does.
"""
import sys
import numpy as np
from common import Draws, arr, write, f64

EXCLUDED = {
  "TestJit.test_jitbeam_triggers_beam":
    "tests tinygrad's JITBEAM setting (BEAM search only for the kernels of a JIT capture) by patching "
    "`tinygrad.codegen.opt.search.beam_search` and `getenv` with unittest.mock: our Jit has no JITBEAM "
    "(BEAM is process-wide, `set_beam`) and Rust functions cannot be mocked",
  "TestJit.test_kwargs_jit":
    "Python keyword arguments to a jitted function (`add_kwargs(first=a, second=b)`, matched by name "
    "at replay): Jit::call takes a positional slice of tensors, there are no names to pass",
  "TestJit.test_jit_output_non_tensor_fail":
    "a jitted function returning a non-tensor value (`(t, i)` with an int): the Rust function's "
    "return type is Vec<Tensor>, so the function cannot be written",
}

DRAWS = Draws(20261)
randn, rand, rng = DRAWS.randn, DRAWS.rand, DRAWS.rng


def inp(a):
  """A stored input: its float32 values, written with their 3 decimals (the Rust side reads them
  back as the same float32 values)."""
  short = np.round(a.astype(np.float64), 3)
  assert (short.astype(np.float32) == a).all()
  return arr(short)


def simple_calls(n=10):
  """_simple_test: 5 x (randn(N,N), randn(N,N)), compared with a.numpy()+b.numpy()."""
  calls = []
  for _ in range(5):
    a, b = randn(n, n), randn(n, n)
    calls.append({"a": inp(a), "b": inp(b), "want": arr(a + b)})
  return calls


def values():
  v = {}
  v["TestJit.test_simple_jit_reset"] = {"calls": simple_calls(), "calls_20": simple_calls(20)}
  for name in ("test_simple_jit_norealize", "test_simple_jit_norealize_list", "test_simple_jit_norealize_dict",
               "test_array_jit"):
    v[f"TestJit.{name}"] = {"calls": simple_calls()}

  calls = []
  for _ in range(5):
    a, b = randn(10, 10), randn(10, 10)
    calls.append({"a": inp(a), "b": inp(b), "sum": arr(a + b), "diff": arr(a - b), "prod": arr(a * b)})
  v["TestJit.test_jit_multiple_outputs"] = {"calls": calls}

  v["TestJit.test_nothing_jitted"] = {"calls": [{"a": inp(randn(10, 10)), "b": inp(randn(10, 10))} for _ in range(5)]}
  # c.numpy() == 2*i
  v["TestJit.test_jit_zero_does_not_jit"] = {"want": [2 * i for i in range(5)]}
  v["TestJit.test_jit_not_capturing"] = {"want": [2 * i for i in range(5)]}

  v["TestJit.test_jit_shape_mismatch"] = {
    "calls": [{"a": inp(randn(10, 10)), "b": inp(randn(10, 10))} for _ in range(5)], "bad": inp(randn(20, 20))}

  # a = Tensor.randn(10, 10).realize()[:, i:i+2] for i in 1..4; (a+1)
  calls = []
  for i in range(1, 5):
    a = randn(10, 10)
    calls.append({"a": inp(a), "want": arr(a[:, i:i + 2] + 1)})
  v["TestJit.test_jit_shape_views_mismatch"] = {"calls": calls}

  a, b = randn(10, 10), randn(10, 10)
  v["TestJit.test_jit_duplicate_fail"] = {"a": inp(a), "want": arr(a + a), "b": inp(b)}

  fa = randn(10, 10)
  calls = []
  for _ in range(5):
    b = randn(10, 10)
    calls.append({"b": inp(b), "want": arr(fa + b)})
  v["TestJit.test_method_jit"] = {"a": inp(fa), "calls": calls}

  # (a+i).numpy() with a = Tensor([1, 2, 3]) (int32)
  v["TestJit.test_jit_size1_input"] = {"want": [(np.array([1, 2, 3], dtype=np.int32) + i).tolist() for i in range(5)]}

  for name in ("test_jit_random_regen", "test_jit_v_nojit_random_regen", "test_jit_multiple_random_regen"):
    v[f"TestJit.{name}"] = {"a": inp(randn(10, 10)), "b": inp(randn(10, 10))}

  # result_i = foo(Tensor([i] * 2)) with foo(x) = x.sum(): np.sum of each input
  v["TestJit.test_jit_buffer_behavior"] = {"want": [[int(np.sum(np.array([i] * 2, dtype=np.int32)))] for i in (1, 2, 3)]}

  v["TestJit.test_jit_lazy_grad_after_replay"] = {
    "weight": inp(np.round(rng.uniform(-1 / np.sqrt(27), 1 / np.sqrt(27), (4, 3, 3, 3)), 3).astype(np.float32)),
    "bias": inp(np.round(rng.uniform(-1 / np.sqrt(27), 1 / np.sqrt(27), (4,)), 3).astype(np.float32)),
    "x": inp(randn(4, 8, 8, 3)), "y": inp(randn(4, 4 * 8 * 8))}

  # [x*2+y for x,y in zip(weights.tolist(), a.tolist())]
  w = rand(16)
  calls = []
  for _ in range(6):
    a = rand(16)
    calls.append({"a": inp(a), "want": [x * 2 + y for x, y in zip(f64(w), f64(a))]})
  v["TestJitPrune.test_simple_prune"] = {"weights": inp(w), "calls": calls}

  # g(Tensor([1])) = (Tensor([1]) + 1) * 3
  v["TestJitInsideJit.test_jit_jit_error"] = {"want": int((np.array([1], dtype=np.int32) + 1)[0] * 3)}
  return v


if __name__ == "__main__":
  write("unit_test_jit", sys.argv[1], "test/unit/test_jit.py", EXCLUDED, values())

"""Inputs and expected values for the replay of tinygrad's `test/backend/test_jit.py`
(`crates/tensor/tests/replay_test_jit.rs`), and the methods it does not replay with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_test_jit.py /tmp/tinygrad

(needs numpy; `/tmp/tinygrad` a checkout of tinygrad at the pinned commit).

tinygrad draws its inputs with `Tensor.randn`/`Tensor.rand` inside the test; here they are drawn
once with numpy (float32, rounded to 3 decimals to keep the file small: the Rust side reads the
same float32 values) and stored, and each expected value is computed from them with numpy exactly
as the tinygrad test computes it (`a.numpy()+b.numpy()`, `[x+y for x,y in zip(..)]`, ...).
"""
import sys
import numpy as np
from common import Draws, arr, write, f64

EXCLUDED = {}

DRAWS = Draws(20260)
randn, rand = DRAWS.randn, DRAWS.rand


def values():
  v = {}

  # _simple_test (test/unit/test_jit.py): 5 x (randn(10,10), randn(10,10)), a.numpy()+b.numpy()
  calls = []
  for _ in range(5):
    a, b = randn(10, 10), randn(10, 10)
    calls.append({"a": arr(a), "b": arr(b), "want": arr(a + b)})
  v["TestJit.test_simple_jit"] = {"calls": calls}

  # x = Tensor.arange(10).float() + i*10; f(x) == x.numpy()[2:5] + 1
  v["TestJit.test_jit_input_view"] = {
    "want": [arr((np.arange(10).astype(np.float32) + i * 10)[2:5] + 1) for i in range(5)]}

  v["TestJit.test_global_counters_jit"] = {"a": arr(randn(64, 64)), "b": arr(randn(64, 64))}

  # c = f(b) == b.numpy()+[1,2,3]
  calls = []
  for _ in range(5):
    b = randn(3)
    calls.append({"b": arr(b), "want": arr(b + [1, 2, 3])})
  v["TestJit.test_jit_copyin"] = {"calls": calls}

  v["TestJit.test_jit_batch_split"] = {k: arr(randn(10, 10)) for k in "abcde"}

  v["TestJit.test_jitted_clone"] = {"a": [arr(randn(10, 10)) for _ in range(5)]}

  v["TestJit.test_jitted_transfers"] = {
    "calls": [{"a": arr(randn(10, 10)), "b": arr(randn(10, 10))} for _ in range(5)]}

  calls = []
  for _ in range(5):
    a, b = randn(10, 10), randn(10, 10)
    calls.append({"a": arr(a), "b": arr(b), "sum": arr(a + b), "prod": arr(a * b)})
  v["TestJit.test_jit_several_devs"] = {"calls": calls}

  # (a.numpy().sum(axis=(1,)) + 5).view(np.int32)
  calls = []
  for _ in range(5):
    a = randn(10, 1000)
    calls.append({"a": arr(a), "want": arr((a.sum(axis=(1,)) + 5).view(np.int32))})
  v["TestJit.test_jitted_view"] = {"calls": calls}

  # [x+y for x,y in zip(a.flatten().tolist(), b.flatten().tolist())]
  calls = []
  for _ in range(5):
    a, b = rand(16, 16), rand(16, 16)
    calls.append({"a": arr(a), "b": arr(b), "want": [x + y for x, y in zip(f64(a), f64(b))]})
  v["TestCopyInsideJit.test_copy_inside_jit"] = {"calls": calls}

  # [x*2+y for x,y in zip(weights.tolist(), a.tolist())]
  for name in ("test_prune_w_copy_correct", "test_prune_w_independent_copy_correct"):
    w = rand(16)
    calls = []
    for _ in range(6):
      a = rand(16)
      calls.append({"a": arr(a), "want": [x * 2 + y for x, y in zip(f64(w), f64(a))]})
    v[f"TestJitPrune.{name}"] = {"weights": arr(w), "calls": calls}

  for name in ("test_jit_split_simple", "test_jit_cpu_simple", "test_jit_cpu_several", "test_jit_multidev",
               "test_jit_multidev_xfer"):
    v[f"TestJitGraphSplit.{name}"] = {"inp": arr(randn(10, 10)), "inp_d1": arr(randn(10, 10))}
  v["TestJitGraphSplit.test_jit_split_simple"].pop("inp_d1")
  # tinygrad skips it unconditionally ("fails if you don't have SDMA": an AMD copy engine); it is
  # replayed here (values given, so `write` does not exclude it)
  v["TestJitGraphSplit.test_jit_multidev_copy"] = {"inp": arr(randn(10, 10))}
  return v


if __name__ == "__main__":
  write("test_jit", sys.argv[1], "test/backend/test_jit.py", EXCLUDED, values())

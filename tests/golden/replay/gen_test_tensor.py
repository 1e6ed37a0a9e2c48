"""Expected values for the replay of tinygrad's `test/backend/test_tensor.py`
(`crates/tensor/tests/replay_test_tensor.rs`), and the methods it does not replay with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_test_tensor.py /tmp/tinygrad

(needs numpy and torch; `/tmp/tinygrad` a checkout of tinygrad at the pinned commit).
"""
import math, sys
import numpy as np
import torch
from common import arr, num, write

DEVICELESS = ("a device-less constant (`Tensor(UOp.const(2.0).cast(dtypes.float))`, device None): every "
              "tensor here is made on a device, and UOps are built through tensors, not by hand")
EXCLUDED = {
  "TestTinygrad.test_deviceless_const_construct_device_repr": DEVICELESS + "; also checks the Python repr",
  "TestTinygrad.test_deviceless_const_realize_noop": DEVICELESS,
  "TestZeroShapeTensor.test_clone_deviceless_const": DEVICELESS,
  "TestZeroShapeTensor.test_numpy_deviceless_const": DEVICELESS,
  "TestZeroShapeTensor.test_clone_deviceless_const_to_cpu": DEVICELESS,
  "TestTinygrad.test_rand_rejects_unknown_kwargs": "Python's TypeError for an unknown keyword argument: a Rust call with an unknown argument does not compile",
  "TestTinygrad.test_randn_isnt_inf_on_zero": "monkeypatches `Tensor.rand` with `Tensor.zeros`: Rust functions cannot be replaced at run time",
  "TestTinygrad.test_tensor_ndarray_dtype": "numpy interop: `Tensor(np.ndarray)` has no Rust counterpart (no numpy)",
  "TestTinygrad.test_tensor_from_blob": "`Tensor.from_blob` wraps a raw host address; no safe Rust counterpart (docs/API.md: n/a)",
  "TestTinygrad.test_tensor_dtype_errors": "Python AttributeError for a dtype given as a string or tuple: a Rust dtype argument is a `DType`",
  "TestTinygrad.test_copy_from_disk": "needs tinygrad's DISK device, which this library does not have (safetensors/GGUF files are read with std::fs)",
  "TestTinygrad.test_no_bool": "Python truthiness (`if Tensor(3)`, `in`): Rust has no `__bool__`, a tensor in an `if` does not compile (docs/API.md: n/a)",
}

rng = np.random.RandomState(20261207)
def randn(*shape): return rng.randn(*shape).astype(np.float32)

def values():
  v = {}
  x_init, U_init, V_init, W_init, m_init, gradient = randn(1,3), randn(3,3), randn(3,3), randn(3,3), randn(1,3), randn(1,3)
  inputs = {"x": arr(x_init), "U": arr(U_init), "V": arr(V_init), "W": arr(W_init), "m": arr(m_init), "gradient": arr(gradient)}

  def fwd(x, W, m, vjp=None):
    out = torch.nn.functional.log_softmax(x.matmul(W).relu(), dim=1).mul(m).add(m)
    if vjp is None: out = out.sum(); out.backward()
    else: out.backward(vjp)
    return out.detach().numpy()
  x, W = torch.tensor(x_init, requires_grad=True), torch.tensor(W_init, requires_grad=True)
  out = fwd(x, W, torch.tensor(m_init))
  v["TestTinygrad.test_backward_pass"] = {**inputs, "out": arr(out), "x_grad": arr(x.grad), "W_grad": arr(W.grad)}
  v["TestTinygrad.test_accumulate_gradients"] = inputs
  x, W = torch.tensor(x_init, requires_grad=True), torch.tensor(W_init, requires_grad=True)
  out = fwd(x, W, torch.tensor(m_init), torch.tensor(gradient))
  v["TestTinygrad.test_backward_pass_vjp"] = {**inputs, "out": arr(out), "x_grad": arr(x.grad), "W_grad": arr(W.grad)}

  x_val = torch.tensor([2.0], requires_grad=True)
  first = torch.autograd.grad(outputs=x_val**3, inputs=x_val, create_graph=True)[0]
  second = torch.autograd.grad(outputs=first, inputs=x_val)[0]
  v["TestTinygrad.test_second_order_backward_pass"] = {"second": arr(second.numpy())}

  u, vv, w = (torch.tensor(a, requires_grad=True) for a in (U_init, V_init, W_init))
  xx, y = u.mul(vv).relu(), u.mul(w).relu()
  out = torch.nn.functional.log_softmax(xx.add(y).mul(y).relu(), dim=1).sum()
  out.backward()
  v["TestTinygrad.test_backward_pass_diamond_model"] = {**inputs, "out": arr(out.detach().numpy()), "u_grad": arr(u.grad), "v_grad": arr(vv.grad), "w_grad": arr(w.grad)}

  for name in ("test_const_backward_pass", "test_const_backward_pass_optimizer"):
    w1, w2 = torch.tensor(3.5, requires_grad=True), torch.tensor(3.5, requires_grad=True)
    w1.add(w2).backward()
    v[f"TestTinygrad.{name}"] = {"w1_grad": arr(w1.grad), "w2_grad": arr(w2.grad)}

  Wj = np.random.RandomState(42069).random((10, 5)).astype(np.float32)
  xj = np.random.RandomState(69420).random((1, 10)).astype(np.float32)
  tW = torch.tensor(Wj, requires_grad=True)
  PJ = torch.autograd.functional.jacobian(lambda t: torch.nn.functional.log_softmax(t.matmul(tW).relu(), dim=1), torch.tensor(xj, requires_grad=True)).squeeze().numpy()
  v["TestTinygrad.test_jacobian"] = {"W": arr(Wj), "x": arr(xj), "PJ": arr(PJ)}
  v["TestTinygrad.test_gradcheck"] = {"W": arr(np.random.RandomState(1337).random((10, 5)).astype(np.float32)),
                                      "x": arr(np.random.RandomState(7331).random((1, 10)).astype(np.float32))}

  for arr_ in ([1,2,3], [1.5,2,3], [[1,2,3], [4,5,6]], 3): assert torch.tensor(arr_).tolist() == arr_
  casts = {}
  for name, data in (("bools", [True, False]), ("ints", [-1, 0, 1, 2, 3]), ("floats", [-3.5, -2.5, -1.5, 0, 1.5, 2.5, 3.5])):
    for dt, tdt in (("int32", torch.int), ("uint8", torch.uint8), ("float32", torch.float)):
      if name == "floats" and dt == "uint8": continue  # (commented out in the tinygrad test: torch raises)
      casts[f"{name}/{dt}"] = arr(torch.tensor(data, dtype=tdt).numpy())
  v["TestTinygrad.test_tensor_list_implicit_cast"] = casts

  f16 = [math.nan, -math.inf, 65504, 65519, 65519.999, 65520, 65520.1]
  f16 = f16 + [-x for x in f16]
  ints = [1 << 33, 1 << 32, 1 << 32 - 1, 1]
  ints = ints + [-x for x in ints]
  with np.errstate(over="ignore"):
    v["TestTinygrad.test_tensor_list_special_values"] = {
      "f16_in": [num(x) for x in f16],
      "f16": arr(np.array(f16).astype(np.float16)), "ints_in": ints,
      "uint32": arr(np.array(ints).astype(np.uint32)), "int32": arr(np.array(ints).astype(np.int32))}
  return v

if __name__ == "__main__":
  write("test_tensor", sys.argv[1], "test/backend/test_tensor.py", EXCLUDED, values())

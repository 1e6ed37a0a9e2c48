"""The replay of tinygrad's `test/null/test_tensor.py` (tensor tests tinygrad runs on its NULL
device, no data read back) by `crates/tensor/tests/replay_null_test_tensor.rs`: the methods it
does not replay, with why. It needs no expected values (the file's assertions are about
gradients left unset, shapes, dtypes, devices and what raises).

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_null_test_tensor.py /tmp/tinygrad
"""
import sys
from common import write

IDX = ("inspects the dtype of the INDEX UOp in tinygrad's rendered program (`to_program(ast).src`), "
       "renderer internals this IR does not share; here index arithmetic is the 64-bit `index` dtype on "
       "the CPU, so there is no upcast to check")
EXCLUDED = {
  "TestIdxUpcast.test_overflow": IDX,
  "TestIdxUpcast.test_overflow_sym": IDX,
  "TestIdxUpcast.test_regular": IDX,
  "TestIdxUpcast.test_regular_sym": IDX,
  "TestIdxUpcast.test_symfold": IDX,
  "TestIdxUpcast.test_int64_unsupported_overflow_sym": IDX + " (and it runs only where int64 is unsupported)",
  "TestIdxUpcast.test_int64_unsupported_overflow": IDX + " (and it runs only where int64 is unsupported; an expected failure in tinygrad)",
  "TestTensorConstLike.test_full_like_device_on_multi_raises": "`full_like(device=...)`: `Tensor::full_like` takes no device (the copy is made on the tensor's devices)",
  "TestTensorUnique.test_times_2_not_unique": ("buffer identity of two tensors with the same graph (`a * 2` twice): "
    "tinygrad's hash-consed graph gives both one buffer; here each tensor is realized into its own (same values; "
    "docs/API.md lists this departure)"),
  "TestTensorShape.test_float_shape_raises": "a float shape (`Tensor.ones(2.0)`): a Rust shape is `&[usize]`, a float does not compile",
}

if __name__ == "__main__":
  write("null_test_tensor", sys.argv[1], "test/null/test_tensor.py", EXCLUDED, {})

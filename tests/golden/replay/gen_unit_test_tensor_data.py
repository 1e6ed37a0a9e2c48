"""The replay of tinygrad's `test/unit/test_tensor_data.py` (`Tensor(bytes)`, `Tensor.data()`,
`tolist`) by `crates/tensor/tests/replay_unit_test_tensor_data.rs`: the bytes `struct.pack`
makes for `test_float_bytes` (as the test makes them), and the methods it does not replay with
why. Every other expected value is written in the tinygrad test itself.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_unit_test_tensor_data.py /tmp/tinygrad
"""
import struct, sys
from common import write

EXCLUDED = {
  "TestTensorData.test_const_dtype_for_uop": (
    "a tensor whose value is a bound variable (`Tensor.const(UOp.variable('x', 1, 10).bind(5), dtypes.int32).item()`): "
    "variables here live only in the sizes of movement ops, not as tensor values (a BIND node has no tensor shape "
    "and is not scheduled); the method's other half, `Tensor.const(UOp.const(1.0).cast(dtypes.float32), dtypes.int8)`, "
    "is `Tensor::from_uop(..)` and works"),
}

def values():
  return {"TestTensorBytes.test_float_bytes": {"bytes": list(struct.pack("ff", 0.234, 0.8585))}}

if __name__ == "__main__":
  # test_data_float16 is skipped for Python < 3.12 (a memoryview of format "e"); its assertions
  # (the bytes of a float16 tensor: format, shape) do not depend on Python here: replayed
  write("unit_test_tensor_data", sys.argv[1], "test/unit/test_tensor_data.py", EXCLUDED, values(),
        replayed_skips=("TestTensorData.test_data_float16",))

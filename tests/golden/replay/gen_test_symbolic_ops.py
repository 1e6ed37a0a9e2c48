"""The replay of tinygrad's `test/backend/test_symbolic_ops.py`
(`crates/tensor/tests/replay_test_symbolic_ops.rs`): the methods it does not replay, with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_test_symbolic_ops.py /tmp/tinygrad

Every method of this file compares an op on a tensor with a symbolic size (a Variable bound to i)
with the same op at the concrete size i, on the same random inputs: the expected values are the
concrete computation, done on our API by the Rust case itself, as tinygrad's method does it. So
there are no stored values.
"""
import sys
from common import write

BITCAST = ("bitcast between item sizes (float32 to uint8/uint64, tinygrad rescales the last axis) "
           "has no counterpart: our bitcast takes a dtype of the same item size and panics otherwise")
EXCLUDED = {
  "TestSymbolicOps.test_bitcast_down": BITCAST,
  "TestSymbolicOps.test_bitcast_up": BITCAST,
}

def values():
  return {}

if __name__ == "__main__":
  write("test_symbolic_ops", sys.argv[1], "test/backend/test_symbolic_ops.py", EXCLUDED, values())

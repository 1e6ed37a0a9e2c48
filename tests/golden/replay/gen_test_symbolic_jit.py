"""The replay of tinygrad's `test/backend/test_symbolic_jit.py`
(`crates/tensor/tests/replay_test_symbolic_jit.rs`): the methods it does not replay, with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_test_symbolic_jit.py /tmp/tinygrad

Every method of this file compares a jitted function of tensors with a symbolic size (a Variable
bound to i) with the same function at the concrete size i, unjitted, on the same random inputs:
the expected values are the concrete computation, done on our API by the Rust case itself, as
tinygrad's method does it. So there are no stored values.
"""
import sys
from common import write

EXCLUDED = {}

def values():
  return {}

if __name__ == "__main__":
  write("test_symbolic_jit", sys.argv[1], "test/backend/test_symbolic_jit.py", EXCLUDED, values())

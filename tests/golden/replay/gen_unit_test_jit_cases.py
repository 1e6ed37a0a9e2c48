"""The method list of tinygrad's `test/unit/test_jit_cases.py` for its replay
(`crates/tensor/tests/replay_unit_test_jit_cases.rs`).

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_unit_test_jit_cases.py /tmp/tinygrad

(`/tmp/tinygrad` a checkout of tinygrad at the pinned commit). Every method is replayed and
every expected value is written in the tinygrad test itself (`i*2`), so nothing is stored.
"""
import sys
from common import write

if __name__ == "__main__":
  write("unit_test_jit_cases", sys.argv[1], "test/unit/test_jit_cases.py", {}, {})

"""Expected values for the replay of tinygrad's `test/backend/test_multitensor.py`
(`crates/tensor/tests/replay_test_multitensor.rs`), and the methods it does not replay with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_test_multitensor.py /tmp/tinygrad

(needs numpy; `/tmp/tinygrad` a checkout of tinygrad at the pinned commit).
"""
import random, sys
import numpy as np
from common import arr, write

JIT_MULTI = ("our Jit does not capture multi-device tensors: it refuses multi-device inputs and outputs "
             "with JitError::Unreplayable (docs/API.md, 'Multi-device tensors': not yet)")
TWO_D = ("2-D sharding over one DEVICE range split in two (UOp._shard(0, rng // 2)._shard(1, rng % 2).unshard) "
         "has no counterpart: our shard splits one axis over the devices, and the IR's DEVICE ranges are not exposed")

EXCLUDED = {
  "TestMultiTensor.test_shard_empty": "tinygrad marks it @unittest.expectedFailure (TODO: fix): its assertion, no kernel "
                                      "when Tensor.empty is sharded (assert_kernel_count(0)), fails in tinygrad itself",
  "TestMultiTensor.test_shard_no_recompile": "tinygrad marks it @unittest.expectedFailure; it tests tinygrad's internal "
                                             "linearized program (compile_linear/run_linear, PROGRAM uops), which this IR "
                                             "does not expose",
  "TestMultiTensor.test_shard_beam": "tests tinygrad's internal BEAM search on a LINEAR UOp (lower_and_compile, pm_beam, "
                                     "applied_opts), which this IR does not expose",
  "TestMultiTensor.test_allreduce_naive_jit": JIT_MULTI,
  "TestMultiTensor.test_allreduce_ring_jit": JIT_MULTI,
  "TestMultiTensor.test_multitensor_jit_input": JIT_MULTI,
  "TestMultiTensor.test_multitensor_inside_jit": JIT_MULTI + "; its output (x.shard(..)+1).sum() is replicated on both devices",
  "TestMultiTensor.test_assign_kv_cache_multi": JIT_MULTI,
  "TestMultiTensor.test_multi_tensor_jit_graph_assign_updates_each_shard": JIT_MULTI,
  "TestMultiTensor.test_data_parallel_resnet_train_step": "needs extra.models.resnet.ResNet18 (tinygrad's model zoo, not "
                                                          "part of our crate); tinygrad runs it only with RUN_SLOW (@slow)",
  "TestMultiTransformer.test_transformer": "needs extra.models.llama.Transformer (tinygrad's model zoo, not part of our "
                                          "tensor crate), whose decode steps after the first run through TinyJit with a "
                                          "bound Variable start_pos: " + JIT_MULTI,
  "Test2DShard.test_2d_shard_basic": TWO_D,
  "Test2DShard.test_2d_shard_elementwise": TWO_D,
  "Test2DShard.test_2d_shard_sum_all": TWO_D,
  "Test2DShard.test_2d_shard_sum_non_sharded_axis": TWO_D,
  "Test2DShard.test_2d_shard_matmul": TWO_D,
}


def simple_reduce():
  # hypothesis draws (devices, rop, shard_axis, reduce_axis) from these; the replay runs every one.
  # X = (Tensor.rand(N*N)-1).reshape(N, N): inputs drawn here, f(X.numpy()) in float32 as the test
  rng = np.random.default_rng(0)
  cases = []
  for ndev in (2, 3):
    for rop in ("ADD", "MUL", "MAX"):
      for shard_axis in (None, 0, 1):
        for reduce_axis in (None, 0, 1):
          N = 4 * ndev
          n = (rng.random(N * N, dtype=np.float32) - 1).reshape(N, N).astype(np.float32)
          f = {"ADD": lambda x: x.sum(reduce_axis), "MUL": lambda x: x.prod(reduce_axis), "MAX": lambda x: x.max(reduce_axis)}[rop]
          cases.append({"ndev": ndev, "rop": rop, "shard_axis": shard_axis, "reduce_axis": reduce_axis,
                        "x": arr(n), "want": arr(np.asarray(f(n), dtype=np.float32))})
  return {"cases": cases}


def fuzz_allreduce():
  # the shapes tinygrad's loop draws with random.seed(41) (the values are drawn by Tensor.rand in the test)
  random.seed(41)
  out = []
  for it in range(2):
    for n in range(2, 4 + 1):
      shape = tuple([(n if i == 0 else 1) * random.randint(1, 10) for i in range(random.randint(1, 4))])
      out.append({"it": it, "n": n, "shape": list(shape)})
  return {"shapes": out}


def values():
  return {"TestMultiTensor.test_simple_reduce": simple_reduce(),
          "TestMultiTensor.test_fuzz_allreduce": fuzz_allreduce()}


if __name__ == "__main__":
  write("test_multitensor", sys.argv[1], "test/backend/test_multitensor.py", EXCLUDED, values())

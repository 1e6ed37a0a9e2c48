"""Expected values for the replay of tinygrad's `test/unit/test_multitensor.py`
(`crates/tensor/tests/replay_unit_test_multitensor.rs`), and the methods it does not replay with why.

    PYTHONPATH=tests/golden/replay python3 tests/golden/replay/gen_unit_test_multitensor.py /tmp/tinygrad

(needs numpy; `/tmp/tinygrad` a checkout of tinygrad at the pinned commit).
"""
import sys
import numpy as np
from common import arr, write

JIT_MULTI = ("our Jit does not capture multi-device tensors: it refuses multi-device inputs and outputs "
             "with JitError::Unreplayable (docs/API.md, 'Multi-device tensors': not yet)")
EXCLUDED = {
  "TestMultiTensor.test_multitensor_jit_input_reduce_shard_axis": JIT_MULTI,
  "TestMultiTensor.test_multi_tensor_jit_param": JIT_MULTI,
  "TestMultiTensor.test_multi_tensor_jit_body": JIT_MULTI,
  "TestMultiTensor.test_multitensor_jit_in_list": JIT_MULTI,
  "TestMultiTensor.test_multitensor_jit_multiple_inputs": JIT_MULTI,
  "TestMultiTensor.test_multitensor_jit_different_sharding": JIT_MULTI,
  "TestMultiAssign.test_multi_assign_var_offset_jit": JIT_MULTI,
  "TestMultiAssign.test_multi_assign_var_offset_jit_none": JIT_MULTI,
  "TestMultiTensor.test_backprop_conv_wino": "Context(WINO=1), tinygrad's Winograd convolution rewrite, has no "
                                             "counterpart here (the rest is test_backprop_conv, replayed)",
  "TestMultiTensor.test_lr_scheduler_OneCycleLR": "needs extra.lr_scheduler.OneCycleLR (tinygrad's extra/, not part of "
                                                  "our crate), whose point is assigning the optimizer's lr tensor; our "
                                                  "optimizers' lr is an f64 (set_lr)",
  "TestMultiTensor.test_data_parallel_resnet": "needs extra.models.resnet.ResNet18 with pretrained weights (tinygrad's "
                                               "model zoo, downloaded); tinygrad runs it only with RUN_SLOW (@slow)",
  "TestMultiTensor.test_bn_ast_on_devices": "tests tinygrad's internal schedule (schedule_linear().src CALLs, their "
                                            "devices and shared ASTs), which this IR does not expose",
  "TestMultiTensor.test_rand_like_arg_device": "Python keyword argument device= of rand_like: the Rust signature "
                                               "(Tensor::rand_like(&t)) cannot be called that way",
  "TestMultiAssign.test_multi_assign_piece_unrealized": "tinygrad marks it @unittest.expectedFailure: its assertion "
                                                        "fails in tinygrad itself",
}


def values():
  rng = np.random.default_rng(0)
  B, T, vocab_size = 4, 10, 28
  # x = Tensor(np.random.randint(0, vocab_size, (B, T), dtype=np.int32)): drawn here
  emb = lambda: {"x": arr(rng.integers(0, vocab_size, (B, T), dtype=np.int32))}
  return {"TestMultiTensor.test_embedding": emb(),
          "TestMultiTensor.test_embedding_backward": emb(),
          "TestMultiTensor.test_embedding_backward_shard_weight": emb()}


if __name__ == "__main__":
  write("unit_test_multitensor", sys.argv[1], "test/unit/test_multitensor.py", EXCLUDED, values())

//! Realizing the same graph structure twice compiles nothing the second time. (Its own test
//! binary: the compile counter is process-wide, so no other test may compile concurrently.)

use tinygrad_tensor::{Tensor, compile_count};

fn graph(seed: f32) -> Tensor {
    let a = Tensor::from_slice(&[seed, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = Tensor::from_slice(&[1.0f32, seed, 3.0], &[3]);
    ((&a * &b).relu() + 1.0).sum(1isize)
}

#[test]
fn second_realize_of_same_structure_hits_the_kernel_cache() {
    let first = graph(1.0);
    let before = compile_count();
    // a*b = [[1,2,9],[4,5,18]], relu, +1, row sums
    assert_eq!(first.to_vec::<f32>(), vec![15.0, 30.0]);
    let compiled = compile_count() - before;
    assert!(compiled >= 1, "the first realize must compile its kernel");
    // new buffers and values, same structure
    let second = graph(7.0);
    let mid = compile_count();
    // a*b = [[7,14,9],[4,35,18]], +1, row sums
    assert_eq!(second.to_vec::<f32>(), vec![33.0, 60.0]);
    assert_eq!(
        compile_count(),
        mid,
        "same graph structure must not compile again"
    );
}

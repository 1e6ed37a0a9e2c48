//! ONNX's `Col2Im` (PyTorch's `fold`): the columns of sliding blocks, (N, C * prod(block), L),
//! summed back into an image (N, C, image...) — overlapping blocks add up.
//!
//! Tensor ops only: each kernel offset's (N, C, blocks...) slice is spread out by the strides
//! (zeros between), shifted to its offset by padding, and added; the image's pads are cropped
//! at the end.

use tinygrad_tensor::Tensor;

use crate::error::Result;
use crate::node::Node;

/// The node's outputs when `n.op` is `Col2Im`.
pub(super) fn run(n: &Node) -> Result<Option<Vec<Tensor>>> {
    if n.op != "Col2Im" {
        return Ok(None);
    }
    n.check_attrs(&["dilations", "pads", "strides"])?;
    let x = n.input(0)?;
    let image = positive(n, n.ints_input(1)?, "image_shape")?;
    let block = positive(n, n.ints_input(2)?, "block_shape")?;
    let k = image.len();
    let xs = x.shape();
    if k == 0 || block.len() != k || xs.len() != 3 {
        return Err(n.err(format!(
            "input {xs:?} must be (N, C * prod(block_shape), L), image_shape {image:?} and \
             block_shape {block:?} of one length >= 1"
        )));
    }
    let per_axis = |name: &str, len: usize, default: usize| -> Result<Vec<usize>> {
        match n.ints(name) {
            None => Ok(vec![default; len]),
            Some(v) if v.len() == len && v.iter().all(|&d| d >= 0) => {
                Ok(v.iter().map(|&d| d as usize).collect())
            }
            Some(v) => Err(n.err(format!("{name} {v:?}: expected {len} non-negative values"))),
        }
    };
    let dilations = per_axis("dilations", k, 1)?;
    let strides = per_axis("strides", k, 1)?;
    let pads = per_axis("pads", 2 * k, 0)?;
    if dilations.contains(&0) || strides.contains(&0) {
        return Err(n.err(format!(
            "dilations {dilations:?} and strides {strides:?} must be positive"
        )));
    }
    let kernel: usize = block.iter().product();
    let (batch, cols, length) = (xs[0], xs[1], xs[2]);
    // the padded image, and how many blocks fit along each axis
    let padded: Vec<usize> = (0..k).map(|a| image[a] + pads[a] + pads[a + k]).collect();
    let mut blocks = Vec::with_capacity(k);
    for a in 0..k {
        let span = dilations[a] * (block[a] - 1) + 1;
        if padded[a] < span {
            return Err(n.err(format!(
                "a block of {} (dilated {span}) does not fit axis {a}'s padded image of {}",
                block[a], padded[a]
            )));
        }
        blocks.push((padded[a] - span) / strides[a] + 1);
    }
    if !cols.is_multiple_of(kernel) || blocks.iter().product::<usize>() != length {
        return Err(n.err(format!(
            "input {xs:?}: dim 1 must be a multiple of prod(block_shape {block:?}) = {kernel} and \
             dim 2 the number of blocks {blocks:?} = {}",
            blocks.iter().product::<usize>()
        )));
    }
    let channels = cols / kernel;
    let mut grouped = vec![batch, channels, kernel];
    grouped.extend_from_slice(&blocks);
    let x = x.reshape(&grouped);
    let mut slice_shape = vec![batch, channels];
    slice_shape.extend_from_slice(&blocks);
    let mut acc: Option<Tensor> = None;
    for offset in 0..kernel {
        let mut bounds: Vec<(usize, usize)> = grouped.iter().map(|&d| (0, d)).collect();
        bounds[2] = (offset, offset + 1);
        let mut t = x.shrink(&bounds).reshape(&slice_shape);
        // this offset's position in the block, row-major
        let mut rest = offset;
        let mut at = vec![0usize; k];
        for a in (0..k).rev() {
            at[a] = rest % block[a];
            rest /= block[a];
        }
        for a in 0..k {
            t = spread(&t, 2 + a, strides[a]);
            let start = at[a] * dilations[a];
            let end = padded[a] - start - t.shape()[2 + a];
            let mut widths = vec![(0usize, 0usize); 2 + k];
            widths[2 + a] = (start, end);
            t = t.pad(&widths, 0.0);
        }
        acc = Some(match acc {
            Some(a) => a + t,
            None => t,
        });
    }
    let full = acc.expect("block_shape has at least one offset");
    let mut crop: Vec<(usize, usize)> = vec![(0, batch), (0, channels)];
    crop.extend((0..k).map(|a| (pads[a], pads[a] + image[a])));
    Ok(Some(vec![full.shrink(&crop)]))
}

/// A shape input's values, each at least 1.
fn positive(n: &Node, v: Option<Vec<i64>>, name: &str) -> Result<Vec<usize>> {
    match v {
        Some(v) if v.iter().all(|&d| d >= 1) => Ok(v.iter().map(|&d| d as usize).collect()),
        Some(v) => Err(n.err(format!("{name} {v:?}: every value must be at least 1"))),
        None => Err(n.err(format!("{name} is required"))),
    }
}

/// `t` with `stride - 1` zeros between consecutive elements along `axis`: length
/// `(len - 1) * stride + 1`.
fn spread(t: &Tensor, axis: usize, stride: usize) -> Tensor {
    if stride == 1 {
        return t.clone();
    }
    let shape = t.shape();
    let len = shape[axis];
    let mut widths = vec![(0usize, 0usize); shape.len() + 1];
    widths[axis + 1] = (0, stride - 1);
    let mut merged = shape.clone();
    merged[axis] = len * stride;
    let mut bounds: Vec<(usize, usize)> = merged.iter().map(|&d| (0, d)).collect();
    bounds[axis] = (0, (len - 1) * stride + 1);
    t.unsqueeze(axis as isize + 1)
        .pad(&widths, 0.0)
        .reshape(&merged)
        .shrink(&bounds)
}

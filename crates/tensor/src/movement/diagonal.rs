//! Diagonals: `diag`, `diagonal`, `diagonal_with`.

use super::resolve_axis;
use crate::Tensor;

impl Tensor {
    /// A square matrix with `self` (1-D) on its diagonal and zeros elsewhere — tinygrad's
    /// `diag`.
    ///
    /// # Panics
    /// If `self` is not 1-D.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3], &[3]);
    /// assert_eq!(t.diag().to_vec::<i32>(), vec![1, 0, 0, 0, 2, 0, 0, 0, 3]);
    /// ```
    pub fn diag(&self) -> Tensor {
        let shape = self.shape();
        assert!(
            shape.len() == 1,
            "diag: expects a 1-D tensor, got shape {shape:?}"
        );
        let n = shape[0];
        self.unsqueeze(-1)
            .pad(&[(0, 0), (0, n)], 0)
            .flatten(0, -1)
            .shrink(&[(0, n * n)])
            .reshape(&[n as isize, n as isize])
    }

    /// The main diagonal of a square 2-D tensor (1-D) — tinygrad's `diagonal`.
    ///
    /// # Panics
    /// If `self` is not a square 2-D tensor.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 9, 1).reshape(&[3, 3]);
    /// assert_eq!(t.diagonal().to_vec::<i32>(), vec![0, 4, 8]);
    /// ```
    pub fn diagonal(&self) -> Tensor {
        // kept as it was (2-D square only); diagonal_with(0, 0, 1) is the general form
        let shape = self.shape();
        assert!(
            shape.len() == 2 && shape[0] == shape[1],
            "diagonal: only 2-D square tensors are supported, got shape {shape:?}"
        );
        let n = shape[0];
        self.flatten(0, -1)
            .pad(&[(0, n)], 0)
            .reshape(&[n as isize, n as isize + 1])
            .shrink(&[(0, n), (0, 1)])
            .reshape(&[n as isize])
    }

    /// The diagonal of `dim1` and `dim2` (torch's and tinygrad's `diagonal(offset, dim1,
    /// dim2)`): those two axes are removed and the diagonal becomes the last axis. `offset > 0`
    /// takes a diagonal above the main one, `offset < 0` one below; any rank, non-square
    /// matrices and negative dims work. An offset past the edge gives an empty last axis.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 24, 1).reshape(&[2, 3, 4]);
    /// let d = t.diagonal_with(1, 0, 2);
    /// assert_eq!((d.shape(), d.to_vec::<i32>()), (vec![3, 2], vec![1, 14, 5, 18, 9, 22]));
    /// assert_eq!(t.diagonal_with(-1, -1, -2).to_vec::<i32>(), vec![1, 6, 11, 13, 18, 23]);
    /// ```
    ///
    /// # Panics
    /// If a dim is out of range or `dim1` and `dim2` are the same axis.
    pub fn diagonal_with(&self, offset: isize, dim1: isize, dim2: isize) -> Tensor {
        let shape = self.shape();
        let nd = shape.len();
        let (a, b) = (
            resolve_axis(dim1, nd, "diagonal", &shape),
            resolve_axis(dim2, nd, "diagonal", &shape),
        );
        assert!(
            nd >= 2 && a != b,
            "diagonal: dim1 {dim1} and dim2 {dim2} are the same dimension (or fewer than 2 \
             dims) for shape {shape:?}"
        );
        let mut order: Vec<isize> = (0..nd)
            .filter(|&i| i != a && i != b)
            .map(|i| i as isize)
            .collect();
        order.extend([a as isize, b as isize]);
        let x = self.permute(&order);
        let xs = x.shape();
        let (r, c) = (xs[nd - 2], xs[nd - 1]);
        let mut bounds: Vec<(usize, usize)> = xs.iter().map(|&d| (0, d)).collect();
        let off = offset.unsigned_abs();
        // shift the diagonal onto the main one: drop `offset` columns (or `-offset` rows)
        if offset >= 0 {
            bounds[nd - 1] = (off.min(c), c);
        } else {
            bounds[nd - 2] = (off.min(r), r);
        }
        let x = x.shrink(&bounds);
        let xs = x.shape();
        let n = xs[nd - 2].min(xs[nd - 1]);
        let batch: Vec<isize> = xs[..nd - 2].iter().map(|&d| d as isize).collect();
        if n == 0 {
            let mut out = batch;
            out.push(0);
            return x.reshape(&out);
        }
        // the n x n corner, flattened and padded to n x (n + 1): column 0 is the diagonal
        let mut corner: Vec<(usize, usize)> = xs[..nd - 2].iter().map(|&d| (0, d)).collect();
        corner.extend([(0, n), (0, n)]);
        let mut flat = batch.clone();
        flat.push((n * n) as isize);
        let mut pad = vec![(0usize, 0usize); nd - 1];
        pad[nd - 2] = (0, n);
        let mut grid = batch.clone();
        grid.extend([n as isize, n as isize + 1]);
        let mut first: Vec<(usize, usize)> = xs[..nd - 2].iter().map(|&d| (0, d)).collect();
        first.extend([(0, n), (0, 1)]);
        let mut out = batch;
        out.push(n as isize);
        x.shrink(&corner)
            .reshape(&flat)
            .pad(&pad, 0)
            .reshape(&grid)
            .shrink(&first)
            .reshape(&out)
    }
}

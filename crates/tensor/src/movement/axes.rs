//! Axis helpers: `transpose`, `t`, `flatten`, `unflatten`, `squeeze`, `unsqueeze`, `view`,
//! `reshape_opt`.

use super::resolve_axis;
use crate::Tensor;

impl Tensor {
    /// Swaps two axes.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]).transpose(0, 1);
    /// assert_eq!((t.shape(), t.to_vec::<i32>()), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
    /// ```
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Tensor {
        let shape = self.shape();
        let (a, b) = (
            resolve_axis(dim0, shape.len(), "transpose", &shape),
            resolve_axis(dim1, shape.len(), "transpose", &shape),
        );
        let mut order: Vec<isize> = (0..shape.len() as isize).collect();
        order.swap(a, b);
        self.permute(&order)
    }

    /// Matrix transpose of a 2-D tensor (`transpose(-2, -1)`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]).t();
    /// assert_eq!((t.shape(), t.to_vec::<i32>()), (vec![3, 2], vec![0, 3, 1, 4, 2, 5]));
    /// ```
    pub fn t(&self) -> Tensor {
        self.transpose(-2, -1)
    }

    /// Merges axes `start_dim..=end_dim` into one.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 8, 1).reshape(&[2, 2, 2]);
    /// assert_eq!(t.flatten(0, -1).to_vec::<i32>(), (0..8).collect::<Vec<i32>>());
    /// assert_eq!(t.flatten(1, -1).shape(), vec![2, 4]);
    /// ```
    pub fn flatten(&self, start_dim: isize, end_dim: isize) -> Tensor {
        let shape = self.shape();
        if shape.is_empty() {
            return self.reshape(&[1]);
        }
        let (s, e) = (
            resolve_axis(start_dim, shape.len(), "flatten", &shape),
            resolve_axis(end_dim, shape.len(), "flatten", &shape),
        );
        assert!(
            s <= e,
            "flatten: start_dim {start_dim} after end_dim {end_dim} for shape {shape:?}"
        );
        let mut new: Vec<isize> = shape[..s].iter().map(|&d| d as isize).collect();
        new.push(shape[s..=e].iter().product::<usize>() as isize);
        new.extend(shape[e + 1..].iter().map(|&d| d as isize));
        self.reshape(&new)
    }

    /// Splits axis `dim` into `sizes` (one may be -1).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::ones(&[3, 4, 1], DType::FLOAT32);
    /// assert_eq!(t.unflatten(1, &[2, 2]).shape(), vec![3, 2, 2, 1]);
    /// assert_eq!(t.unflatten(1, &[-1, 2]).shape(), vec![3, 2, 2, 1]);
    /// let u = Tensor::ones(&[5, 12, 3], DType::FLOAT32).unflatten(-2, &[2, 2, 3, 1, 1]);
    /// assert_eq!(u.shape(), vec![5, 2, 2, 3, 1, 1, 3]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range, more than one size is -1, a size is negative, or the sizes do
    /// not multiply to the size of `dim`.
    pub fn unflatten(&self, dim: isize, sizes: &[isize]) -> Tensor {
        let shape = self.shape();
        assert!(
            !shape.is_empty(),
            "unflatten: a 0-d tensor has no dim to unflatten into {sizes:?}"
        );
        let d = resolve_axis(dim, shape.len(), "unflatten", &shape);
        let n = shape[d];
        let inferred = sizes.iter().filter(|&&s| s == -1).count();
        let known: isize = sizes.iter().filter(|&&s| s != -1).product();
        // checked here so that the error names unflatten and the dim, not the reshape
        assert!(
            inferred <= 1 && sizes.iter().all(|&s| s >= -1),
            "unflatten: sizes {sizes:?} for dim {dim} (size {n}) of shape {shape:?}: at most one \
             -1 and no other negative size"
        );
        assert!(
            if inferred == 1 {
                known > 0 && (n as isize) % known == 0
            } else {
                known == n as isize
            },
            "unflatten: sizes {sizes:?} don't multiply to {n}, the size of dim {dim} of shape \
             {shape:?}"
        );
        let mut new: Vec<isize> = shape[..d].iter().map(|&x| x as isize).collect();
        new.extend(sizes.iter().map(|&s| {
            if s == -1 {
                shape[d] as isize / known.max(1)
            } else {
                s
            }
        }));
        new.extend(shape[d + 1..].iter().map(|&x| x as isize));
        self.reshape(&new)
    }

    /// Removes axis `dim` if it has size 1 (`None`: all size-1 axes).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::zeros(&[2, 1, 2, 1, 2], DType::FLOAT32);
    /// assert_eq!(t.squeeze(None).shape(), vec![2, 2, 2]);
    /// assert_eq!(t.squeeze(Some(0)).shape(), vec![2, 1, 2, 1, 2]);
    /// assert_eq!(t.squeeze(Some(1)).shape(), vec![2, 2, 1, 2]);
    /// ```
    ///
    /// # Panics
    /// If `dim` is out of range (a 0-d tensor has only dim 0 or -1, as in torch).
    pub fn squeeze(&self, dim: Option<isize>) -> Tensor {
        let shape = self.shape();
        let new: Vec<isize> = match dim {
            None => shape
                .iter()
                .filter(|&&d| d != 1)
                .map(|&d| d as isize)
                .collect(),
            Some(d) => {
                // checked first: squeezing a dim a 0-d tensor does not have is an error
                let a = resolve_axis(d, shape.len(), "squeeze", &shape);
                if shape.is_empty() {
                    return self.clone();
                }
                if shape[a] != 1 {
                    return self.clone();
                }
                shape
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != a)
                    .map(|(_, &d)| d as isize)
                    .collect()
            }
        };
        self.reshape(&new)
    }

    /// Inserts a size-1 axis at `dim` (negative counts from the end of the result).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[4]);
    /// assert_eq!(t.unsqueeze(0).shape(), vec![1, 4]);
    /// assert_eq!(t.unsqueeze(1).shape(), vec![4, 1]);
    /// assert_eq!(t.unsqueeze(-1).to_vec::<i32>(), vec![1, 2, 3, 4]);
    /// ```
    pub fn unsqueeze(&self, dim: isize) -> Tensor {
        let shape = self.shape();
        let d = resolve_axis(dim, shape.len() + 1, "unsqueeze", &shape);
        let mut new: Vec<isize> = shape.iter().map(|&x| x as isize).collect();
        new.insert(d, 1);
        self.reshape(&new)
    }

    /// Alias of [`Tensor::reshape`] (PyTorch's and tinygrad's `view`).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1);
    /// assert_eq!(t.view(&[3, -1]).shape(), vec![3, 2]);
    /// ```
    pub fn view(&self, shape: &[isize]) -> Tensor {
        self.reshape(shape)
    }

    /// [`Tensor::reshape`] with tinygrad's `None` entries: `None` keeps the size of the axis at
    /// that position (`-1` still infers one size).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 24, 1).reshape(&[2, 3, 4]);
    /// assert_eq!(t.reshape_opt(&[None, Some(-1)]).shape(), vec![2, 12]);
    /// assert_eq!(t.reshape_opt(&[None, None, Some(2), Some(2)]).shape(), vec![2, 3, 2, 2]);
    /// ```
    ///
    /// # Panics
    /// If a `None` is at a position the tensor has no axis for, or as [`Tensor::reshape`].
    pub fn reshape_opt(&self, shape: &[Option<isize>]) -> Tensor {
        let old = self.shape();
        let new: Vec<isize> = shape
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Some(s) => *s,
                None => *old.get(i).unwrap_or_else(|| {
                    panic!(
                        "reshape: None at position {i} of {shape:?} keeps an axis the shape \
                         {old:?} does not have"
                    )
                }) as isize,
            })
            .collect();
        self.reshape(&new)
    }
}

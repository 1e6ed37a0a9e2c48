//! Slicing and resizing: `slice`, `shrink_to`, `pad_to`.

use tinygrad_dtype::ConstValue;

use crate::Tensor;

impl Tensor {
    /// Basic slicing: for each leading axis a `(start, end, step)` range (negative indices count
    /// from the end, like Python; `step` must be positive).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 12, 1).reshape(&[3, 4]);
    /// // t[::2, 1::2] and t[-2:, :-1]
    /// assert_eq!(t.slice(&[(0, 3, 2), (1, 4, 2)]).to_vec::<i32>(), vec![1, 3, 9, 11]);
    /// assert_eq!(t.slice(&[(-2, 3, 1), (0, -1, 1)]).to_vec::<i32>(), vec![4, 5, 6, 8, 9, 10]);
    /// ```
    ///
    /// # Panics
    /// If a step is not positive or more ranges than axes are given.
    pub fn slice(&self, ranges: &[(isize, isize, usize)]) -> Tensor {
        let shape = self.shape();
        assert!(
            ranges.len() <= shape.len(),
            "slice: {} ranges for shape {shape:?}",
            ranges.len()
        );
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        let mut steps = vec![1usize; shape.len()];
        for (i, &(s, e, st)) in ranges.iter().enumerate() {
            assert!(
                st > 0,
                "slice: step must be positive, got {st} for axis {i}"
            );
            let n = shape[i] as isize;
            let clamp = |x: isize| (if x < 0 { x + n } else { x }).clamp(0, n) as usize;
            let (s, e) = (clamp(s), clamp(e));
            bounds[i] = (s, e.max(s));
            steps[i] = st;
        }
        let mut t = self.shrink(&bounds);
        if steps.iter().all(|&s| s == 1) {
            return t;
        }
        // strided: pad each axis to a multiple of its step, split it, keep the first of each group
        let sh = t.shape();
        let pads: Vec<(usize, usize)> = sh
            .iter()
            .zip(&steps)
            .map(|(&d, &s)| (0, d.div_ceil(s) * s - d))
            .collect();
        t = t.pad(&pads, 0.0);
        let mut split: Vec<isize> = Vec::new();
        for (&d, &s) in sh.iter().zip(&steps) {
            split.push(d.div_ceil(s) as isize);
            split.push(s as isize);
        }
        t = t.reshape(&split);
        let keep: Vec<(usize, usize)> = split
            .chunks(2)
            .flat_map(|c| [(0, c[0] as usize), (0, 1)])
            .collect();
        t = t.shrink(&keep);
        let out: Vec<isize> = split.iter().step_by(2).copied().collect();
        t.reshape(&out)
    }

    /// Shrinks each axis to the first `shape[i]` elements (`None` keeps an axis) — tinygrad's
    /// `shrink_to`.
    ///
    /// # Panics
    /// If `shape` has another length than the tensor's or asks to grow an axis.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::arange(0, 6, 1).reshape(&[2, 3]);
    /// assert_eq!(t.shrink_to(&[Some(1), None]).to_vec::<i32>(), vec![0, 1, 2]);
    /// ```
    pub fn shrink_to(&self, shape: &[Option<usize>]) -> Tensor {
        let cur = self.shape();
        assert!(
            shape.len() == cur.len(),
            "shrink_to: shape {shape:?} has {} axes, the tensor (shape {cur:?}) has {}",
            shape.len(),
            cur.len()
        );
        let bounds: Vec<(usize, usize)> = cur
            .iter()
            .zip(shape)
            .map(|(&c, s)| {
                let s = s.unwrap_or(c);
                assert!(
                    s <= c,
                    "shrink_to: can't grow axis of size {c} to {s} (shape {cur:?})"
                );
                (0, s)
            })
            .collect();
        self.shrink(&bounds)
    }

    /// Pads each axis with zeros at its end up to `shape[i]` (`None` keeps an axis) —
    /// tinygrad's `pad_to`.
    ///
    /// # Panics
    /// If `shape` has another length than the tensor's or asks to shrink an axis.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2], &[2]);
    /// assert_eq!(t.pad_to(&[Some(4)]).to_vec::<i32>(), vec![1, 2, 0, 0]);
    /// ```
    pub fn pad_to(&self, shape: &[Option<usize>]) -> Tensor {
        self.pad_to_with(shape, 0)
    }

    /// [`Tensor::pad_to`] filling with `value` (tinygrad's `pad_to(shape, value=...)`); a pad
    /// that changes nothing returns the tensor as it is, whatever the value.
    ///
    /// # Panics
    /// If `shape` has another length than the tensor's or asks to shrink an axis.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// let t = Tensor::new([[1, 2]]);
    /// assert_eq!(t.pad_to_with(&[Some(2), Some(3)], -1).to_vec::<i32>(), vec![1, 2, -1, -1, -1, -1]);
    /// ```
    pub fn pad_to_with(&self, shape: &[Option<usize>], value: impl Into<ConstValue>) -> Tensor {
        let cur = self.shape();
        assert!(
            shape.len() == cur.len(),
            "pad_to: shape {shape:?} has {} axes, the tensor (shape {cur:?}) has {}",
            shape.len(),
            cur.len()
        );
        let pads: Vec<(usize, usize)> = cur
            .iter()
            .zip(shape)
            .map(|(&c, s)| {
                let s = s.unwrap_or(c);
                assert!(
                    s >= c,
                    "pad_to: can't shrink axis of size {c} to {s} (shape {cur:?})"
                );
                (0, s - c)
            })
            .collect();
        if pads.iter().all(|&p| p == (0, 0)) {
            return self.clone();
        }
        self.pad(&pads, value)
    }
}

//! Matrix decompositions built from tensor ops, as tinygrad writes them: [`Tensor::qr`]
//! (Householder reflections) and [`Tensor::svd`] (one-sided Jacobi rotations on the QR's `R`).
//! Both work on the last two dims (any leading batch dims) and run on every device.

use crate::Tensor;
use crate::indexing::Idx;

/// `[1, ..., 1, a, b]` after the batch dims `batch`.
fn batch_shape(batch: &[usize], tail: &[usize]) -> Vec<usize> {
    batch.iter().chain(tail).copied().collect()
}

/// The Jacobi sweep's round-robin pairings (tinygrad's `permute`, computed on the host: the
/// schedule does not depend on the data): column `order[j]` pairs with `order[j + num/2]`.
fn round_robin(num: usize, rounds: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..num).collect();
    order[num / 2..].reverse();
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        out.push(order.clone());
        order = if num % 2 == 1 {
            order.iter().map(|&p| (p + num - 1) % num).collect()
        } else {
            std::iter::once(order[0])
                .chain(order[1..].iter().map(|&p| (p + num - 3) % (num - 1) + 1))
                .collect()
        };
    }
    out
}

impl Tensor {
    /// The QR decomposition of the last two dims, `(Q, R)` with `self = Q @ R`, `Q` orthogonal
    /// (`m x m`) and `R` upper triangular (`m x n`), by Householder reflections as tinygrad
    /// computes it (the diagonal of `R` has the opposite sign of the column's first element,
    /// as LAPACK's). Leading dims are batch dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[12.0f32, -51., 4., 6., 167., -68., -4., 24., -41.], &[3, 3]);
    /// let (q, r) = a.qr();
    /// let want_r = [-14.0f32, -21., 14., 0., -175., 70., 0., 0., 35.];
    /// for (x, y) in r.to_vec::<f32>().iter().zip(want_r) {
    ///     assert!((x - y).abs() < 1e-3, "{x} vs {y}");
    /// }
    /// let back = q.matmul(&r).to_vec::<f32>();
    /// for (x, y) in back.iter().zip(a.to_vec::<f32>()) {
    ///     assert!((x - y).abs() < 1e-3, "{x} vs {y}");
    /// }
    /// ```
    ///
    /// # Panics
    /// If the tensor has fewer than 2 dims or is not a float tensor.
    pub fn qr(&self) -> (Tensor, Tensor) {
        let shape = self.shape();
        let nd = shape.len();
        assert!(
            nd >= 2 && self.dtype().is_float(),
            "qr: expected a float tensor with two or more dims, got shape {shape:?} {}",
            self.dtype()
        );
        let (batch, m, n) = (&shape[..nd - 2], shape[nd - 2], shape[nd - 1]);
        let grad = crate::autograd::needs_grad(self);
        // fresh handles: setitem below replaces their values, not `self`'s
        let r = self.contiguous();
        let q = Tensor::eye_on(m, None, self.dtype(), self.device())
            .reshape_exact(&batch_shape(&vec![1; batch.len()], &[m, m]))
            .broadcast_to(&batch_shape(batch, &[m, m]))
            .contiguous();
        let one_one = batch_shape(batch, &[1, 1]);
        for i in 0..m.min(n) {
            let (i_, m_) = (i as isize, m as isize);
            let x = r.getitem(&[Idx::Ellipsis, Idx::range(i_, m_), Idx::Int(i_)]);
            let norm = x.square().sum(-1isize).sqrt();
            let x0 = x.getitem(&[Idx::Ellipsis, Idx::Int(0)]);
            let s = x0.ne(0.0).where_(x0.sign().neg(), -1.0);
            let u1 = x0.sub(s.mul(&norm));
            let nonzero = norm.ne(0.0);
            let w = x
                .unsqueeze(-1)
                .div(nonzero.where_(&u1, 1.0).reshape_exact(&one_one));
            w.setitem(&[Idx::Ellipsis, Idx::Int(0), Idx::Int(0)], 1.0);
            let tau = s.neg().mul(&u1).div(nonzero.where_(&norm, 1.0));
            let tau = nonzero.where_(tau, 0.0).reshape_exact(&one_one);
            let rows = [Idx::Ellipsis, Idx::range(i_, m_), Idx::all()];
            let r_sub = r.getitem(&rows);
            let wt = w.transpose(-2, -1);
            r.setitem(&rows, r_sub.sub(w.mul(&tau).matmul(&wt.matmul(&r_sub))));
            let cols = [Idx::Ellipsis, Idx::all(), Idx::range(i_, m_)];
            let q_sub = q.getitem(&cols);
            q.setitem(
                &cols,
                q_sub.sub(q_sub.matmul(&w).matmul(&tau.mul(&w).transpose(-2, -1))),
            );
            if !grad {
                // keeps the graph (and the kernels) one step deep
                Tensor::try_realize_all(&[&r, &q]).unwrap_or_else(|e| panic!("qr: {e}"));
            }
        }
        (q, r)
    }

    /// The singular value decomposition of the last two dims, `(U, S, Vh)` with
    /// `self = U @ diag(S) @ Vh` and `S` descending, as tinygrad computes it: a QR first, then
    /// one-sided Jacobi rotations on `R` (`num * log2(num) * 2 + 2` rounds of round-robin
    /// column pairs, `num = min(m, n)`). `full_matrices` gives `U` all `m` columns (else
    /// `min(m, n)`; for `m < n` it is `Vh` that is trimmed). Singular vectors are unique only up
    /// to sign. Leading dims are batch dims.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_slice(&[3.0f32, 2., 2., 2., 3., -2.], &[2, 3]);
    /// let (u, s, vh) = a.svd(false);
    /// assert_eq!((u.shape(), s.shape(), vh.shape()), (vec![2, 2], vec![2], vec![2, 3]));
    /// for (x, y) in s.to_vec::<f32>().iter().zip([5.0f32, 3.0]) {
    ///     assert!((x - y).abs() < 1e-4, "{x} vs {y}");
    /// }
    /// let back = u.mul(s.unsqueeze(-2)).matmul(&vh).to_vec::<f32>();
    /// for (x, y) in back.iter().zip(a.to_vec::<f32>()) {
    ///     assert!((x - y).abs() < 1e-4, "{x} vs {y}");
    /// }
    /// ```
    ///
    /// # Panics
    /// If the tensor has fewer than 2 dims or is not a float tensor.
    pub fn svd(&self, full_matrices: bool) -> (Tensor, Tensor, Tensor) {
        let shape = self.shape();
        let nd = shape.len();
        assert!(
            nd >= 2 && self.dtype().is_float(),
            "svd: expected a float tensor with two or more dims, got shape {shape:?} {}",
            self.dtype()
        );
        let (batch, m, n) = (&shape[..nd - 2], shape[nd - 2], shape[nd - 1]);
        let grad = crate::autograd::needs_grad(self);
        let (q, r) = if m >= n {
            self.qr()
        } else {
            self.transpose(-2, -1).qr()
        };
        let (num, q_num) = (m.min(n), m.max(n));
        let ones = vec![1; batch.len()];
        let mut bounds: Vec<(usize, usize)> = batch.iter().map(|&b| (0, b)).collect();
        bounds.extend([(0, num), (0, num)]);
        let mut u = r.shrink(&bounds).contiguous();
        let mut v = Tensor::eye_on(num, None, self.dtype(), self.device())
            .reshape_exact(&batch_shape(&ones, &[num, num]))
            .broadcast_to(&batch_shape(batch, &[num, num]))
            .contiguous();
        let rounds = if num < 2 {
            0
        } else {
            (num as f64 * (num as f64).log2() * 2.0 + 2.0) as usize
        };
        let half = num / 2;
        for order in round_robin(num, rounds) {
            let mut inverse = vec![0isize; num];
            for (j, &p) in order.iter().enumerate() {
                inverse[p] = j as isize;
            }
            let order: Vec<isize> = order.iter().map(|&p| p as isize).collect();
            let pick =
                |t: &Tensor, cols: &[isize]| t.getitem(&[Idx::Ellipsis, Idx::List(cols.to_vec())]);
            let rotate = |t: &Tensor, c: &Tensor, s: &Tensor| {
                let p = pick(t, &order);
                let (left, right) = (p.shrink_last(0, half), p.shrink_last(half, 2 * half));
                let new_left = c.mul(&left).sub(s.mul(&right));
                let new_right = s.mul(&left).add(c.mul(&right));
                let mut parts = vec![&new_left, &new_right];
                let runoff = p.shrink_last(2 * half, num);
                if num % 2 == 1 {
                    parts.push(&runoff);
                }
                pick(&Tensor::cat(&parts, -1), &inverse)
            };
            // the rotation of each pair that zeroes its columns' inner product
            let p = pick(&u, &order);
            let (left, right) = (p.shrink_last(0, half), p.shrink_last(half, 2 * half));
            let gamma = left.mul(&right).sum_keepdim(-2isize);
            let sq = p.square().sum_keepdim(-2isize);
            let (alpha, beta) = (sq.shrink_last(0, half), sq.shrink_last(half, 2 * half));
            let rot = gamma.ne(0.0);
            let tau = beta.sub(&alpha).div(rot.where_(&gamma, 1.0).mul(2.0));
            let t = tau
                .ne(0.0)
                .where_(tau.sign(), 1.0)
                .div(tau.abs().add(tau.square().add(1.0).sqrt()));
            let t = rot.where_(t, 0.0);
            let c = t.square().add(1.0).sqrt().reciprocal();
            let s = c.mul(&t);
            u = rotate(&u, &c, &s);
            v = rotate(&v, &c, &s);
            if !grad {
                Tensor::try_realize_all(&[&u, &v]).unwrap_or_else(|e| panic!("svd: {e}"));
            }
        }
        // singular values (column norms), descending; U's columns normalized
        let (s, indices) = u.square().sum(-2isize).sqrt().sort(-1, true);
        let gather_cols = indices
            .reshape_exact(&batch_shape(batch, &[1, num]))
            .broadcast_to(&batch_shape(batch, &[num, num]));
        let u = u
            .gather(-1, &gather_cols)
            .div(s.ne(0.0).where_(&s, 1.0).unsqueeze(-2));
        let v = v.gather(-1, &gather_cols);
        let padded = Tensor::eye_on(q_num, None, self.dtype(), self.device())
            .reshape_exact(&batch_shape(&ones, &[q_num, q_num]))
            .broadcast_to(&batch_shape(batch, &[q_num, q_num]))
            .contiguous();
        let num_ = num as isize;
        padded.setitem(
            &[Idx::Ellipsis, Idx::range(0, num_), Idx::range(0, num_)],
            u,
        );
        let mut u = q.matmul(&padded);
        let mut v = v;
        if !full_matrices {
            u = u.shrink_last(0, num);
            v = v.shrink_last(0, num);
        }
        if m >= n {
            (u, s, v.transpose(-2, -1))
        } else {
            (v, s, u.transpose(-2, -1))
        }
    }

    /// `self[..., start:end]`.
    fn shrink_last(&self, start: usize, end: usize) -> Tensor {
        let shape = self.shape();
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        if let Some(last) = bounds.last_mut() {
            *last = (start, end);
        }
        self.shrink(&bounds)
    }
}

//! Random tensor creation for weight initialization, as tinygrad's `Tensor.uniform`,
//! `kaiming_uniform`, `glorot_uniform`, ... — all built on [`Tensor::rand`] (the counter-based
//! Threefry generator of [`nn_ops`](crate::nn_ops)), so [`Tensor::manual_seed`] makes them
//! reproducible. The results are lazy; they are computed when first realized.

use tinygrad_dtype::{DType, default_float};
use tinygrad_runtime::default_device;

use crate::Tensor;

fn fan_in(shape: &[usize], op: &str) -> usize {
    assert!(
        !shape.is_empty(),
        "{op}: needs at least 1 dimension (fan-in is the product of the dims after the first), \
         got shape []"
    );
    shape[1..].iter().product::<usize>().max(1)
}

impl Tensor {
    /// Uniform random values in `[low, high)` of `shape`, default float dtype, on the default
    /// device (tinygrad's `Tensor.uniform`).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// Tensor::manual_seed(42);
    /// let t = Tensor::uniform(&[2, 3], -1.0, 2.0);
    /// assert_eq!((t.shape(), t.dtype()), (vec![2, 3], DType::FLOAT32));
    /// assert!(t.to_vec::<f32>().iter().all(|x| (-1.0..2.0).contains(x)));
    /// ```
    pub fn uniform(shape: &[usize], low: f64, high: f64) -> Tensor {
        Tensor::uniform_on(shape, low, high, default_float(), &default_device())
    }

    /// [`Tensor::uniform`] as `dtype` on `device`: `(high - low) * rand + low`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// Tensor::manual_seed(42);
    /// let t = Tensor::uniform_on(&[8], 5.0, 6.0, DType::FLOAT64, "REF");
    /// assert_eq!((t.dtype(), t.device()), (DType::FLOAT64, "REF"));
    /// assert!(t.to_vec::<f64>().iter().all(|x| (5.0..6.0).contains(x)));
    /// ```
    ///
    /// # Panics
    /// If `dtype` is not a float.
    pub fn uniform_on(shape: &[usize], low: f64, high: f64, dtype: DType, device: &str) -> Tensor {
        assert!(
            dtype.is_float(),
            "uniform: only float dtypes, got {dtype} (shape {shape:?})"
        );
        (Tensor::rand_on(shape, DType::FLOAT32, device) * (high - low)).cast(dtype) + low
    }

    /// Uniform in `[-1, 1) / sqrt(numel)` (tinygrad's `scaled_uniform`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42);
    /// let t = Tensor::scaled_uniform(&[4, 25]); // 100 elements: within [-0.1, 0.1)
    /// assert_eq!(t.shape(), vec![4, 25]);
    /// assert!(t.to_vec::<f32>().iter().all(|x| (-0.1..0.1).contains(x)));
    /// ```
    pub fn scaled_uniform(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::uniform(shape, -1.0, 1.0) * (n.max(1) as f64).powf(-0.5)
    }

    /// Glorot (Xavier) uniform: bound `sqrt(6 / (shape[0] + prod(shape[1..])))`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42);
    /// let t = Tensor::glorot_uniform(&[3, 5]);
    /// let bound = (6.0f32 / 8.0).sqrt();
    /// assert_eq!(t.shape(), vec![3, 5]);
    /// assert!(t.to_vec::<f32>().iter().all(|x| (-bound..bound).contains(x)));
    /// ```
    ///
    /// # Panics
    /// If `shape` is empty.
    pub fn glorot_uniform(shape: &[usize]) -> Tensor {
        let fan = fan_in(shape, "glorot_uniform") + shape[0];
        let bound = (6.0 / fan as f64).sqrt();
        Tensor::uniform(shape, -bound, bound)
    }

    /// Kaiming (He) uniform with leaky-relu slope `a` (PyTorch's `kaiming_uniform_`, fan-in
    /// mode): bound `sqrt(6 / (1 + a^2) / prod(shape[1..]))`. tinygrad's layers use
    /// `a = sqrt(5)`; its default is 0.01.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42);
    /// let t = Tensor::kaiming_uniform(&[4, 6], 5f64.sqrt());
    /// let bound = (6.0f32 / 6.0 / 6.0).sqrt(); // sqrt(6 / (1 + a^2) / fan_in)
    /// assert_eq!(t.shape(), vec![4, 6]);
    /// assert!(t.to_vec::<f32>().iter().all(|x| (-bound..bound).contains(x)));
    /// ```
    ///
    /// # Panics
    /// If `shape` is empty.
    pub fn kaiming_uniform(shape: &[usize], a: f64) -> Tensor {
        let bound = (6.0 / (1.0 + a * a) / fan_in(shape, "kaiming_uniform") as f64).sqrt();
        Tensor::uniform(shape, -bound, bound)
    }

    /// Standard normal values of `shape` (default float dtype), by the Box-Muller transform of
    /// two uniform draws (as tinygrad's `randn`).
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42);
    /// let v = Tensor::randn(&[2000]).to_vec::<f32>();
    /// let mean = v.iter().sum::<f32>() / 2000.0;
    /// let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / 2000.0).sqrt();
    /// assert!(mean.abs() < 0.1 && (std - 1.0).abs() < 0.1, "{mean} {std}");
    /// Tensor::manual_seed(42);
    /// assert_eq!(Tensor::randn(&[2000]).to_vec::<f32>(), v); // same seed, same values
    /// ```
    pub fn randn(shape: &[usize]) -> Tensor {
        Tensor::randn_on(shape, default_float(), &default_device())
    }

    /// [`Tensor::randn`] as `dtype` on `device`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// Tensor::manual_seed(42);
    /// let t = Tensor::randn_on(&[2, 3], DType::FLOAT64, "REF");
    /// assert_eq!((t.shape(), t.dtype(), t.device()), (vec![2, 3], DType::FLOAT64, "REF"));
    /// assert!(t.to_vec::<f64>().iter().all(|x| x.is_finite()));
    /// // any dtype, as tinygrad: the float32 values cast (an integer dtype truncates them)
    /// assert_eq!(Tensor::randn_on(&[3], DType::INT8, "CPU").dtype(), DType::INT8);
    /// ```
    pub fn randn_on(shape: &[usize], dtype: DType, device: &str) -> Tensor {
        let mut two = vec![2];
        two.extend(shape);
        let src = Tensor::rand_on(&two, DType::FLOAT32, device);
        let pick = |i: usize| {
            let mut b = vec![(i, i + 1)];
            b.extend(shape.iter().map(|&s| (0, s)));
            src.shrink(&b).reshape_exact(shape)
        };
        let (u0, u1) = (pick(0), pick(1));
        let radius = (u1.rsub(1.0).log() * -2.0).sqrt();
        ((u0 * (2.0 * std::f64::consts::PI)).cos() * radius).cast(dtype)
    }

    /// Normal values (mean 0, std 1) with the shape and device of `t` (its dtype if float,
    /// else the default float) — tinygrad's `randn_like`.
    ///
    /// ```
    /// # use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::zeros(&[1000], DType::INT32);
    /// let r = Tensor::randn_like(&t);
    /// assert_eq!((r.shape(), r.dtype()), (vec![1000], DType::FLOAT32));
    /// let mean = r.mean(tinygrad_tensor::Axis::All).item::<f32>();
    /// assert!(mean.abs() < 0.2, "{mean}");
    /// ```
    pub fn randn_like(t: &Tensor) -> Tensor {
        let dt = if t.dtype().is_float() {
            t.dtype()
        } else {
            default_float()
        };
        Tensor::randn_on(&t.shape(), dt, t.device())
    }

    /// Random integers uniform in `[low, high)` of an integer `dtype` — tinygrad's `randint`
    /// (`rand * (high - low)`, truncated, plus `low`), on the default device.
    ///
    /// # Panics
    /// If `dtype` is not an integer dtype or `low >= high`.
    ///
    /// ```
    /// # use tinygrad_tensor::{DType, Tensor};
    /// Tensor::manual_seed(42);
    /// let t = Tensor::randint(&[2, 3], 5, 10, DType::INT32).to_vec::<i32>();
    /// assert!(t.iter().all(|&v| (5..10).contains(&v)));
    /// ```
    pub fn randint(shape: &[usize], low: i64, high: i64, dtype: DType) -> Tensor {
        Tensor::randint_on(shape, low, high, dtype, &default_device())
    }

    /// [`Tensor::randint`] on `device`.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// Tensor::manual_seed(42);
    /// let t = Tensor::randint_on(&[100], -3, 3, DType::INT64, "REF");
    /// assert_eq!((t.dtype(), t.device()), (DType::INT64, "REF"));
    /// assert!(t.to_vec::<i64>().iter().all(|v| (-3..3).contains(v)));
    /// ```
    ///
    /// # Panics
    /// If `dtype` is not an integer dtype or `low >= high`.
    pub fn randint_on(shape: &[usize], low: i64, high: i64, dtype: DType, device: &str) -> Tensor {
        assert!(
            dtype.is_int(),
            "randint: dtype must be an integer dtype, got {dtype} (shape {shape:?})"
        );
        assert!(
            low < high,
            "randint: low ({low}) must be below high ({high})"
        );
        (Tensor::rand_on(shape, DType::FLOAT32, device) * (high - low) as f64).cast(dtype) + low
    }

    /// A random permutation of `0..n` (`int32`) — tinygrad's `randperm` (the argsort of `n`
    /// uniform numbers), on the default device.
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42);
    /// let mut p = Tensor::randperm(6).to_vec::<i32>();
    /// p.sort_unstable();
    /// assert_eq!(p, vec![0, 1, 2, 3, 4, 5]);
    /// ```
    pub fn randperm(n: usize) -> Tensor {
        Tensor::rand_on(&[n], default_float(), &default_device())
            .argsort(0, false)
            .cast(DType::INT32)
    }

    /// `num_samples` indices (`int32`) drawn from the categorical distributions whose
    /// (unnormalized, non-negative) weights are the last axis of `self` (1-D: one distribution;
    /// 2-D: one per row) — tinygrad's `multinomial`: inverse-CDF sampling of uniform numbers.
    ///
    /// # Panics
    /// If `self` is not 1-D or 2-D, `num_samples` is 0, or `replacement` is false with more than
    /// one sample (not supported, as in tinygrad).
    ///
    /// ```
    /// # use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42);
    /// let w = Tensor::from_slice(&[0.0f32, 1.0, 0.0, 3.0], &[4]);
    /// let s = w.multinomial(20, true).to_vec::<i32>();
    /// assert!(s.len() == 20 && s.iter().all(|&i| i == 1 || i == 3));
    /// ```
    pub fn multinomial(&self, num_samples: usize, replacement: bool) -> Tensor {
        let shape = self.shape();
        assert!(
            (1..=2).contains(&shape.len()) && num_samples > 0,
            "multinomial: expects 1-D or 2-D weights and num_samples > 0, got shape {shape:?} and \
             num_samples {num_samples}"
        );
        assert!(
            replacement || num_samples == 1,
            "multinomial: without replacement only num_samples = 1 is supported, got {num_samples}"
        );
        let weight = if shape.len() == 1 {
            self.unsqueeze(0)
        } else {
            self.clone()
        };
        let (rows, k) = (weight.shape()[0], weight.shape()[1]);
        let cw = weight.cumsum(1).cast(DType::FLOAT32);
        let total = cw.shrink(&[(0, rows), (k - 1, k)]);
        let cdf = &cw / &total;
        let unif = Tensor::rand_on(&[num_samples, rows, 1], DType::FLOAT32, self.device());
        let indices = unif
            .expand(&[num_samples as isize, rows as isize, k as isize])
            .ge(&cdf.unsqueeze(0))
            .sum(2isize)
            .permute(&[1, 0]);
        let out = if shape.len() == 1 {
            indices.squeeze(Some(0))
        } else {
            indices
        };
        out.cast(DType::INT32)
    }

    /// Normal values with mean `mean` and standard deviation `std`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42);
    /// let v = Tensor::normal(&[2000], 3.0, 0.5).to_vec::<f32>();
    /// let mean = v.iter().sum::<f32>() / 2000.0;
    /// let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / 2000.0).sqrt();
    /// assert!((mean - 3.0).abs() < 0.05 && (std - 0.5).abs() < 0.05, "{mean} {std}");
    /// ```
    pub fn normal(shape: &[usize], mean: f64, std: f64) -> Tensor {
        Tensor::randn(shape) * std + mean
    }

    /// Kaiming (He) normal with leaky-relu slope `a`: standard deviation
    /// `sqrt(2 / (1 + a^2) / prod(shape[1..]))`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42);
    /// let v = Tensor::kaiming_normal(&[100, 50], 0.0).to_vec::<f32>(); // std sqrt(2 / 50) = 0.2
    /// let std = (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt();
    /// assert!((std - 0.2).abs() < 0.02, "{std}");
    /// ```
    ///
    /// # Panics
    /// If `shape` is empty.
    pub fn kaiming_normal(shape: &[usize], a: f64) -> Tensor {
        let std = (2.0 / (1.0 + a * a) / fan_in(shape, "kaiming_normal") as f64).sqrt();
        Tensor::normal(shape, 0.0, std)
    }
}

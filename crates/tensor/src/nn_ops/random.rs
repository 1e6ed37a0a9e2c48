//! Random numbers: `manual_seed`, `rand` (Threefry-2x32, described in the module doc of
//! [`nn_ops`](super)), `threefry2x32`, `dropout`.

use tinygrad_dtype::{ConstValue, DType, default_float};

use crate::Tensor;
use crate::random::THREEFRY_ROT;

/// [`Tensor::rand`] values of `dtype` with the shape and device(s) of `t`, sharded as `t` is.
fn rand_like_as(t: &Tensor, dtype: DType) -> Tensor {
    if crate::multi::is_multi(t.device()) {
        return crate::multi::multi_like(t, |shape, d| Tensor::rand_on(shape, dtype, d));
    }
    Tensor::rand_on(&t.shape(), dtype, t.device())
}

fn rotl32(x: &Tensor, r: u32) -> Tensor {
    x.lshift(r).bitwise_or(x.rshift(32 - r))
}

impl Tensor {
    /// Sets the seed of [`Tensor::rand`] (and so every random op) and forgets each device's
    /// key and counter, as tinygrad's `manual_seed`: the same seed gives the same sequence of
    /// random tensors — tinygrad's numbers (the layout is described in `src/random.rs`). The
    /// initial seed is 0.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// Tensor::manual_seed(42); // tinygrad's docstring example: Tensor.rand(2, 3)
    /// let want = [0.38104248f32, 0.0097754, 0.11280072, 0.117699504, 0.5053618, 0.37211025];
    /// assert_eq!(Tensor::rand(&[2, 3]).to_vec::<f32>(), want);
    /// Tensor::manual_seed(42);
    /// let (a, b) = (Tensor::rand(&[5]).to_vec::<f32>(), Tensor::rand(&[5]).to_vec::<f32>());
    /// assert_ne!(a, b); // each call draws new values
    /// Tensor::manual_seed(42); // reset to the same seed: the same sequence again
    /// assert_eq!(Tensor::rand(&[5]).to_vec::<f32>(), a);
    /// assert_eq!(Tensor::rand(&[5]).to_vec::<f32>(), b);
    /// ```
    pub fn manual_seed(seed: u64) {
        crate::random::set_seed(seed);
    }

    /// Uniform random values in `[0, 1)` of `shape`, default float dtype, on the default device.
    /// See the [module docs](crate::nn_ops) for the generator.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// Tensor::manual_seed(42);
    /// let t = Tensor::rand(&[2, 3]);
    /// assert_eq!((t.shape(), t.dtype()), (vec![2, 3], DType::FLOAT32));
    /// assert!(t.to_vec::<f32>().iter().all(|x| (0.0..1.0).contains(x)));
    /// ```
    pub fn rand(shape: &[usize]) -> Tensor {
        Tensor::rand_on(shape, default_float(), &tinygrad_runtime::default_device())
    }

    /// Uniform random values in `[0, 1)` with the shape and device of `t` (its dtype if float,
    /// else the default float). For a sharded `t`, sharded alike: each device draws its own
    /// shard (a replicated `t` gets one draw, replicated), as tinygrad's.
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let r = Tensor::rand_like(&Tensor::ones(&[2, 3], DType::INT32));
    /// assert_eq!((r.shape(), r.dtype()), (vec![2, 3], DType::FLOAT32));
    /// assert!(r.to_vec::<f32>().iter().all(|x| (0.0..1.0).contains(x)));
    /// let r = Tensor::rand_like(&Tensor::ones(&[4], DType::FLOAT64));
    /// assert!(r.to_vec::<f64>().iter().all(|x| (0.0..1.0).contains(x)));
    /// ```
    pub fn rand_like(t: &Tensor) -> Tensor {
        let dt = if t.dtype().is_float() {
            t.dtype()
        } else {
            default_float()
        };
        rand_like_as(t, dt)
    }

    /// [`Tensor::rand`] with a float `dtype` on `device`: the random bits fill the mantissa of a
    /// number in `[1, 2)`, minus 1 (as tinygrad).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// Tensor::manual_seed(7);
    /// let a = Tensor::rand_on(&[8], DType::FLOAT64, "CPU");
    /// assert_eq!((a.dtype(), a.device()), (DType::FLOAT64, "CPU"));
    /// assert!(a.to_vec::<f64>().iter().all(|x| (0.0..1.0).contains(x)));
    /// Tensor::manual_seed(7); // the same seed gives the same values on another device
    /// let b = Tensor::rand_on(&[8], DType::FLOAT64, "REF");
    /// assert_eq!(a.to_vec::<f64>(), b.to_vec::<f64>());
    /// ```
    ///
    /// # Panics
    /// If `dtype` is not a float, `device` names several devices, or a draw of more than
    /// 2^32 - 1 random words (16 GiB) is made inside a [`Jit`](crate::Jit) capture.
    pub fn rand_on(shape: &[usize], dtype: DType, device: &str) -> Tensor {
        assert!(dtype.is_float(), "rand: only float dtypes, got {dtype}");
        assert!(
            !crate::multi::is_multi(device),
            "rand: only a single device, got {device} (as tinygrad: use rand_like of a sharded \
             tensor, or shard the result)"
        );
        let numel: usize = shape.iter().product();
        if numel == 0 {
            return Tensor::zeros_on(shape, dtype, device);
        }
        // tinygrad's layout (see `random`): `num` 32-bit words; a draw of more than
        // 2^32 - 1 words is cut into chunks of that many, each with its own key
        let num = (numel * dtype.itemsize()).div_ceil(4);
        let words = if (num as u64) < u64::from(u32::MAX) {
            let (k0, k1) = crate::random::call_key(device, num as u64);
            // the key from a buffer, not constants: every call of a shape is the same kernel
            let key = Tensor::from_slice_on(&[k0, k1], &[2], device);
            // a JIT replay derives the next call's key instead of reusing this upload
            crate::jit::note_rand_key(&key, device, num as u64);
            Tensor::threefry_words(num, &key, device)
        } else {
            assert!(
                !crate::jit::capturing(),
                "rand: shape {shape:?} {dtype} draws {num} random words, more than 2^32 - 1: \
                 such a draw inside a Jit capture is not supported"
            );
            let chunk = u32::MAX as usize;
            let parts: Vec<Tensor> = crate::random::chunk_keys(device, num as u64)
                .into_iter()
                .enumerate()
                .map(|(i, (k0, k1))| {
                    let n = chunk.min(num - i * chunk);
                    let key = Tensor::from_slice_on(&[k0, k1], &[2], device);
                    Tensor::threefry_words(n, &key, device)
                })
                .collect();
            Tensor::cat(&parts.iter().collect::<Vec<_>>(), 0)
        };
        // the words' bytes as `itemsize`-byte unsigned integers (little-endian)
        let (uint, bits) = match dtype.itemsize() {
            4 => (DType::UINT32, words),
            8 => (
                DType::UINT64,
                words
                    .reshape_exact(&[num / 2, 2])
                    .cast(DType::UINT64)
                    .lshift(Tensor::from_slice_on(&[0u64, 32], &[2], device))
                    .sum(-1isize)
                    .cast(DType::UINT64),
            ),
            size => {
                let (uint, per) = if size == 2 {
                    (DType::UINT16, 2)
                } else {
                    (DType::UINT8, 4)
                };
                let shifts: Vec<u32> = (0..per).map(|i| (i * 32 / per) as u32).collect();
                let mask = (1u32 << (32 / per)) - 1;
                let parts = words
                    .reshape_exact(&[num, 1])
                    .rshift(Tensor::from_slice_on(&shifts, &[per], device))
                    .bitwise_and(mask)
                    .cast(uint)
                    .reshape_exact(&[num * per]);
                (uint, parts)
            }
        };
        let (_, nmant) = dtype.finfo().expect("a float dtype");
        let one = Tensor::full_on(&[1], 1i64, dtype, device).bitcast(uint);
        let shift = ConstValue::UInt(u64::from(dtype.bitsize() - nmant));
        let m = bits.rshift(shift).bitwise_or(&one);
        // (`num` words hold at least `numel` values)
        (m.bitcast(dtype).shrink(&[(0, numel)]) - 1).reshape_exact(shape)
    }

    /// `num` random 32-bit words of one key (`key`: its two `uint32` words), in tinygrad's
    /// layout: the low words of `threefry(key, (i, i + half))` for `i < half`, then the high
    /// words. Word `w` is word 0 of counter `(w, w + half)` for `w < half`, else word 1 of
    /// counter `(w - half, w)`: one threefry per word, no concatenation (whose gated halves
    /// would compute both and keep the kernel from vectorizing).
    fn threefry_words(num: usize, key: &Tensor, device: &str) -> Tensor {
        let half = num.div_ceil(2);
        let w = Tensor::nn_ramp(num, DType::UINT32, device);
        let high = w.ge(half as u32);
        let c0 = w.sub(high.cast(DType::UINT32).mul(half as u32));
        let c1 = c0.add(half as u32);
        let (k0, k1) = (key.shrink(&[(0, 1)]), key.shrink(&[(1, 2)]));
        let (x0, x1) = Tensor::threefry2x32(&c0, &c1, &k0, &k1);
        high.where_(&x1, &x0)
    }

    /// Threefry-2x32 with 20 rounds (Random123's `threefry2x32`): the two output words for
    /// counter `(c0, c1)` and key `(k0, k1)`, all `uint32` tensors (broadcast together). Pure
    /// integer ops, so it runs inside any kernel.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// // Random123's known-answer tests
    /// let (z, m) = (Tensor::from_slice(&[0u32], &[1]), Tensor::from_slice(&[u32::MAX], &[1]));
    /// let (x0, x1) = Tensor::threefry2x32(&z, &z, &z, &z);
    /// assert_eq!((x0.item::<u32>(), x1.item::<u32>()), (0x6b20_0159, 0x99ba_4efe));
    /// let (x0, x1) = Tensor::threefry2x32(&m, &m, &m, &m);
    /// assert_eq!((x0.item::<u32>(), x1.item::<u32>()), (0x1cb9_96fc, 0xbb00_2be7));
    /// ```
    ///
    /// # Panics
    /// If an input is not `uint32`.
    pub fn threefry2x32(c0: &Tensor, c1: &Tensor, k0: &Tensor, k1: &Tensor) -> (Tensor, Tensor) {
        for t in [c0, c1, k0, k1] {
            assert_eq!(
                t.dtype(),
                DType::UINT32,
                "threefry2x32: inputs must be uint32, got {} (shape {:?})",
                t.dtype(),
                t.shape()
            );
        }
        let ks = [
            k0.clone(),
            k1.clone(),
            k0.bitwise_xor(k1).bitwise_xor(0x1BD1_1BDAu32),
        ];
        let mut x0 = c0.add(&ks[0]);
        let mut x1 = c1.add(&ks[1]);
        for r in 0..20 {
            x0 = x0.add(&x1);
            x1 = rotl32(&x1, THREEFRY_ROT[r % 8]).bitwise_xor(&x0);
            if r % 4 == 3 {
                let j = (r + 1) / 4;
                x0 = x0.add(&ks[j % 3]);
                x1 = x1.add(&ks[(j + 1) % 3]).add(j as u32);
            }
        }
        (x0, x1)
    }

    /// Dropout: in training mode ([`Tensor::train`]) zeroes each element with probability `p`
    /// and scales the rest by `1 / (1 - p)`, using [`Tensor::rand`]; otherwise returns `self`
    /// (as tinygrad).
    ///
    /// ```
    /// use tinygrad_tensor::{DType, Tensor};
    /// let t = Tensor::ones(&[2, 4], DType::FLOAT32);
    /// assert_eq!(t.dropout(0.5).to_vec::<f32>(), vec![1.0; 8]); // not training: unchanged
    /// let _train = Tensor::train(true);
    /// Tensor::manual_seed(42);
    /// let v = t.dropout(0.5).to_vec::<f32>();
    /// assert!(v.iter().all(|&x| x == 0.0 || x == 2.0)); // dropped, or scaled by 1 / (1 - p)
    /// Tensor::manual_seed(42);
    /// assert_eq!(t.dropout(0.5).to_vec::<f32>(), v);
    /// ```
    ///
    /// # Panics
    /// If `p` is not in `[0, 1]`; in training mode with `p > 0`, if a size is symbolic (a
    /// bound `Variable`: the random mask needs concrete sizes, as tinygrad's `ValueError`).
    pub fn dropout(&self, p: f64) -> Tensor {
        assert!(
            (0.0..=1.0).contains(&p),
            "dropout: p={p} is out of range [0, 1]"
        );
        if !Tensor::training() || p == 0.0 {
            return self.clone();
        }
        let sym = self.sym_shape();
        assert!(
            !sym.iter().any(tinygrad_uop::SInt::is_symbolic),
            "dropout: the random mask needs a concrete shape, got the symbolic shape [{}]",
            sym.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        if p == 1.0 {
            return Tensor::zeros_like(self);
        }
        let keep = rand_like_as(self, default_float()).ge(p);
        keep.where_(self, 0) / (1.0 - p)
    }
}

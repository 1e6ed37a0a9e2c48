//! [`Tensor::keccak`] (SHA-3 and SHAKE over the last dim) and [`Tensor::hash`] (tinygrad's
//! 16-byte content hash: a tree of SHAKE-128 over 1 MiB chunks), built from tensor ops as
//! tinygrad builds them — so they run on every device.
//!
//! The Keccak-f\[1600\] state is a `(batch, 25)` `uint64` tensor (lane `x + 5 y`); each round is
//! θ (column parities), ρ and π (a lane permutation and per-lane rotations, as shifts), χ and ι
//! (the round constant), and the state is realized after every round: the χ step reads each lane
//! three times, so 24 fused rounds would recompute the state exponentially often.

use tinygrad_dtype::DType;

use crate::Tensor;

/// π: the lane each position takes (tinygrad's `reorder_indexes`).
const PI_SOURCE: [isize; 25] = [
    0, 6, 12, 18, 24, 3, 9, 10, 16, 22, 1, 7, 13, 19, 20, 4, 5, 11, 17, 23, 2, 8, 14, 15, 21,
];

/// ρ: the left rotation of each position after π.
const RHO: [u64; 25] = [
    0, 44, 43, 21, 14, 28, 20, 3, 45, 61, 1, 6, 25, 8, 18, 27, 36, 10, 15, 56, 62, 55, 39, 41, 2,
];

/// ι: the round constants.
const ROUND_CONSTANTS: [u64; 24] = [
    0x0000_0000_0000_0001,
    0x0000_0000_0000_8082,
    0x8000_0000_0000_808a,
    0x8000_0000_8000_8000,
    0x0000_0000_0000_808b,
    0x0000_0000_8000_0001,
    0x8000_0000_8000_8081,
    0x8000_0000_0000_8009,
    0x0000_0000_0000_008a,
    0x0000_0000_0000_0088,
    0x0000_0000_8000_8009,
    0x0000_0000_8000_000a,
    0x0000_0000_8000_808b,
    0x8000_0000_0000_008b,
    0x8000_0000_0000_8089,
    0x8000_0000_0000_8003,
    0x8000_0000_0000_8002,
    0x8000_0000_0000_0080,
    0x0000_0000_0000_800a,
    0x8000_0000_8000_000a,
    0x8000_0000_8000_8081,
    0x8000_0000_0000_8080,
    0x0000_0000_8000_0001,
    0x8000_0000_8000_8008,
];

/// 1 MiB: the chunk [`Tensor::hash`] hashes at each level of its tree.
const CHUNK: usize = 1 << 20;

impl Tensor {
    /// The Keccak hash of the last dim (its bytes, little-endian for wider dtypes), one digest
    /// per row of the leading dims (tinygrad's `keccak`): `cfg` is `"sha3_224"`, `"sha3_256"`
    /// (tinygrad's default) or `"shake_128"` (a 16-byte output). The result is `uint8`, shape
    /// `(*leading, digest_bytes)`.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(b"Hello World!".to_vec());
    /// let digest = t.keccak("sha3_256").to_vec::<u8>();
    /// let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    /// assert_eq!(hex, "d0e47486bbf4c16acac26f8b653592973c1362909f90262877089f9c8a4536af");
    /// ```
    ///
    /// # Panics
    /// On an unknown `cfg`, or where [`Tensor::keccak_with`] panics.
    pub fn keccak(&self, cfg: &str) -> Tensor {
        let (rate, dsbyte) = match cfg {
            "sha3_224" => (144, 6),
            "sha3_256" => (136, 6),
            "shake_128" => (168, 31),
            other => panic!(
                "keccak: unknown cfg {other:?} (tensor shape {:?}): expected \"sha3_224\", \
                 \"sha3_256\" or \"shake_128\"",
                self.shape()
            ),
        };
        self.keccak_with(rate, dsbyte)
    }

    /// [`Tensor::keccak`] with an explicit sponge: `rate` bytes absorbed per block (a multiple
    /// of 8, below 200) and the domain-separation byte `dsbyte` (6 for SHA-3, 31 for SHAKE).
    /// The digest is `(200 - rate) / 2` bytes.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let t = Tensor::from_vec(b"abc".to_vec());
    /// // sha3_256 is rate 136, dsbyte 6
    /// assert_eq!(t.keccak_with(136, 6).to_vec::<u8>(), t.keccak("sha3_256").to_vec::<u8>());
    /// ```
    ///
    /// # Panics
    /// If the tensor is 0-d, or `rate` is 0, not below 200 or not a multiple of 8.
    pub fn keccak_with(&self, rate: usize, dsbyte: u8) -> Tensor {
        let shape = self.shape();
        assert!(
            !shape.is_empty(),
            "keccak: needs at least one dim (it hashes the last one), got a 0-d tensor"
        );
        assert!(
            rate > 0 && rate < 200 && rate.is_multiple_of(8),
            "keccak: rate {rate} must be a multiple of 8 in 8..=192 (tensor shape {shape:?})"
        );
        let dev = self.device().to_string();
        let bytes = self.le_bytes();
        let n = *bytes.shape().last().expect("a last dim");
        let rows: usize = shape[..shape.len() - 1].iter().product();
        // pad each message to whole blocks, each block to the 200-byte state
        let pad = rate - n % rate;
        let blocks = (n + pad) / rate;
        let data = bytes
            .reshape_exact(&[rows, n])
            .pad(&[(0, 0), (0, pad)], 0)
            .reshape_exact(&[rows, blocks, rate])
            .pad(&[(0, 0), (0, 0), (0, 200 - rate)], 0)
            .reshape_exact(&[rows, blocks * 200]);
        // the padding bits: dsbyte after the message, 0x80 at the end of the last block's rate
        let mut mask = vec![0u8; blocks * 200];
        let first = (blocks - 1) * 200 + rate - pad;
        mask[first] ^= dsbyte;
        mask[first + pad - 1] ^= 0x80;
        let data = data.bitwise_xor(Tensor::from_slice_on(&mask, &[1, blocks * 200], &dev));
        // bytes to little-endian lanes
        let shifts: Vec<u64> = (0..8).map(|i| 8 * i).collect();
        let lanes = data
            .reshape_exact(&[rows, blocks, 25, 8])
            .cast(DType::UINT64)
            .lshift(Tensor::from_slice_on(&shifts, &[8], &dev))
            .sum(-1isize)
            .cast(DType::UINT64);
        let lanes = lanes.contiguous();
        let rho = Tensor::from_slice_on(&RHO, &[25], &dev);
        // the right shift that completes each rotation; 0 for the unrotated lane (x | x = x)
        let rho_right: Vec<u64> = RHO.iter().map(|&r| (64 - r) % 64).collect();
        let rho_right = Tensor::from_slice_on(&rho_right, &[25], &dev);
        let mut state = Tensor::zeros_on(&[rows, 25], DType::UINT64, &dev);
        for k in 0..blocks {
            let block = lanes.shrink(&[(0, rows), (k, k + 1), (0, 25)]);
            state = state.bitwise_xor(block.reshape_exact(&[rows, 25]));
            for (round, &rc) in ROUND_CONSTANTS.iter().enumerate() {
                let mut iota = [0u64; 25];
                iota[0] = rc;
                state = keccak_round(&state, rows, &rho, &rho_right, &iota, &dev);
                state.try_realize().unwrap_or_else(|e| {
                    panic!("keccak: block {k} round {round} of shape {shape:?}: {e}")
                });
            }
        }
        // lanes back to bytes; the digest is the first (200 - rate) / 2
        let out = (200 - rate) / 2;
        let bytes = state
            .reshape_exact(&[rows, 25, 1])
            .rshift(Tensor::from_slice_on(&shifts, &[1, 1, 8], &dev))
            .bitwise_and(0xffu64)
            .cast(DType::UINT8)
            .reshape_exact(&[rows, 200])
            .shrink(&[(0, rows), (0, out)]);
        let mut out_shape = shape[..shape.len() - 1].to_vec();
        out_shape.push(out);
        bytes.reshape_exact(&out_shape)
    }

    /// A 16-byte (`uint8`) hash of the tensor's bytes (tinygrad's `hash`): the data, zero-padded
    /// to whole MiB chunks, is hashed chunk by chunk (SHAKE-128 of each 4 KiB block, then of
    /// the block digests), and the chunk digests likewise, level by level, until one remains.
    /// Equal contents (and sizes within the padding) give equal hashes.
    ///
    /// ```
    /// use tinygrad_tensor::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0]);
    /// let h = a.hash();
    /// assert_eq!((h.shape(), h.dtype()), (vec![16], tinygrad_tensor::DType::UINT8));
    /// let same = Tensor::from_vec(vec![1.0f32, 2.0, 3.0]).hash();
    /// let other = Tensor::from_vec(vec![1.0f32, 2.0, 4.0]).hash();
    /// assert_eq!(h.to_vec::<u8>(), same.to_vec::<u8>());
    /// assert_ne!(h.to_vec::<u8>(), other.to_vec::<u8>());
    /// ```
    pub fn hash(&self) -> Tensor {
        let flat = self.reshape_exact(&[self.numel()]);
        let mut data = flat.le_bytes();
        let pad_to_chunks = |d: Tensor| {
            let n = d.shape()[0];
            if !n.is_multiple_of(CHUNK) {
                d.pad(&[(0, CHUNK - n % CHUNK)], 0)
            } else {
                d
            }
        };
        data = pad_to_chunks(data);
        let base = data.shape()[0] / CHUNK;
        // tinygrad: ceil(log_65536(base)) further levels
        let mut depth = 0;
        while base > 1 && 65536usize.pow(depth) < base {
            depth += 1;
        }
        for _ in 0..=depth {
            let chunks = data.shape()[0] / CHUNK;
            data = pad_to_chunks(
                data.reshape_exact(&[chunks, CHUNK])
                    .hash_1mb()
                    .reshape_exact(&[chunks * 16]),
            );
        }
        data.shrink(&[(0, 16)])
    }

    /// tinygrad's `_hash_1mb`: SHAKE-128 of each 4 KiB block of each MiB row, then of the row's
    /// 256 block digests. `(rows, 2^20)` uint8 -> `(rows, 16)`.
    fn hash_1mb(&self) -> Tensor {
        let rows = self.shape()[0];
        let blocks = rows * CHUNK / 4096;
        self.reshape_exact(&[blocks, 4096])
            .keccak("shake_128")
            .reshape_exact(&[rows, 4096])
            .keccak("shake_128")
            .reshape_exact(&[rows, 16])
    }

    /// The bytes of each element along a new last dim merged into it: `(..., n)` of a `k`-byte
    /// dtype -> `(..., n * k)` `uint8`, little-endian (the memory layout).
    fn le_bytes(&self) -> Tensor {
        let dt = self.dtype();
        let size = dt.itemsize();
        let unsigned = match size {
            1 => DType::UINT8,
            2 => DType::UINT16,
            4 => DType::UINT32,
            8 => DType::UINT64,
            _ => panic!("keccak: no byte view of dtype {dt}"),
        };
        let x = if dt.is_bool() {
            self.cast(DType::UINT8)
        } else {
            self.bitcast(unsigned)
        };
        if size == 1 {
            return x;
        }
        let mut shape = x.shape();
        let last = shape.pop().expect("a last dim");
        let shifts: Vec<u64> = (0..size as u64).map(|i| 8 * i).collect();
        let mut split = shape.clone();
        split.extend([last, 1]);
        let mut out = shape;
        out.push(last * size);
        x.reshape_exact(&split)
            .rshift(Tensor::from_slice_on(&shifts, &[size], self.device()).cast(unsigned))
            .bitwise_and(0xffu64)
            .cast(DType::UINT8)
            .reshape_exact(&out)
    }
}

/// One round of Keccak-f\[1600\] on `(rows, 25)` lanes.
fn keccak_round(
    state: &Tensor,
    rows: usize,
    rho: &Tensor,
    rho_right: &Tensor,
    iota: &[u64; 25],
    dev: &str,
) -> Tensor {
    let rotl1 = |t: &Tensor| t.lshift(1u64).bitwise_or(t.rshift(63u64));
    // θ: each lane ^= parity(column x - 1) ^ rotl(parity(column x + 1), 1)
    let grid = state.reshape_exact(&[rows, 5, 5]); // [row, y, x]
    let mut parity = grid.shrink(&[(0, rows), (0, 1), (0, 5)]);
    for y in 1..5 {
        parity = parity.bitwise_xor(grid.shrink(&[(0, rows), (y, y + 1), (0, 5)]));
    }
    let d = parity
        .roll(&[1], &[2])
        .bitwise_xor(rotl1(&parity.roll(&[-1], &[2])));
    let state = grid.bitwise_xor(d).reshape_exact(&[rows, 25]);
    // ρ and π
    let state = state.getitem(&[crate::Idx::all(), crate::Idx::List(PI_SOURCE.to_vec())]);
    let state = state.lshift(rho).bitwise_or(state.rshift(rho_right));
    // χ: a ^= !b & c along each row of 5
    let grid = state.reshape_exact(&[rows, 5, 5]);
    let chi = grid.bitwise_xor(
        grid.roll(&[-1], &[2])
            .bitwise_not()
            .bitwise_and(grid.roll(&[-2], &[2])),
    );
    // ι
    chi.reshape_exact(&[rows, 25])
        .bitwise_xor(Tensor::from_slice_on(iota, &[25], dev))
}

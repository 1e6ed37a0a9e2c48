//! The random-number state behind [`Tensor::rand`], laid out as tinygrad's so that the same seed
//! gives tinygrad's numbers.
//!
//! tinygrad keeps, per device (in the order devices are first used after `manual_seed`), a key
//! `[low 32 bits of sha256(device index as 4 big-endian bytes), seed]` and a 64-bit counter of
//! the random words drawn. A call drawing `num` words derives a key for the call,
//! `threefry(key, counter)`, and then draws words `threefry(call_key, (i, i + ceil(num / 2)))`
//! for `i < ceil(num / 2)`, the low words first, then the high ones. The per-device key and the
//! call key are computed here on the host (they are scalars); the words are a kernel.

use std::sync::Mutex;

/// Threefry-2x32 rotation constants.
pub(crate) const THREEFRY_ROT: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];

struct RngState {
    seed: u64,
    /// `(device, words drawn)`, in the order of first use since the seed was set.
    devices: Vec<(String, u64)>,
}

static RNG: Mutex<RngState> = Mutex::new(RngState {
    seed: 0,
    devices: Vec::new(),
});

fn state() -> std::sync::MutexGuard<'static, RngState> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// The whole random state (seed, keys and counters), for the JIT's `JIT_CHECK` to run a step
/// twice from the same state.
pub(crate) struct RngSnapshot {
    seed: u64,
    devices: Vec<(String, u64)>,
}

/// The current random state.
pub(crate) fn snapshot() -> RngSnapshot {
    let s = state();
    RngSnapshot {
        seed: s.seed,
        devices: s.devices.clone(),
    }
}

/// Puts back a state from [`snapshot`].
pub(crate) fn restore(snap: RngSnapshot) {
    let mut s = state();
    s.seed = snap.seed;
    s.devices = snap.devices;
}

/// Sets the seed and forgets every device's key and counter (tinygrad's `manual_seed`).
pub(crate) fn set_seed(seed: u64) {
    let mut s = state();
    s.seed = seed;
    s.devices.clear();
}

/// The key `(k0, k1)` for a call on `device` that draws `num` 32-bit words, advancing the
/// device's counter by `num`.
pub(crate) fn call_key(device: &str, num: u64) -> (u32, u32) {
    let (counter, k0, k1) = advance(device, num);
    threefry2x32(counter as u32, (counter >> 32) as u32, k0, k1)
}

/// The keys of a draw of `num` words on `device` cut into chunks of `2^32 - 1` words (as
/// tinygrad's `random_bits`): chunk `c` starts at word `i = c * (2^32 - 1)` and its key is
/// `threefry(device key, counter + i)` (a 64-bit counter). Advances the counter by `num`.
pub(crate) fn chunk_keys(device: &str, num: u64) -> Vec<(u32, u32)> {
    let (counter, k0, k1) = advance(device, num);
    (0..num)
        .step_by(u32::MAX as usize)
        .map(|i| {
            let c = counter.wrapping_add(i);
            threefry2x32(c as u32, (c >> 32) as u32, k0, k1)
        })
        .collect()
}

/// The device's counter before a draw of `num` words and its key `(k0, k1)`, advancing the
/// counter by `num`.
fn advance(device: &str, num: u64) -> (u64, u32, u32) {
    let mut s = state();
    let seed = s.seed;
    let index = match s.devices.iter().position(|(d, _)| d == device) {
        Some(i) => i,
        None => {
            s.devices.push((device.to_string(), 0));
            s.devices.len() - 1
        }
    };
    let counter = s.devices[index].1;
    s.devices[index].1 = counter.wrapping_add(num);
    let digest = sha256(&(index as u32).to_be_bytes());
    // the digest read as one big-endian integer, truncated to uint32: its last 4 bytes
    let k0 = u32::from_be_bytes([digest[28], digest[29], digest[30], digest[31]]);
    let k1 = seed as u32;
    (counter, k0, k1)
}

/// Threefry-2x32 with 20 rounds (Random123) on scalars.
pub(crate) fn threefry2x32(c0: u32, c1: u32, k0: u32, k1: u32) -> (u32, u32) {
    let ks = [k0, k1, k0 ^ k1 ^ 0x1BD1_1BDA];
    let (mut x0, mut x1) = (c0.wrapping_add(ks[0]), c1.wrapping_add(ks[1]));
    for r in 0..20 {
        x0 = x0.wrapping_add(x1);
        x1 = x1.rotate_left(THREEFRY_ROT[r % 8]) ^ x0;
        if r % 4 == 3 {
            let j = (r + 1) / 4;
            x0 = x0.wrapping_add(ks[j % 3]);
            x1 = x1.wrapping_add(ks[(j + 1) % 3]).wrapping_add(j as u32);
        }
    }
    (x0, x1)
}

/// SHA-256 (FIPS 180-4) of a short message: only the per-device keys use it.
fn sha256(msg: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut data = msg.to_vec();
    data.push(0x80);
    while data.len() % 64 != 56 {
        data.push(0);
    }
    data.extend_from_slice(&((msg.len() as u64) * 8).to_be_bytes());
    for block in data.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_known_answers() {
        let hex = |d: [u8; 32]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(
            hex(sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // python3 -c "import hashlib; print(hashlib.sha256((0).to_bytes(4, 'big')).hexdigest())"
        assert_eq!(
            hex(sha256(&0u32.to_be_bytes())),
            "df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b81119"
        );
    }

    #[test]
    fn threefry_known_answers() {
        assert_eq!(threefry2x32(0, 0, 0, 0), (0x6b20_0159, 0x99ba_4efe));
        assert_eq!(
            threefry2x32(u32::MAX, u32::MAX, u32::MAX, u32::MAX),
            (0x1cb9_96fc, 0xbb00_2be7)
        );
    }
}

//! The x86 tiles of the integer products: up to 8 rows of `a` x a 32-column panel with AVX-512
//! VNNI (`vpdpbusd`: four `u8 x i8` products summed into each int32 lane), up to 4 rows x a
//! 16-column panel with AVX2 (`vpmaddwd`: two `i16 x i16` products per lane). The tile sums
//! stay in registers over the whole `k` and are stored once.

use std::arch::x86_64::*;

use super::Layout;

/// The most rows of `a` a tile of `layout` takes.
pub(super) fn tile_rows(layout: Layout) -> usize {
    match layout {
        Layout::Vnni => 8,
        _ => 4,
    }
}

/// The dot products of `r` rows of the prepared `a` (`a_rows`, `row_bytes` each) with one
/// packed panel, into `dots[..r][..panel columns]`.
///
/// # Panics
/// If `layout` does not run on this CPU, `r` is 0 or above [`tile_rows`], `a_rows` is shorter
/// than `r` rows, or `panel` and the rows disagree on `k`.
pub(super) fn tile(
    layout: Layout,
    a_rows: &[u8],
    row_bytes: usize,
    panel: &[u8],
    r: usize,
    dots: &mut [[i32; 32]; 8],
) {
    // each int32 word of a row of `a` meets one step of the panel: 32 columns x 4 bytes
    // (VNNI), or 16 columns x 2 int16 (AVX2)
    let step_bytes = if layout == Layout::Vnni { 128 } else { 64 };
    let steps = row_bytes / 4;
    assert!(
        layout != Layout::Portable
            && layout.runs_here()
            && (1..=tile_rows(layout)).contains(&r)
            && a_rows.len() >= r * row_bytes
            && row_bytes.is_multiple_of(4)
            && panel.len() == steps * step_bytes,
        "int8 tile: {r} rows of {row_bytes} bytes ({} given) against a panel of {} bytes in \
         {layout:?}",
        a_rows.len(),
        panel.len()
    );
    match layout {
        Layout::Vnni => {
            macro_rules! vnni {
                ($($r:literal)*) => {
                    match r {
                        // SAFETY: the assert above: the CPU has avx512f/bw/vnni (`runs_here`),
                        // each of the r rows holds `steps` words and the panel `steps` steps.
                        $($r => unsafe { vnni_tile::<$r>(a_rows, row_bytes, panel, steps, dots) },)*
                        _ => unreachable!("rows checked above"),
                    }
                };
            }
            vnni!(1 2 3 4 5 6 7 8)
        }
        _ => {
            macro_rules! avx2 {
                ($($r:literal)*) => {
                    match r {
                        // SAFETY: the assert above: the CPU has avx2 (`runs_here`), each of
                        // the r rows holds `steps` words and the panel `steps` steps.
                        $($r => unsafe { avx2_tile::<$r>(a_rows, row_bytes, panel, steps, dots) },)*
                        _ => unreachable!("rows checked above"),
                    }
                };
            }
            avx2!(1 2 3 4)
        }
    }
}

/// `R` rows x 32 columns with `vpdpbusd`.
///
/// # Safety
/// The CPU has avx512f, avx512bw and avx512vnni; `a` holds `R` rows of `row_bytes >= 4 *
/// steps` bytes and `panel` `steps * 128` bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn vnni_tile<const R: usize>(
    a: &[u8],
    row_bytes: usize,
    panel: &[u8],
    steps: usize,
    dots: &mut [[i32; 32]; 8],
) {
    let mut acc = [[_mm512_setzero_si512(); 2]; R];
    let (ap, bp) = (a.as_ptr(), panel.as_ptr());
    for s in 0..steps {
        // SAFETY: s < steps: bytes s * 128 .. + 128 of the panel and 4 * s .. + 4 of each row
        // are in bounds (the caller's guarantee).
        unsafe {
            let b0 = _mm512_loadu_si512(bp.add(s * 128) as *const _);
            let b1 = _mm512_loadu_si512(bp.add(s * 128 + 64) as *const _);
            for (r, acc) in acc.iter_mut().enumerate() {
                let w = (ap.add(r * row_bytes + 4 * s) as *const i32).read_unaligned();
                let av = _mm512_set1_epi32(w);
                acc[0] = _mm512_dpbusd_epi32(acc[0], av, b0);
                acc[1] = _mm512_dpbusd_epi32(acc[1], av, b1);
            }
        }
    }
    for (acc, row) in acc.iter().zip(dots.iter_mut()) {
        // SAFETY: each row of `dots` holds 32 int32: two 16-lane stores.
        unsafe {
            _mm512_storeu_si512(row.as_mut_ptr() as *mut _, acc[0]);
            _mm512_storeu_si512(row.as_mut_ptr().add(16) as *mut _, acc[1]);
        }
    }
}

/// `R` rows x 16 columns with `vpmaddwd`.
///
/// # Safety
/// The CPU has avx2; `a` holds `R` rows of `row_bytes >= 4 * steps` bytes and `panel`
/// `steps * 64` bytes.
#[target_feature(enable = "avx2")]
unsafe fn avx2_tile<const R: usize>(
    a: &[u8],
    row_bytes: usize,
    panel: &[u8],
    steps: usize,
    dots: &mut [[i32; 32]; 8],
) {
    let mut acc = [[_mm256_setzero_si256(); 2]; R];
    let (ap, bp) = (a.as_ptr(), panel.as_ptr());
    for s in 0..steps {
        // SAFETY: s < steps: bytes s * 64 .. + 64 of the panel and 4 * s .. + 4 of each row
        // are in bounds (the caller's guarantee).
        unsafe {
            let b0 = _mm256_loadu_si256(bp.add(s * 64) as *const __m256i);
            let b1 = _mm256_loadu_si256(bp.add(s * 64 + 32) as *const __m256i);
            for (r, acc) in acc.iter_mut().enumerate() {
                let w = (ap.add(r * row_bytes + 4 * s) as *const i32).read_unaligned();
                let av = _mm256_set1_epi32(w);
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(av, b0));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(av, b1));
            }
        }
    }
    for (acc, row) in acc.iter().zip(dots.iter_mut()) {
        // SAFETY: each row of `dots` holds 32 int32: two 8-lane stores.
        unsafe {
            _mm256_storeu_si256(row.as_mut_ptr() as *mut __m256i, acc[0]);
            _mm256_storeu_si256(row.as_mut_ptr().add(8) as *mut __m256i, acc[1]);
        }
    }
}

//! The zip reader of `torch_load`: the stored (uncompressed) entries of an archive, with zip64
//! records and CRC-32 checks; every offset and length checked against the bytes.

use std::collections::HashMap;

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        t
    });
    !data.iter().fold(!0u32, |c, &b| {
        table[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8)
    })
}

/// The entries of a zip archive by name: each one's bytes (stored entries only).
pub(super) fn zip_entries(b: &[u8]) -> Result<HashMap<String, &[u8]>, String> {
    let size = b.len();
    let not_zip = || {
        if b.len() >= 2 && b[0] == 0x80 && b[1] <= 5 {
            "not a zip archive: a bare pickle (torch's legacy pre-1.6 format, \
             `_use_new_zipfile_serialization=False`) is not supported"
                .to_string()
        } else {
            format!("not a zip archive ({size} bytes, no end-of-central-directory record)")
        }
    };
    if size < 22 {
        return Err(not_zip());
    }
    // the end-of-central-directory record: within the last 22 + 65535 bytes
    let lowest = size.saturating_sub(22 + 0xFFFF);
    let eocd = (lowest..=size - 22)
        .rev()
        .find(|&i| le32(b, i) == Some(0x0605_4b50))
        .ok_or_else(not_zip)?;
    let trunc = |what: &str| format!("truncated zip: {what}");
    let r16 = |at| le16(b, at).ok_or_else(|| trunc("end record"));
    let r32 = |at| le32(b, at).ok_or_else(|| trunc("end record"));
    let mut count = u64::from(r16(eocd + 10)?);
    let mut cd_size = u64::from(r32(eocd + 12)?);
    let mut cd_off = u64::from(r32(eocd + 16)?);
    if count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_off == 0xFFFF_FFFF {
        // zip64: the locator right before the end record points at the zip64 end record
        let loc = eocd
            .checked_sub(20)
            .filter(|&l| le32(b, l) == Some(0x0706_4b50))
            .ok_or_else(|| "zip64 end record locator missing".to_string())?;
        let at = le64(b, loc + 8)
            .and_then(|a| usize::try_from(a).ok())
            .filter(|&a| le32(b, a) == Some(0x0606_4b50))
            .ok_or_else(|| "zip64 end record missing or out of range".to_string())?;
        let r = |o| le64(b, at + o).ok_or_else(|| trunc("zip64 end record"));
        (count, cd_size, cd_off) = (r(32)?, r(40)?, r(48)?);
    }
    let cd_end = cd_off
        .checked_add(cd_size)
        .filter(|&e| e <= eocd as u64)
        .ok_or_else(|| {
            format!(
                "central directory ({cd_size} bytes at {cd_off}) runs past the end record at \
                 {eocd}"
            )
        })? as usize;
    if count.checked_mul(46).is_none_or(|n| n > cd_size) {
        return Err(format!(
            "central directory claims {count} entries in {cd_size} bytes"
        ));
    }
    let mut out = HashMap::with_capacity(count as usize);
    let mut p = cd_off as usize;
    for _ in 0..count {
        let cd = |o: usize, n: usize| {
            p.checked_add(o)
                .filter(|&a| a + n <= cd_end)
                .ok_or_else(|| trunc("central directory"))
        };
        if le32(b, cd(0, 4)?) != Some(0x0201_4b50) {
            return Err(format!("bad central directory entry at byte {p}"));
        }
        let flags = le16(b, cd(8, 2)?).unwrap_or(0);
        let method = le16(b, cd(10, 2)?).unwrap_or(0);
        let crc = le32(b, cd(16, 4)?).unwrap_or(0);
        let mut csize = u64::from(le32(b, cd(20, 4)?).unwrap_or(0));
        let mut usize_ = u64::from(le32(b, cd(24, 4)?).unwrap_or(0));
        let nlen = le16(b, cd(28, 2)?).unwrap_or(0) as usize;
        let elen = le16(b, cd(30, 2)?).unwrap_or(0) as usize;
        let clen = le16(b, cd(32, 2)?).unwrap_or(0) as usize;
        let mut local = u64::from(le32(b, cd(42, 4)?).unwrap_or(0));
        let name_at = cd(46, nlen + elen + clen)?;
        let name = std::str::from_utf8(&b[name_at..name_at + nlen])
            .map_err(|_| format!("zip entry name at byte {name_at} is not UTF-8"))?
            .to_string();
        // zip64 extra field: the 64-bit values of the fields set to 0xFFFFFFFF, in order
        let mut extra = &b[name_at + nlen..name_at + nlen + elen];
        while extra.len() >= 4 {
            let (id, n) = (
                le16(extra, 0).unwrap_or(0),
                le16(extra, 2).unwrap_or(0) as usize,
            );
            let body = extra.get(4..4 + n).ok_or_else(|| trunc("extra field"))?;
            if id == 1 {
                let mut q = 0;
                for field in [&mut usize_, &mut csize, &mut local] {
                    if *field == 0xFFFF_FFFF {
                        *field = le64(body, q).ok_or_else(|| trunc("zip64 extra field"))?;
                        q += 8;
                    }
                }
            }
            extra = &extra[4 + n..];
        }
        p = name_at + nlen + elen + clen;
        let e = |m: String| format!("zip entry `{name}`: {m}");
        if flags & 1 != 0 {
            return Err(e("encrypted".into()));
        }
        if method != 0 {
            return Err(e(format!(
                "compression method {method} is not supported (only stored entries, as \
                 torch.save writes them)"
            )));
        }
        if csize != usize_ {
            return Err(e(format!(
                "stored entry with sizes {csize} and {usize_} that differ"
            )));
        }
        let local = usize::try_from(local)
            .ok()
            .filter(|&l| l <= size)
            .ok_or_else(|| e(format!("local header offset {local} is past the end")))?;
        if le32(b, local) != Some(0x0403_4b50) {
            return Err(e(format!("no local header at byte {local}")));
        }
        let (ln, le) = (
            le16(b, local + 26).ok_or_else(|| e("truncated local header".into()))?,
            le16(b, local + 28).ok_or_else(|| e("truncated local header".into()))?,
        );
        let start = local + 30 + ln as usize + le as usize;
        let end = usize::try_from(csize)
            .ok()
            .and_then(|n| start.checked_add(n))
            .filter(|&end| end <= size)
            .ok_or_else(|| {
                e(format!(
                    "its {csize} bytes at byte {start} run past the end ({size} bytes)"
                ))
            })?;
        let data = &b[start..end];
        if crc32(data) != crc {
            return Err(e("CRC-32 mismatch (corrupted data)".into()));
        }
        if out.insert(name.clone(), data).is_some() {
            return Err(e("the name is repeated".into()));
        }
    }
    Ok(out)
}

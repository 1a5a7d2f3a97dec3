//! Self-describing file contents for the direct-reading stress test: every
//! aligned 8-byte word names the logical file it belongs to, the write that
//! put it there and its own position, so a reader can tell any byte it
//! gets apart from a byte of another file, of another position, or of
//! nothing the writer wrote (a zero word is a hole, or the tail a
//! truncate-and-grow zeroed).

/// The top byte of every word written.
const MAGIC: u64 = 0xA5;

/// The word at byte offset `off` (a multiple of 8) of logical file `file`,
/// written by write `gen`.
pub fn word(file: u16, gen: u16, off: u64) -> u64 {
    MAGIC << 56 | (file as u64) << 40 | (gen as u64) << 24 | (off / 8) & 0xff_ffff
}

/// `len` bytes (a multiple of 8) of file `file` at `off` by write `gen`.
pub fn bytes(file: u16, gen: u16, off: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    for k in 0..len as u64 / 8 {
        v.extend_from_slice(&word(file, gen, off + 8 * k).to_le_bytes());
    }
    v
}

/// What is wrong with `buf`, read at `off` of a file, if anything: every
/// whole word in it must be zero or a word of one file at its own
/// position; all of one file (`file`, when given, or the first seen).
pub fn check(buf: &[u8], off: u64, file: Option<u16>) -> Result<Option<u16>, String> {
    let mut seen = file;
    let skip = ((8 - off % 8) % 8) as usize;
    let mut k = skip;
    while k + 8 <= buf.len() {
        let at = off + k as u64;
        let w = u64::from_le_bytes(buf[k..k + 8].try_into().expect("8 bytes"));
        if w != 0 {
            let (m, f, pos) = (w >> 56, (w >> 40) as u16, w & 0xff_ffff);
            if m != MAGIC || pos != (at / 8) & 0xff_ffff {
                return Err(format!(
                    "word {w:#018x} at offset {at} is not this offset's"
                ));
            }
            match seen {
                Some(s) if s != f => {
                    return Err(format!(
                        "word {w:#018x} at offset {at} is of file {f}, the read's others of {s}"
                    ))
                }
                _ => seen = Some(f),
            }
        }
        k += 8;
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_check_and_foreign_bytes_do_not() {
        let b = bytes(7, 3, 800, 64);
        assert_eq!(check(&b, 800, None), Ok(Some(7)));
        assert_eq!(check(&b[3..], 803, None), Ok(Some(7)));
        assert_eq!(check(&[0u8; 40], 8, Some(1)), Ok(Some(1)));
        assert!(check(&b, 808, None).is_err(), "shifted");
        let mut mixed = b.clone();
        mixed[8..16].copy_from_slice(&word(8, 3, 808).to_le_bytes());
        assert!(check(&mixed, 800, None).is_err(), "another file's word");
        let mut torn = b.clone();
        torn[17] ^= 1;
        assert!(check(&torn, 800, None).is_err(), "a changed byte");
    }
}

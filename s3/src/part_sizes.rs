//! A multipart object's part sizes, kept with the object so that GetObject
//! and HeadObject with `partNumber` can answer one part's bytes: runs of
//! equal sizes (`[size, count]`), so the usual upload (every part one size
//! but the last) keeps two runs whatever its part count.
//!
//! Bound: at most [`MAX_RUNS`] runs are kept (a few KiB of the object's
//! metadata attribute). An object whose parts had more distinct sizes in a
//! row keeps none, and a `partNumber` read of it says so
//! ([`PartSizes::of`] returns None) rather than guess.

use serde::{Deserialize, Serialize};

/// Most runs kept for one object.
pub const MAX_RUNS: usize = 256;

/// Part sizes as runs of equal sizes, in part order.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct PartSizes(Vec<(u64, u32)>);

/// Where a part lies in its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartSpan {
    /// Its first byte's offset.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

impl PartSizes {
    /// The runs of `sizes` (the parts' sizes in order), or None past
    /// [`MAX_RUNS`] runs.
    pub fn of(sizes: impl IntoIterator<Item = u64>) -> Option<PartSizes> {
        let mut runs: Vec<(u64, u32)> = Vec::new();
        for s in sizes {
            match runs.last_mut() {
                Some((size, n)) if *size == s => *n += 1,
                _ => {
                    if runs.len() == MAX_RUNS {
                        return None;
                    }
                    runs.push((s, 1));
                }
            }
        }
        Some(PartSizes(runs))
    }

    /// How many parts.
    pub fn count(&self) -> u64 {
        self.0.iter().map(|&(_, n)| u64::from(n)).sum()
    }

    /// Part `number` (1-based), if the object has it.
    pub fn span(&self, number: u32) -> Option<PartSpan> {
        let mut left = u64::from(number.checked_sub(1)?);
        let mut offset = 0u64;
        for &(size, n) in &self.0 {
            if left < u64::from(n) {
                return Some(PartSpan {
                    offset: offset.checked_add(left.checked_mul(size)?)?,
                    len: size,
                });
            }
            left -= u64::from(n);
            offset = offset.checked_add(size.checked_mul(u64::from(n))?)?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_and_spans() {
        let mib = 1 << 20;
        let p = PartSizes::of([5 * mib, 5 * mib, 5 * mib, mib]).unwrap();
        assert_eq!(p.count(), 4);
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            format!("[[{},3],[{},1]]", 5 * mib, mib)
        );
        assert_eq!(
            p.span(1),
            Some(PartSpan {
                offset: 0,
                len: 5 * mib
            })
        );
        assert_eq!(
            p.span(3),
            Some(PartSpan {
                offset: 10 * mib,
                len: 5 * mib
            })
        );
        assert_eq!(
            p.span(4),
            Some(PartSpan {
                offset: 15 * mib,
                len: mib
            })
        );
        assert_eq!(p.span(0), None);
        assert_eq!(p.span(5), None);
        assert_eq!(p.span(u32::MAX), None);
        // Sizes that change every part: kept up to the bound.
        assert!(PartSizes::of((0..MAX_RUNS as u64).map(|k| k + 1)).is_some());
        assert!(PartSizes::of((0..=MAX_RUNS as u64).map(|k| k + 1)).is_none());
        // What a damaged attribute might hold cannot overflow.
        let huge: PartSizes =
            serde_json::from_str(&format!("[[{},4000000000]]", u64::MAX)).unwrap();
        assert_eq!(huge.span(3_000_000_000), None);
    }
}

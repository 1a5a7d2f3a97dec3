//! Request latencies in a fixed log-linear histogram (HDR-style): exact
//! microseconds below 1,024, then 64 buckets per power of two (under 1.6%
//! apart) up to about 18 minutes. Bounded whatever the run's length (a
//! list of every latency grows with the request count).

/// Below this, one bucket per microsecond.
const LINEAR_US: u64 = 1024;
/// Buckets per power of two above [`LINEAR_US`].
const SUB: u64 = 64;
/// Powers of two above [`LINEAR_US`] told apart (2^10 .. 2^40 us).
const OCTAVES: u64 = 30;
const BUCKETS: usize = (LINEAR_US + OCTAVES * SUB) as usize;

#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }
}

/// The bucket of `us`, and the smallest latency in bucket `i`.
fn bucket(us: u64) -> usize {
    if us < LINEAR_US {
        return us as usize;
    }
    let e = 63 - u64::from(us.leading_zeros()); // >= 10
    let sub = (us >> (e - 6)) & (SUB - 1);
    let i = LINEAR_US + (e - 10) * SUB + sub;
    (i as usize).min(BUCKETS - 1)
}

fn lower_bound_us(i: usize) -> u64 {
    let i = i as u64;
    if i < LINEAR_US {
        return i;
    }
    let e = (i - LINEAR_US) / SUB + 10;
    let sub = (i - LINEAR_US) % SUB;
    (1 << e) | (sub << (e - 6))
}

impl Histogram {
    pub fn record(&mut self, us: u64) {
        self.total += 1;
        self.counts[bucket(us)] += 1;
    }

    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += *b;
        }
        self.total += o.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The latency that `q` (0..=1) of the requests did not exceed, in
    /// microseconds (the lower bound of its bucket: exact below 1,024 µs,
    /// within 1.6% above); None with no requests.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(lower_bound_us(i));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_known_spread() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile_us(0.5), None);
        for us in 1..=100 {
            h.record(us);
        }
        assert_eq!(h.quantile_us(0.5), Some(50));
        assert_eq!(h.quantile_us(0.99), Some(99));
        assert_eq!(h.quantile_us(1.0), Some(100));
        let mut g = Histogram::default();
        g.record(250_000);
        h.merge(&g);
        assert_eq!(h.count(), 101);
        let top = h.quantile_us(1.0).unwrap();
        assert!((246_000..=250_000).contains(&top), "{top}");
        assert_eq!(h.quantile_us(0.5), Some(51));
    }

    #[test]
    fn buckets_are_monotonic_and_close() {
        let mut last = 0;
        for us in (0..5_000_000u64)
            .step_by(997)
            .chain([u64::MAX / 2, u64::MAX])
        {
            let i = bucket(us);
            assert!(i >= last, "{us}");
            last = i;
            let lo = lower_bound_us(i);
            assert!(lo <= us, "{us}: bucket from {lo}");
            if i < BUCKETS - 1 {
                assert!(us - lo <= us / 60 + 1, "{us}: bucket from {lo}");
            }
        }
    }
}

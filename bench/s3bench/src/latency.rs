//! Request latencies in a fixed histogram: one-microsecond buckets up to
//! [`MAX_US`], the rest counted above it. Bounded whatever the run's
//! length (a list of every latency grows with the request count).

/// The largest latency told apart (100 ms); longer ones count as "above".
pub const MAX_US: usize = 100_000;

#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u32>,
    above: u64,
    total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; MAX_US + 1],
            above: 0,
            total: 0,
        }
    }
}

impl Histogram {
    pub fn record(&mut self, us: u64) {
        self.total += 1;
        match usize::try_from(us) {
            Ok(i) if i <= MAX_US => self.counts[i] = self.counts[i].saturating_add(1),
            _ => self.above += 1,
        }
    }

    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a = a.saturating_add(*b);
        }
        self.above += o.above;
        self.total += o.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The latency that `q` (0..=1) of the requests did not exceed, in
    /// microseconds; None with no requests, or when it is above [`MAX_US`].
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (us, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return Some(us as u64);
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
        g.record(5 * MAX_US as u64);
        h.merge(&g);
        assert_eq!(h.count(), 101);
        assert_eq!(h.quantile_us(1.0), None, "the slowest is above the range");
        assert_eq!(h.quantile_us(0.5), Some(51));
    }
}

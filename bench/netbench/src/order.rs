//! The order servers take turns in, repetition by repetition.
//!
//! Every server runs once per repetition (or round), and the order changes
//! so that no server always comes first or always comes right after the
//! same other one: on a 2-vCPU VM a 256 MiB upload to a
//! pktfs server often ran slower right after network-only's than the same
//! server's otherwise.

/// The order of `n` servers in repetition `r`: the first `rotating` are
/// visited with a stride coprime to their count, starting at
/// `r mod rotating`; the rest keep their places after them. The stride
/// moves on every repetition (`strides`), so a server's predecessor
/// changes too: a plain rotation keeps every server behind the same
/// neighbour, and on this VM who came just before moved a transfer's
/// speed by more than the differences measured.
pub fn order(n: usize, rotating: usize, r: usize) -> impl Iterator<Item = usize> {
    let m = rotating.clamp(1, n.max(1));
    let s = strides(m);
    let stride = s[r % s.len()];
    (0..n).map(move |i| if i < m { (i * stride + r) % m } else { i })
}

/// The strides that visit every one of `m` places once: 1..m coprime to
/// `m` (just 1 for m <= 2).
fn strides(m: usize) -> Vec<usize> {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut s: Vec<usize> = (1..m.max(2)).filter(|&k| gcd(k, m) == 1).collect();
    if s.is_empty() {
        s.push(1);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::order;

    #[test]
    fn each_repetition_is_every_server_once_with_the_last_kept_last() {
        for r in 0..7 {
            let o: Vec<usize> = order(5, 4, r).collect();
            let mut sorted = o.clone();
            sorted.sort();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4], "rep {r}: {o:?}");
            assert_eq!(o[4], 4, "the last stays last");
            assert_eq!(o[0], r % 4, "rep {r} starts one later");
        }
        assert_eq!(order(0, 0, 3).count(), 0);
        assert_eq!(order(1, 1, 3).collect::<Vec<_>>(), vec![0]);
        assert_eq!(order(3, 3, 1).collect::<Vec<_>>(), vec![1, 0, 2]);
    }

    #[test]
    fn a_server_follows_a_different_one_in_each_of_the_first_repetitions() {
        // netbench's large PUT: 9 servers change places, ext4 stays last.
        let (n, m) = (10, 9);
        let mut seen = std::collections::HashSet::new();
        for r in 0..5 {
            let o: Vec<usize> = order(n, m, r).collect();
            assert_eq!(o[n - 1], n - 1);
            for w in o[..m].windows(2) {
                assert!(
                    seen.insert((w[0], w[1])),
                    "rep {r}: {} follows {} again ({o:?})",
                    w[1],
                    w[0]
                );
            }
        }
    }
}

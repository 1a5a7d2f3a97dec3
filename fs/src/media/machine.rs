//! What the CPU brings to pktfs's pace: the cache write-back instruction
//! persistence uses, whether CRC32C can fold with VPCLMULQDQ, and how fast
//! checksums and copies actually run here. Every benchmark prints this, so
//! a figure is never read without the machine it came from (CRC32C's pace
//! differs several-fold between CPUs with and without VPCLMULQDQ, and
//! verified reads and scrub move with it).

use std::time::Instant;

use super::arch::{detect_flush, FlushInsn};

/// The facts, measured once.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cpu_model: String,
    /// `cpu family` and `model` from /proc/cpuinfo: a hypervisor may name
    /// the CPU only "AMD EPYC", which these tell apart (family 25 is Zen 3
    /// and 4, family 26 Zen 5).
    pub cpu_family: Option<u32>,
    pub cpu_model_number: Option<u32>,
    pub cpus: usize,
    pub clwb: bool,
    pub clflushopt: bool,
    pub vpclmulqdq: bool,
    pub avx512f: bool,
    /// What pktfs issues to write a line back.
    pub flush_insn: FlushInsn,
    /// `pktfs_layout::crc32c` over a 64 MiB buffer, best of 5, GB/s.
    pub crc32c_gb_per_s: f64,
    /// `copy_from_slice` of the same buffer, best of 5, GB/s.
    pub memcpy_gb_per_s: f64,
    /// The same copy into lines last written 192 MiB earlier (out of the
    /// caches, as a file system's free buffers are), best of 4, GB/s: what
    /// storing a stream runs at. It moves with the memory system's load,
    /// not only the CPU (on a shared host, by several times), and large
    /// uploads move with it.
    pub cold_copy_gb_per_s: f64,
}

fn cpuinfo_field(info: &str, key: &str) -> Option<String> {
    info.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Best of `n` runs of `f` over `bytes` bytes, in GB/s.
fn best_gbps(bytes: usize, n: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..n {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    bytes as f64 / best.max(1e-9) / 1e9
}

/// Copies of `src` into the 4 windows of a destination 4x its size,
/// written once first (so no page is faulted in while timed): each window
/// was last written 3 windows earlier. Best of the 4, GB/s.
fn cold_copy_gbps(src: &[u8]) -> f64 {
    let n = src.len();
    let mut dst = vec![1u8; 4 * n];
    let mut best = f64::MAX;
    for w in dst.chunks_exact_mut(n) {
        let t = Instant::now();
        w.copy_from_slice(src);
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&dst);
    n as f64 / best.max(1e-9) / 1e9
}

impl Machine {
    /// Look at the CPU and time a checksum and two copies (about a second;
    /// more on a machine whose memory is slow).
    pub fn measure() -> Machine {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let flags = cpuinfo_field(&info, "flags").unwrap_or_default();
        let has = |f: &str| flags.split_whitespace().any(|x| x == f);
        const LEN: usize = 64 << 20;
        let src: Vec<u8> = (0..LEN).map(|i| (i as u8).wrapping_mul(13)).collect();
        let mut dst = vec![0u8; LEN];
        let mut sink = 0u32;
        let crc = best_gbps(LEN, 5, || sink ^= pktfs_layout::crc32c(&src));
        let copy = best_gbps(LEN, 5, || dst.copy_from_slice(&src));
        std::hint::black_box((sink, &dst));
        drop(dst);
        let cold_copy = cold_copy_gbps(&src);
        Machine {
            cpu_model: cpuinfo_field(&info, "model name").unwrap_or_else(|| "unknown".into()),
            cpu_family: cpuinfo_field(&info, "cpu family").and_then(|v| v.parse().ok()),
            cpu_model_number: cpuinfo_field(&info, "model\t").and_then(|v| v.parse().ok()),
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            clwb: has("clwb"),
            clflushopt: has("clflushopt"),
            vpclmulqdq: has("vpclmulqdq"),
            avx512f: has("avx512f"),
            flush_insn: detect_flush(),
            crc32c_gb_per_s: crc,
            memcpy_gb_per_s: copy,
            cold_copy_gb_per_s: cold_copy,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "cpu_model": self.cpu_model, "cpu_family": self.cpu_family,
            "cpu_model_number": self.cpu_model_number, "cpus": self.cpus,
            "clwb": self.clwb, "clflushopt": self.clflushopt,
            "vpclmulqdq": self.vpclmulqdq, "avx512f": self.avx512f,
            "flush_insn": format!("{:?}", self.flush_insn).to_lowercase(),
            "crc32c_gb_per_s": (self.crc32c_gb_per_s * 100.0).round() / 100.0,
            "memcpy_gb_per_s": (self.memcpy_gb_per_s * 100.0).round() / 100.0,
            "cold_copy_gb_per_s": (self.cold_copy_gb_per_s * 100.0).round() / 100.0,
        })
    }
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let yn = |b: bool| if b { "yes" } else { "no" };
        let ident = match (self.cpu_family, self.cpu_model_number) {
            (Some(fam), Some(m)) => format!("family {fam} model {m}, "),
            _ => String::new(),
        };
        write!(
            f,
            "{} ({}{} CPUs); clwb {}, clflushopt {}, VPCLMULQDQ {}, AVX-512 {}; \
             pktfs flushes with {:?}; CRC32C {:.1} GB/s, memcpy {:.1} GB/s \
             ({:.1} into cold lines)",
            self.cpu_model,
            ident,
            self.cpus,
            yn(self.clwb),
            yn(self.clflushopt),
            yn(self.vpclmulqdq),
            yn(self.avx512f),
            self.flush_insn,
            self.crc32c_gb_per_s,
            self.memcpy_gb_per_s,
            self.cold_copy_gb_per_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::cpuinfo_field;

    #[test]
    fn family_and_model_number_are_told_from_the_model_name() {
        let info = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n\
                    model name\t: AMD EPYC\nflags\t\t: fpu clwb\n";
        assert_eq!(cpuinfo_field(info, "cpu family").as_deref(), Some("25"));
        assert_eq!(cpuinfo_field(info, "model\t").as_deref(), Some("17"));
        assert_eq!(
            cpuinfo_field(info, "model name").as_deref(),
            Some("AMD EPYC")
        );
    }
}

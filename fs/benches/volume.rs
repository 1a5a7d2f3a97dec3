//! Volume-level benchmark (no FUSE). Every figure is printed beside a
//! reference measured in the same run on the same mapping, as medians of
//! several runs, because this machine is shared and noisy.
//!
//!   cargo bench -p pktfs-fs --bench volume [-- --quick]
//!
//! Image: a file on /dev/shm (persist mode `auto` picks clwb there; set
//! PKTFS_PERSIST=eadr|msync|clwb to override).

use std::path::Path;
use std::time::{Duration, Instant};

use pktfs_fs::media::PersistChoice;
use pktfs_fs::{FormatOptions, OpenOptions, Volume};
use pktfs_layout::GeometryParams;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 17
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let persist: PersistChoice = std::env::var("PKTFS_PERSIST")
        .ok()
        .map(|s| s.parse().unwrap())
        .unwrap_or_default();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("bench.img");
    let gib: u64 = if quick { 128 << 20 } else { 1 << 30 };
    let image_len = 2 * gib + (512 << 20);
    Volume::format(
        &img,
        &FormatOptions {
            params: GeometryParams::for_size(image_len),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let mut v = Volume::open(
        &img,
        &OpenOptions {
            persist,
            ..Default::default()
        },
    )
    .unwrap();
    let runs = 3;
    // The ratios move with the CPU (clwb or not, how fast CRC32C runs).
    println!("machine: {}", pktfs_fs::media::machine::Machine::measure());
    println!(
        "pktfs volume benchmark: image {} MiB on /dev/shm, persist mode {}, {} runs, medians",
        image_len >> 20,
        v.persistence(),
        runs
    );
    println!();
    let chunk = sequential_append(&mut v, gib, runs);
    random_overwrite(&mut v, &chunk, quick, runs);
    create_unlink(&v, quick, runs);
    drop(v);
    open_records(&dir.path().join("records.img"), persist, quick, runs);
}

/// 1. Sequential append of `gib` in 1 MiB writes vs a non-temporal copy +
///    sfence of the same bytes into the same mapping (free buffer space at
///    the far end of the region, which the volume does not reach).
///    Two sources: a 256 MiB buffer streamed from DRAM (what appending a
///    large file really reads) and one cache-hot 1 MiB chunk repeated.
///    Returns that chunk.
fn sequential_append(v: &mut Volume, gib: u64, runs: usize) -> Vec<u8> {
    let g = *v.geometry();
    let big: Vec<u8> = (0..256usize << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let hot: Vec<u8> = big[..1 << 20].to_vec();
    for (label, cycle) in [("from DRAM", true), ("cache-hot", false)] {
        let src = |off: u64| -> &[u8] {
            if cycle {
                let o = (off % big.len() as u64) as usize;
                &big[o..o + (1 << 20)]
            } else {
                &hot[..]
            }
        };
        let mut ref_bw = Vec::new();
        let mut vol_bw = Vec::new();
        for r in 0..runs {
            let base = g.buffer_offset + g.buffer_region_bytes() - gib;
            let t = Instant::now();
            let mut off = 0;
            while off < gib {
                v.pm_exclusive().write_nt(base + off, src(off));
                v.pm().fence();
                off += 1 << 20;
            }
            ref_bw.push(gib as f64 / secs(t.elapsed()) / 1e9);
            let f = v
                .create(v.root(), format!("seq{r}").as_bytes(), 0o644, 0, 0)
                .unwrap();
            let t = Instant::now();
            let mut off = 0;
            while off < gib {
                v.write(f.ino, off, src(off)).unwrap();
                off += 1 << 20;
            }
            vol_bw.push(gib as f64 / secs(t.elapsed()) / 1e9);
            v.unlink(v.root(), format!("seq{r}").as_bytes()).unwrap();
        }
        let (a, b) = (median(vol_bw), median(ref_bw));
        println!(
            "sequential append {} MiB, 1 MiB writes, source {label:9}  pktfs {a:6.2} GB/s   nt-copy+sfence {b:6.2} GB/s   ratio {:.2}x (target >= 0.6x)",
            gib >> 20,
            a / b
        );
    }
    hot
}

/// 2. 4 KiB random overwrites inside a 256 MiB file vs 4 KiB nt copy +
///    persist at the same random offsets of free space.
fn random_overwrite(v: &mut Volume, chunk: &[u8], quick: bool, runs: usize) {
    let g = *v.geometry();
    let file_len: u64 = if quick { 64 << 20 } else { 256 << 20 };
    let f = v.create(v.root(), b"rand", 0o644, 0, 0).unwrap();
    let mut off = 0;
    while off < file_len {
        v.write(f.ino, off, chunk).unwrap();
        off += chunk.len() as u64;
    }
    let n_ops = if quick { 20_000 } else { 100_000 };
    let block = vec![0x5au8; 4096];
    let mut ref_iops = Vec::new();
    let mut vol_iops = Vec::new();
    for r in 0..runs {
        let mut rng = Lcg(r as u64 + 1);
        let base = g.buffer_offset + g.buffer_region_bytes() - file_len;
        let t = Instant::now();
        for _ in 0..n_ops {
            let o = rng.next() % (file_len / 4096) * 4096;
            v.pm_exclusive().write_nt(base + o, &block);
            v.pm().fence();
        }
        ref_iops.push(n_ops as f64 / secs(t.elapsed()));
        let mut rng = Lcg(r as u64 + 1);
        let t = Instant::now();
        for _ in 0..n_ops {
            let o = rng.next() % (file_len / 4096) * 4096;
            v.write(f.ino, o, &block).unwrap();
        }
        vol_iops.push(n_ops as f64 / secs(t.elapsed()));
    }
    let (a, b) = (median(vol_iops), median(ref_iops));
    println!("4 KiB random overwrite ({} MiB file)     pktfs {:6.0}k IOPS  nt-copy+sfence {:6.0}k IOPS ratio {:.2}x", file_len >> 20, a / 1e3, b / 1e3, a / b);
    v.unlink(v.root(), b"rand").unwrap();
}

/// 3. create + unlink of 100,000 files vs the same on tmpfs (std::fs).
fn create_unlink(v: &Volume, quick: bool, runs: usize) {
    let n_files = if quick { 20_000 } else { 100_000 };
    let mut vol_ops = Vec::new();
    let mut tmpfs_ops = Vec::new();
    for r in 0..runs {
        let d = v
            .mkdir(v.root(), format!("meta{r}").as_bytes(), 0o755, 0, 0)
            .unwrap()
            .ino;
        let t = Instant::now();
        for i in 0..n_files {
            v.create(d, format!("file{i}").as_bytes(), 0o644, 0, 0)
                .unwrap();
        }
        for i in 0..n_files {
            v.unlink(d, format!("file{i}").as_bytes()).unwrap();
        }
        vol_ops.push(2.0 * n_files as f64 / secs(t.elapsed()));
        let td = tempfile::tempdir_in("/dev/shm").unwrap();
        let t = Instant::now();
        for i in 0..n_files {
            std::fs::File::create(td.path().join(format!("file{i}"))).unwrap();
        }
        for i in 0..n_files {
            std::fs::remove_file(td.path().join(format!("file{i}"))).unwrap();
        }
        tmpfs_ops.push(2.0 * n_files as f64 / secs(t.elapsed()));
    }
    let (a, b) = (median(vol_ops), median(tmpfs_ops));
    println!("create+unlink {n_files} files              pktfs {:6.0}k ops/s tmpfs syscalls {:6.0}k ops/s ratio {:.2}x", a / 1e3, b / 1e3, a / b);
}

/// 4. Open (recovery walk) of an image `img2` holding 1,000,000 records.
fn open_records(img2: &Path, persist: PersistChoice, quick: bool, runs: usize) {
    let n_records: u64 = if quick { 200_000 } else { 1_000_000 };
    let params = GeometryParams {
        image_len_bytes: 512 << 20,
        buffer_size_bytes: 2048,
        inode_count: Some(4096),
        record_count: Some(n_records + 10_000),
    };
    Volume::format(
        img2,
        &FormatOptions {
            params,
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    {
        let v = Volume::open(
            img2,
            &OpenOptions {
                persist,
                ..Default::default()
            },
        )
        .unwrap();
        let files = 1000u64;
        let per_file = n_records / files - 1; // data records + the dirent
        for i in 0..files {
            let f = v
                .create(v.root(), format!("r{i}").as_bytes(), 0o644, 0, 0)
                .unwrap();
            // Appends of 64 bytes each become one record each.
            for k in 0..per_file {
                v.write(f.ino, k * 64, &[k as u8; 64]).unwrap();
            }
        }
        v.close().unwrap();
    }
    let mut open_s = Vec::new();
    let mut scan_s = Vec::new();
    let mut recs = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let mut v = Volume::open(
            img2,
            &OpenOptions {
                persist,
                ..Default::default()
            },
        )
        .unwrap();
        open_s.push(secs(t.elapsed()));
        recs = v.open_report().records;
        // Reference: one sequential pass computing the CRC of every record
        // slot in the table (the least any validating open must do).
        let g = *v.geometry();
        let t = Instant::now();
        let mut acc = 0u32;
        {
            let img = v.pm_exclusive();
            for r in 1..=g.record_count {
                acc ^= pktfs_layout::crc32c(img.slice(g.record_offset + r * 64 + 8, 52));
            }
        }
        scan_s.push(secs(t.elapsed()));
        std::hint::black_box(acc);
        v.close().unwrap();
    }
    let (a, b) = (median(open_s), median(scan_s));
    println!("open (recovery) of {recs} records        pktfs {a:6.3} s       CRC scan of the table {b:6.3} s (target open <= 0.5 s)");
}

//! directbench: local reads of a file in a pktfs image, three ways, against
//! the same file on tmpfs, in one run on one machine (bench/direct.sh):
//!
//! - the library (pktfs-direct `read_at`), one thread: 4 KiB random reads
//!   and 1 MiB sequential reads, against tmpfs `pread` of the same sizes;
//!   and 1 MiB sequential with `verify=always`, whose extra time per GB is
//!   set beside the time CRC32C takes per GB on this machine;
//! - unmodified fio (psync, one job) under the preload shim on the mount,
//!   against fio on tmpfs and on the plain mount.
//!
//! The image is held by `pktfs mount` (a separate process, as in use); the
//! file is written through the Volume before it is mounted, in 1 MiB
//! writes (records of at most 256 KiB). Every file and every cache is warm
//! (read once) before timing: the default verify mode checks each record
//! once, on that first read. Each figure is the median of RUNS runs; the
//! two sides of each comparison alternate within a run (ABBA). The rows go
//! to stdout as a table and to bench/results/direct-TIMESTAMP.json with
//! `pktfs machine`'s facts and the commit.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{json, Value};

#[derive(Parser, Debug)]
struct Args {
    /// Runs per figure (the median is reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// The file's size (bytes).
    #[arg(long, default_value_t = 1 << 30)]
    size: u64,
    /// Seconds each timed part runs.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// The `pktfs` binary (release).
    #[arg(long)]
    pktfs: PathBuf,
    /// libpktfs_preload.so (release).
    #[arg(long)]
    shim: PathBuf,
    /// Where the JSON goes.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Ops per second of `op` run for `secs`, by `n`-op batches between clock
/// reads.
fn rate(secs: f64, mut op: impl FnMut(u64)) -> f64 {
    let t0 = Instant::now();
    let mut done = 0u64;
    let limit = Duration::from_secs_f64(secs);
    while t0.elapsed() < limit {
        for _ in 0..256 {
            op(done);
            done += 1;
        }
    }
    done as f64 / t0.elapsed().as_secs_f64()
}

const SMALL: usize = 4096;
const BIG: usize = 1 << 20;

/// 4 KiB reads at random 4 KiB-aligned offsets: ops/s.
fn random_4k(size: u64, secs: f64, seed: u64, mut read: impl FnMut(&mut [u8], u64)) -> f64 {
    let mut rng = Rng(seed | 1);
    let mut buf = vec![0u8; SMALL];
    let blocks = size / SMALL as u64;
    rate(secs, |_| {
        let off = rng.next() % blocks * SMALL as u64;
        read(&mut buf, off);
    })
}

/// 1 MiB reads front to back, round and round: GB/s.
fn sequential_1m(size: u64, secs: f64, mut read: impl FnMut(&mut [u8], u64)) -> f64 {
    let mut buf = vec![0u8; BIG];
    let chunks = size / BIG as u64;
    rate(secs, |k| read(&mut buf, k % chunks * BIG as u64)) * BIG as f64 / 1e9
}

type Runs = std::collections::BTreeMap<&'static str, Vec<f64>>;

/// Run `fa` and `fb` (in this order when `a_first`, else the other) and
/// record their figures under `ka` and `kb`.
fn both(
    r: &mut Runs,
    a_first: bool,
    ka: &'static str,
    fa: &mut dyn FnMut() -> f64,
    kb: &'static str,
    fb: &mut dyn FnMut() -> f64,
) {
    let (x, y) = if a_first {
        let x = fa();
        (x, fb())
    } else {
        let y = fb();
        (fa(), y)
    };
    r.entry(ka).or_default().push(x);
    r.entry(kb).or_default().push(y);
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// fio's (IOPS, bytes/s) for one read job on `file`.
fn fio(file: &Path, rw: &str, bs: &str, size: u64, secs: f64, shim: Option<&Path>) -> (f64, f64) {
    let mut c = Command::new("fio");
    c.args([
        "--name=r",
        "--ioengine=psync",
        "--numjobs=1",
        "--readonly",
        "--time_based",
        "--output-format=json",
    ])
    .arg(format!("--filename={}", file.display()))
    .arg(format!("--rw={rw}"))
    .arg(format!("--bs={bs}"))
    .arg(format!("--size={size}"))
    .arg(format!("--runtime={}", secs.ceil() as u64));
    if let Some(s) = shim {
        c.env("LD_PRELOAD", s);
    }
    let out = c.output().expect("running fio");
    assert!(
        out.status.success(),
        "fio: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("fio's JSON");
    let r = &v["jobs"][0]["read"];
    (
        r["iops"].as_f64().expect("iops"),
        r["bw_bytes"].as_f64().expect("bw_bytes"),
    )
}

/// Prepare the image and the tmpfs copy; mount; return what the runs use.
struct Setup {
    dir: PathBuf,
    tmpfs_file: PathBuf,
    image: PathBuf,
    mnt: PathBuf,
    pktfs: PathBuf,
}

impl Setup {
    fn new(a: &Args) -> Setup {
        let dir = PathBuf::from(format!("/dev/shm/pktfs-directbench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tmpfs_file = dir.join("data");
        let image = dir.join("img");
        let mnt = PathBuf::from(format!("/tmp/pktfs-directbench-{}", std::process::id()));
        std::fs::create_dir_all(&mnt).unwrap();
        let params = pktfs_layout::GeometryParams::for_size(a.size + a.size / 2 + (64 << 20));
        pktfs_fs::Volume::format(
            &image,
            &pktfs_fs::FormatOptions {
                params,
                label: None,
            },
            &mut |_, _| {},
        )
        .expect("format the image");
        let vol = pktfs_fs::Volume::open(&image, &Default::default()).expect("open the image");
        let ino = vol.create(vol.root(), b"data", 0o644, 0, 0).unwrap().ino;
        let tf = std::fs::File::create(&tmpfs_file).unwrap();
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut chunk = vec![0u8; BIG];
        for k in 0..a.size / BIG as u64 {
            for w in chunk.chunks_exact_mut(8) {
                w.copy_from_slice(&rng.next().to_le_bytes());
            }
            vol.write(ino, k * BIG as u64, &chunk).unwrap();
            tf.write_all_at(&chunk, k * BIG as u64).unwrap();
        }
        vol.close().unwrap();
        let st = Command::new(&a.pktfs)
            .arg("mount")
            .arg(&image)
            .arg(&mnt)
            .status()
            .expect("pktfs mount");
        assert!(st.success(), "pktfs mount failed");
        Setup {
            dir,
            tmpfs_file,
            image,
            mnt,
            pktfs: a.pktfs.clone(),
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        // The daemon lets go of the image as it exits.
        std::thread::sleep(Duration::from_millis(500));
        let _ = std::fs::remove_dir(&self.mnt);
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = &self.pktfs;
    }
}

fn row(
    name: &str,
    unit: &str,
    runs: &[f64],
    reference: Option<(&str, &[f64])>,
    target: Option<f64>,
) -> Value {
    let m = median(runs);
    let (rname, rm, ratio) = match reference {
        Some((n, r)) => (Some(n), Some(median(r)), Some(m / median(r))),
        None => (None, None, None),
    };
    let met = match (target, ratio) {
        (Some(t), Some(r)) => Some(r >= t),
        _ => None,
    };
    println!(
        "| {name} | {m:.3} {unit} | {} | {} | {} |",
        rname.map_or("-".into(), |n| format!("{n}: {:.3}", rm.unwrap())),
        ratio.map_or("-".into(), |r| format!("{r:.2}x")),
        target.map_or("-".into(), |t| format!(
            ">= {t}x: {}",
            if met == Some(true) { "met" } else { "not met" }
        )),
    );
    json!({"name": name, "unit": unit, "runs": runs, "median": m,
           "reference": rname, "reference_runs": reference.map(|r| r.1), "reference_median": rm,
           "ratio": ratio, "target": target, "met": met})
}

fn main() {
    let a = Args::parse();
    let machine = pktfs_fs::media::machine::Machine::measure();
    println!("machine: {machine}");
    let s = Setup::new(&a);
    let r = measure(&a, &s);
    let rows = report(&a, &machine, &r);
    write_json(&a, &machine, rows);
    drop(s);
}

/// Every part, `a.runs` times, each pair ABBA: the library against tmpfs
/// pread, verify=always against once, fio under the shim against tmpfs and
/// the plain mount.
fn measure(a: &Args, s: &Setup) -> Runs {
    let tf = std::fs::File::open(&s.tmpfs_file).unwrap();
    let img = pktfs_direct::Image::open(&s.image).expect("map the image");
    let lib = img.open_file("/data").expect("open /data");
    let always = pktfs_direct::Image::open_with(
        &s.image,
        &pktfs_direct::OpenOptions {
            verify: Some(pktfs_direct::VerifyMode::Always),
        },
    )
    .unwrap()
    .open_file("/data")
    .unwrap();
    let mounted = s.mnt.join("data");
    let size = a.size;
    let pread = |b: &mut [u8], off: u64| {
        tf.read_exact_at(b, off).unwrap();
    };
    let direct = |b: &mut [u8], off: u64| {
        let n = lib.read_at(b, off).expect("read_at");
        assert_eq!(n, b.len());
    };
    let direct_always = |b: &mut [u8], off: u64| {
        always.read_at(b, off).expect("read_at");
    };
    // Warm: every page mapped, every record checked once.
    sequential_1m(size, 0.0, pread);
    let mut buf = vec![0u8; BIG];
    for k in 0..size / BIG as u64 {
        direct(&mut buf, k * BIG as u64);
        pread(&mut buf, k * BIG as u64);
    }
    let mut r = Runs::default();
    for run in 0..a.runs {
        let seed = 7 + run as u64;
        // ABBA within the run: which side goes first alternates.
        let first = run % 2 == 0;
        both(
            &mut r,
            first,
            "tmpfs_rand",
            &mut || random_4k(size, a.secs, seed, pread),
            "lib_rand",
            &mut || random_4k(size, a.secs, seed, direct),
        );
        both(
            &mut r,
            first,
            "tmpfs_seq",
            &mut || sequential_1m(size, a.secs, pread),
            "lib_seq",
            &mut || sequential_1m(size, a.secs, direct),
        );
        both(
            &mut r,
            first,
            "lib_seq_once",
            &mut || sequential_1m(size, a.secs, direct),
            "lib_seq_always",
            &mut || sequential_1m(size, a.secs, direct_always),
        );
        let t = &s.tmpfs_file;
        both(
            &mut r,
            first,
            "fio_tmpfs_rand",
            &mut || fio(t, "randread", "4k", size, a.secs, None).0,
            "fio_shim_rand",
            &mut || fio(&mounted, "randread", "4k", size, a.secs, Some(&a.shim)).0,
        );
        r.entry("fio_fuse_rand")
            .or_default()
            .push(fio(&mounted, "randread", "4k", size, a.secs, None).0);
        both(
            &mut r,
            first,
            "fio_tmpfs_seq",
            &mut || fio(t, "read", "1m", size, a.secs, None).1 / 1e9,
            "fio_shim_seq",
            &mut || fio(&mounted, "read", "1m", size, a.secs, Some(&a.shim)).1 / 1e9,
        );
        r.entry("fio_fuse_seq")
            .or_default()
            .push(fio(&mounted, "read", "1m", size, a.secs, None).1 / 1e9);
        eprintln!("run {}/{} done", run + 1, a.runs);
    }
    r
}

/// The table, printed, and its rows for the JSON.
fn report(a: &Args, machine: &pktfs_fs::media::machine::Machine, r: &Runs) -> Vec<Value> {
    let size = a.size;
    let g = |k: &str| r[k].clone();
    println!(
        "\ndirect reading, {} MiB file, median of {} runs, {:.0} s each part\n",
        size >> 20,
        a.runs,
        a.secs
    );
    println!("| row | median | reference | ratio | target |");
    println!("|---|---|---|---|---|");
    let mut rows = vec![
        row(
            "library 4 KiB random read (ops/s)",
            "ops/s",
            &g("lib_rand"),
            Some(("tmpfs pread", &g("tmpfs_rand"))),
            Some(1.0),
        ),
        row(
            "library 1 MiB sequential read (GB/s)",
            "GB/s",
            &g("lib_seq"),
            Some(("tmpfs pread", &g("tmpfs_seq"))),
            Some(1.0),
        ),
        row(
            "fio psync 4 KiB randread under the shim (IOPS)",
            "IOPS",
            &g("fio_shim_rand"),
            Some(("fio on tmpfs", &g("fio_tmpfs_rand"))),
            Some(0.8),
        ),
        row(
            "fio psync 4 KiB randread under the shim vs the plain mount (IOPS)",
            "IOPS",
            &g("fio_shim_rand"),
            Some(("fio on the mount", &g("fio_fuse_rand"))),
            Some(5.0),
        ),
        row(
            "fio psync 1 MiB sequential read under the shim (GB/s)",
            "GB/s",
            &g("fio_shim_seq"),
            Some(("fio on tmpfs", &g("fio_tmpfs_seq"))),
            Some(0.8),
        ),
        row(
            "fio psync 1 MiB sequential read on the plain mount (GB/s)",
            "GB/s",
            &g("fio_fuse_seq"),
            Some(("fio on tmpfs", &g("fio_tmpfs_seq"))),
            None,
        ),
    ];
    // verify=always: the extra seconds per GB against once, beside the
    // seconds per GB CRC32C takes here.
    let spg = |gbps: &[f64]| gbps.iter().map(|g| 1.0 / g).collect::<Vec<f64>>();
    let extra: Vec<f64> = spg(&g("lib_seq_always"))
        .iter()
        .zip(spg(&g("lib_seq_once")))
        .map(|(a, o)| (a - o) * 1e3)
        .collect();
    let crc_ms_per_gb = 1e3 / machine.crc32c_gb_per_s;
    println!(
        "| verify=always: extra ms per GB read | {:.1} ms/GB | CRC32C here: {crc_ms_per_gb:.1} ms/GB ({:.1} GB/s) | {:.2}x | - |",
        median(&extra),
        machine.crc32c_gb_per_s,
        median(&extra) / crc_ms_per_gb
    );
    rows.push(
        json!({"name": "verify=always: extra ms per GB read (1 MiB sequential)", "unit": "ms/GB",
        "runs": extra, "median": median(&extra), "reference": "CRC32C ms per GB (pktfs machine)",
        "reference_median": crc_ms_per_gb, "ratio": median(&extra) / crc_ms_per_gb,
        "always_gb_per_s": g("lib_seq_always"), "once_gb_per_s": g("lib_seq_once")}),
    );
    rows
}

/// The run as JSON under `a.out`, named by the time it ended.
fn write_json(a: &Args, machine: &pktfs_fs::media::machine::Machine, rows: Vec<Value>) {
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let stamp = Command::new("date")
        .args(["-u", "+%Y%m%dT%H%M%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let doc = json!({
        "bench": "direct", "machine": machine.to_json(), "commit": commit,
        "size_bytes": a.size, "runs": a.runs, "secs_per_part": a.secs,
        "rows": rows,
    });
    std::fs::create_dir_all(&a.out).unwrap();
    let path = a.out.join(format!("direct-{stamp}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    println!("\nwritten to {}", path.display());
}

//! A reader process for the direct-reading stress test
//! (tests/tests/direct_stress.rs): reads files of an image for a while and
//! checks every word it gets (`pktfs_tests::direct_words`), then prints
//! one JSON line of counts. Exits 1 at the first wrong byte.
//!
//!   direct_stress_reader lib IMAGE SECONDS SEED DIR...
//!       through pktfs-direct (read_at, read_with, handles kept open)
//!   direct_stress_reader fs MOUNTPOINT SECONDS SEED DIR...
//!       through the file system (pread and read), for the preload shim
//!
//! DIR: directories inside the image (or under the mountpoint) whose files
//! it reads.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use pktfs_tests::direct_words::check;

struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[derive(Default)]
struct Counts {
    reads: u64,
    bytes: u64,
    lends: u64,
    stale: u64,
    missing: u64,
    busy: u64,
    holder: u64,
    /// The first "through the holder" error, to say what it was.
    holder_why: String,
}

fn fail(what: String) -> ! {
    eprintln!("direct_stress_reader: WRONG: {what}");
    std::process::exit(1);
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 6 {
        eprintln!("usage: direct_stress_reader lib|fs IMAGE|MOUNT SECONDS SEED DIR...");
        std::process::exit(2);
    }
    let secs: u64 = a[3].parse().expect("seconds");
    let mut rng = Rng(a[4].parse::<u64>().expect("seed") | 1);
    let dirs = &a[5..];
    let end = Instant::now() + Duration::from_secs(secs);
    let mut c = Counts::default();
    match a[1].as_str() {
        "lib" => lib(&a[2], dirs, end, &mut rng, &mut c),
        "fs" => fs(&a[2], dirs, end, &mut rng, &mut c),
        m => panic!("unknown mode {m}"),
    }
    let v = serde_json::json!({"reads": c.reads, "bytes": c.bytes, "lends": c.lends,
        "stale": c.stale, "missing": c.missing, "busy": c.busy, "holder": c.holder,
        "holder_why": c.holder_why});
    println!("{v}");
}

fn lib(image: &str, dirs: &[String], end: Instant, rng: &mut Rng, c: &mut Counts) {
    use pktfs_direct::{Error, Image, Seg};
    let img = Image::open(image).unwrap_or_else(|e| fail(format!("open {image}: {e}")));
    let mut open: HashMap<String, pktfs_direct::File> = HashMap::new();
    while Instant::now() < end {
        let dir = &dirs[rng.next(dirs.len() as u64) as usize];
        let names = match img.read_dir(dir) {
            Ok(n) => n,
            Err(_) => continue,
        };
        if names.is_empty() {
            continue;
        }
        let e = &names[rng.next(names.len() as u64) as usize];
        let path = format!("{dir}/{}", String::from_utf8_lossy(&e.name));
        // Handles are kept across reads (and so across the holder's
        // changes), and dropped now and then.
        if rng.next(20) == 0 {
            open.remove(&path);
        }
        if !open.contains_key(&path) {
            match img.open_file(&path) {
                Ok(f) => {
                    open.insert(path.clone(), f);
                }
                Err(Error::NotFound(_) | Error::Stale(_) | Error::NotRegular(_)) => {
                    c.missing += 1;
                    continue;
                }
                Err(e) => fail(format!("open_file {path}: {e}")),
            }
        }
        let f = &open[&path];
        let size = f.len().unwrap_or(0);
        let off = rng.next(size + 4096);
        let len = 1 + rng.next(256 << 10) as usize;
        let r = if rng.next(8) == 0 {
            f.read_with(off, len as u64, |segs| {
                let mut v = Vec::new();
                for s in segs {
                    match *s {
                        Seg::Data(d) => v.extend_from_slice(d),
                        Seg::Zero(n) => v.resize(v.len() + n, 0),
                    }
                }
                v
            })
            .inspect(|_| c.lends += 1)
        } else {
            let mut b = vec![0xEEu8; len];
            f.read_at(&mut b, off).map(|n| {
                b.truncate(n);
                b
            })
        };
        match r {
            Ok(b) => {
                if let Err(w) = check(&b, off, None) {
                    fail(format!("{path} [{off}, +{}): {w}", b.len()));
                }
                c.reads += 1;
                c.bytes += b.len() as u64;
            }
            Err(Error::Stale(_) | Error::NotFound(_)) => {
                c.stale += 1;
                open.remove(&path);
            }
            Err(Error::Busy(_)) => c.busy += 1,
            // The holder's hold slots or connection slots were taken.
            Err(Error::Holder(why)) => {
                if c.holder == 0 {
                    c.holder_why = why;
                }
                c.holder += 1;
            }
            Err(e) => fail(format!("{path} [{off}, +{len}): {e}")),
        }
    }
}

fn fs(mount: &str, dirs: &[String], end: Instant, rng: &mut Rng, c: &mut Counts) {
    let mut open: HashMap<String, std::fs::File> = HashMap::new();
    while Instant::now() < end {
        let dir = format!("{mount}/{}", dirs[rng.next(dirs.len() as u64) as usize]);
        let names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(d) => d
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
            Err(_) => continue,
        };
        if names.is_empty() {
            continue;
        }
        let path = format!("{dir}/{}", names[rng.next(names.len() as u64) as usize]);
        if rng.next(20) == 0 {
            open.remove(&path);
        }
        if !open.contains_key(&path) {
            match std::fs::File::open(&path) {
                Ok(f) => {
                    open.insert(path.clone(), f);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    c.missing += 1;
                    continue;
                }
                Err(e) => fail(format!("open {path}: {e}")),
            }
        }
        let f = open.get_mut(&path).expect("just opened");
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        let off = rng.next(size + 4096);
        let len = 1 + rng.next(256 << 10) as usize;
        let mut b = vec![0xEEu8; len];
        // pread, or read at a position set by seek (the shim's other path).
        let r = if rng.next(4) == 0 {
            use std::io::Seek;
            f.seek(std::io::SeekFrom::Start(off))
                .and_then(|_| f.read(&mut b))
        } else {
            f.read_at(&mut b, off)
        };
        match r {
            Ok(n) => {
                b.truncate(n);
                if let Err(w) = check(&b, off, None) {
                    fail(format!("{path} [{off}, +{n}): {w}"));
                }
                c.reads += 1;
                c.bytes += n as u64;
            }
            Err(e) => fail(format!("{path} [{off}, +{len}): {e}")),
        }
    }
}

//! Direct readers attached to a pktfs server's image while it is measured:
//! `NETBENCH_DIRECT_READERS=N` makes `serve-pktfs` start N processes
//! (`netbench read-direct IMAGE`) that read every file of the 1 KiB PUTs'
//! directory (`/k`) straight from the mapping with pktfs-direct, over and
//! over, while the PUTs replace them. The holder's request path is held
//! to the same cost with readers attached as without (DIRECT.md: the
//! holder never waits for a reader); this is how a run shows it.
//!
//! The readers are processes of their own, so their CPU is not the
//! server's; on a 2-vCPU machine they take CPU from wrk and the server
//! alike, so req/s falls with them, and the server's own CPU per request
//! is what compares.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The environment variable that asks for readers.
pub const ENV: &str = "NETBENCH_DIRECT_READERS";

/// The reader processes of one server; closing their stdin (on drop) stops
/// them.
pub struct Readers(Vec<Child>);

/// Start as many readers of `image` as `NETBENCH_DIRECT_READERS` says
/// (none when it is unset or 0). A value that is not a number stops the
/// run, naming it.
pub fn attach(image: &Path) -> Readers {
    let n = match std::env::var(ENV) {
        Err(_) => 0,
        Ok(v) => v
            .parse::<usize>()
            .unwrap_or_else(|_| crate::fail(&format!("{ENV}={v}: a number of readers"))),
    };
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| crate::fail(&format!("netbench's own path: {e}")));
    let kids = (0..n)
        .map(|_| {
            Command::new(&exe)
                .arg("read-direct")
                .arg(image)
                .env_remove(ENV)
                .stdin(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| crate::fail(&format!("a direct reader: {e}")))
        })
        .collect::<Vec<_>>();
    if n > 0 {
        eprintln!("netbench: {n} direct reader(s) on {}", image.display());
    }
    Readers(kids)
}

impl Drop for Readers {
    fn drop(&mut self) {
        for k in &mut self.0 {
            drop(k.stdin.take());
        }
        for k in &mut self.0 {
            let _ = k.wait();
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct ReadDirectArgs {
    /// The image a server holds.
    pub image: PathBuf,
}

/// `netbench read-direct IMAGE`: read every file under `/k` from the
/// mapping, a pass at a time with a millisecond between passes, until
/// stdin closes; then print the reads done and the reads refused (a file
/// replaced or removed under the read: the library says so, it never
/// returns wrong bytes).
pub fn read_direct(a: &ReadDirectArgs) {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        s.store(true, Ordering::Relaxed);
    });
    let img = loop {
        match pktfs_direct::Image::open(&a.image) {
            Ok(i) => break i,
            Err(_) if !stop.load(Ordering::Relaxed) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => crate::fail(&format!("read-direct {}: {e}", a.image.display())),
        }
    };
    let mut buf = vec![0u8; 64 << 10];
    let (mut reads, mut refused) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        if let Ok(entries) = img.read_dir("/k") {
            for e in entries {
                let path = format!("/k/{}", String::from_utf8_lossy(&e.name));
                match img.open_file(&path).and_then(|f| f.read_at(&mut buf, 0)) {
                    Ok(_) => reads += 1,
                    Err(_) => refused += 1,
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("read-direct: {reads} reads, {refused} refused (replaced under the read)");
}

//! Large PUT and GET (`--size-mib`, one fresh connection each, median of
//! `--reps`, servers interleaved within each repetition) against servers
//! in this process, plus nginx when it runs. CPU is client + server: this
//! process's CPU time, and nginx's own (from /proc) for its rows.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use pktfs_fs::media::{MapOptions, PersistChoice, Pm};

use crate::baseline::{copy_file, copy_windows, start_baseline, Base, Baseline};
use crate::client::{get_big, put_big};
use crate::load::median;
use crate::pktfs_server::{image_file, start_pktfs, PktfsServer, PktfsSpec};
use crate::results::Results;

/// CPU time of this whole process (all threads, also finished ones), s.
fn cpu_s() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// A server of the large transfers; `pid` when it is another process
/// whose CPU time counts too.
#[derive(Clone)]
struct Target {
    name: String,
    addr: SocketAddr,
    pid: Option<u32>,
}

fn client_server_cpu_s(t: &Target) -> f64 {
    cpu_s() + t.pid.map_or(0.0, crate::child::tree_cpu_s)
}

pub struct Opts<'a> {
    pub shm: &'a Path,
    pub ext4_dir: &'a Path,
    pub size: u64,
    pub reps: usize,
    /// The pktfs servers (name, persist mode, io mode) for PUT and GET.
    pub pktfs: &'a [PktfsSpec],
    pub nginx: Option<(SocketAddr, u32)>,
    pub put: bool,
    pub get: bool,
}

pub fn run(o: &Opts<'_>, results: &mut Results) {
    let stop = Arc::new(AtomicBool::new(false));
    let image_bytes = o.size * 3 + (64 << 20);
    let specs = with_no_persister_rows(o.pktfs);
    let files = Files::allocate(o, &specs, image_bytes);
    let bases = start_baselines(o, &files, &stop);
    let servers: Vec<PktfsServer> = specs
        .iter()
        .map(|s| start_pktfs(o.shm, s, image_bytes).unwrap_or_else(|e| crate::fail(&e)))
        .collect();
    for s in &servers {
        println!("{} (large transfers, in this process): io {}", s.name, s.io);
    }
    let fresh_child = o.put.then(|| spawn_recv_fresh(&files));
    if let Some(fresh) = &fresh_child {
        put_rows(o, &bases, fresh, &servers, results);
    }
    if o.get {
        get_rows(o, &bases.sendfile, &servers, results);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(servers);
}

/// The pktfs servers of `pktfs`, and for the PUT each threads server once
/// more without its persister thread: the threaded transport hands a large
/// body to a persister thread (the default) or keeps it on the
/// connection's thread. The io_uring loops never use one (their pieces are
/// made on the loop), so they get no such row.
fn with_no_persister_rows(pktfs: &[PktfsSpec]) -> Vec<PktfsSpec> {
    let mut specs: Vec<PktfsSpec> = pktfs.to_vec();
    for s in pktfs {
        if s.io == pktfs_netpath::IoMode::Threads {
            let mut s = s.clone();
            s.name = format!("{}, no persister thread", s.name);
            s.persister = false;
            specs.push(s);
        }
    }
    specs
}

/// The baselines' files on /dev/shm.
struct Files {
    /// copy+clwb's.
    copy: PathBuf,
    /// sendfile's.
    sendfile: PathBuf,
    /// recv+clwb, fresh lines: its directory and MiB.
    fresh_dir: PathBuf,
    fresh_mib: u64,
}

impl Files {
    /// Every large file first, taking memory in turns (crate::interleave):
    /// the baselines' and each pktfs server's image.
    fn allocate(o: &Opts<'_>, specs: &[PktfsSpec], image_bytes: u64) -> Files {
        let size = o.size;
        let f = Files {
            copy: o.shm.join("copy.dat"),
            sendfile: o.shm.join("sendfile.dat"),
            fresh_dir: o.shm.join("recv-fresh"),
            fresh_mib: (3 * (size >> 20)).max(1),
        };
        let mut files = vec![
            (f.copy.clone(), size + (8 << 20)),
            (f.sendfile.clone(), size),
        ];
        if o.put {
            files.push((f.fresh_dir.join("recv-fresh.dat"), f.fresh_mib << 20));
        }
        files.extend(specs.iter().map(|s| image_file(o.shm, s, image_bytes)));
        crate::interleave::allocate(&files).expect("allocate the large transfers' files");
        f
    }
}

/// The baselines served by this process.
struct Baselines {
    netonly: Target,
    copy: Target,
    ext4: Target,
    sendfile: Target,
}

/// Start the baselines in this process: network-only, copy+clwb (its
/// file cut into windows), ext4+fdatasync and sendfile (its file written
/// and mapped first).
fn start_baselines(o: &Opts<'_>, files: &Files, stop: &Arc<AtomicBool>) -> Baselines {
    let size = o.size;
    let copy_pm = copy_windows(copy_file(&files.copy, size + (8 << 20)));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&files.sendfile)
            .expect("sendfile file");
        let chunk = vec![0x5au8; 1 << 20];
        for _ in 0..(size >> 20) {
            f.write_all(&chunk).expect("write");
        }
    }
    let sf_pm = Arc::new(
        Pm::open(
            &files.sendfile,
            &MapOptions {
                read_only: true,
                ..Default::default()
            },
        )
        .expect("map sendfile file"),
    );
    sf_pm.wait_populated();
    let mk = |kind, pm, copy| {
        Arc::new(Baseline {
            kind,
            pm,
            copy,
            ext4_dir: o.ext4_dir.to_path_buf(),
            stop: stop.clone(),
        })
    };
    let base = |kind: Base, addr| Target {
        name: kind.name().into(),
        addr,
        pid: None,
    };
    let netonly = base(Base::NetOnly, start_baseline(mk(Base::NetOnly, None, None)));
    let copy = base(
        Base::Copy,
        start_baseline(mk(Base::Copy, None, Some(copy_pm))),
    );
    let ext4 = base(Base::Ext4, start_baseline(mk(Base::Ext4, None, None)));
    let sendfile = base(
        Base::Sendfile,
        start_baseline(mk(Base::Sendfile, Some(sf_pm), None)),
    );
    Baselines {
        netonly,
        copy,
        ext4,
        sendfile,
    }
}

/// The body received straight into lines last written three transfers
/// ago (a window of 3x the size, wrapping), as a file system's free
/// buffers are, and written back: pktfs's one copy and clwb with no CRC,
/// no records and no commit, the floor of this design on the machine at
/// hand. (The copy+clwb row's 2 MiB window stays in cache, so it
/// measures the write-back of hot lines, not what storing a stream
/// costs.) For the PUT only; a process of its own (`netbench
/// serve-baseline "recv+clwb, fresh lines"`, which can also be run by
/// hand) on the file allocated for it.
fn spawn_recv_fresh(files: &Files) -> crate::child::ChildServer {
    crate::child::ChildServer::spawn(
        Base::RecvFresh.name(),
        &[
            "serve-baseline".to_string(),
            Base::RecvFresh.name().to_string(),
            "--port".into(),
            "0".into(),
            "--fresh-mib".into(),
            files.fresh_mib.to_string(),
            "--dir".into(),
            files.fresh_dir.display().to_string(),
            "--until-eof".into(),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The large PUT against every server, `o.reps` rounds: GB/s and CPU
/// (client + server) per byte, medians.
fn put_rows(
    o: &Opts<'_>,
    bases: &Baselines,
    fresh: &crate::child::ChildServer,
    servers: &[PktfsServer],
    results: &mut Results,
) {
    let size = o.size;
    let recv_fresh = Target {
        name: fresh.name.clone(),
        addr: fresh.addr,
        pid: Some(fresh.pid()),
    };
    let mut puts = vec![bases.netonly.clone(), bases.copy.clone(), recv_fresh];
    puts.extend(servers.iter().map(|s| Target {
        name: s.name.clone(),
        addr: s.addr,
        pid: None,
    }));
    if let Some((addr, pid)) = o.nginx {
        puts.push(Target {
            name: "nginx".into(),
            addr,
            pid: Some(pid),
        });
    }
    puts.push(bases.ext4.clone()); // last: its write-back must not overlap the others
    let chunk = vec![0xa5u8; 1 << 20];
    let mut by: Vec<Vec<f64>> = vec![Vec::new(); puts.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); puts.len()];
    // ext4 stays last; the others change places and neighbours every
    // repetition (`crate::order` says why); and the memory this VM
    // gives moves a lot within a minute (`pktfs machine`'s copy into
    // cold lines varies widely within one run).
    let rotating = puts.len() - 1;
    for r in 0..o.reps {
        for k in crate::order::order(puts.len(), rotating, r) {
            let t = &puts[k];
            let c0 = client_server_cpu_s(t);
            let dt = put_big(t.addr, "/big", size, &chunk);
            cpu[k].push((client_server_cpu_s(t) - c0) / size as f64 * 1e9);
            by[k].push(size as f64 / dt / 1e9);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    print_reps("PUT big", puts.iter().map(|t| t.name.as_str()), &by);
    for (k, t) in puts.iter().enumerate() {
        results.push((
            "PUT big".into(),
            t.name.clone(),
            median(by[k].clone()),
            "GB/s".into(),
        ));
    }
    for (k, t) in puts.iter().enumerate() {
        results.push((
            "PUT big: CPU (client+server)".into(),
            t.name.clone(),
            median(cpu[k].clone()),
            "ns/B".into(),
        ));
    }
}

/// The large GET from sendfile and from the servers as configured (the
/// first `o.pktfs.len()`), each holding the file first, `o.reps` rounds:
/// GB/s and CPU per byte, medians.
fn get_rows(o: &Opts<'_>, sendfile: &Target, servers: &[PktfsServer], results: &mut Results) {
    let size = o.size;
    let chunk = vec![0x5au8; 1 << 20];
    let with = &servers[..o.pktfs.len()];
    for s in with {
        put_big(s.addr, "/getme", size, &chunk);
    }
    // The received records start verified (their CRCs were computed as
    // they arrived), so the plain rows pay no checksum; the
    // "verify=always" row (the first clwb server) checks every record
    // on every GET, as a GET after a restart does once (verify=once).
    let mut gets: Vec<(String, SocketAddr, &str, Option<&Arc<pktfs_fs::Volume>>)> =
        vec![(sendfile.name.clone(), sendfile.addr, "/x", None)];
    for s in with {
        gets.push((s.name.clone(), s.addr, "/getme", None));
    }
    if let Some(s) = with.iter().find(|s| {
        o.pktfs
            .iter()
            .any(|p| p.name == s.name && p.persist == PersistChoice::Clwb)
    }) {
        gets.push((
            format!("{}, verify=always", s.name),
            s.addr,
            "/getme",
            Some(&s.vol),
        ));
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut by: Vec<Vec<f64>> = vec![Vec::new(); gets.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); gets.len()];
    for r in 0..o.reps {
        for k in crate::order::order(gets.len(), gets.len(), r) {
            let (_, a, p, always) = &gets[k];
            if let Some(v) = always {
                v.set_verify_mode(pktfs_fs::VerifyMode::Always);
            }
            let c0 = cpu_s();
            let (dt, n) = get_big(*a, p, &mut buf);
            cpu[k].push((cpu_s() - c0) / n as f64 * 1e9);
            by[k].push(n as f64 / dt / 1e9);
            if let Some(v) = always {
                v.set_verify_mode(pktfs_fs::VerifyMode::Once);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    print_reps("GET big", gets.iter().map(|g| g.0.as_str()), &by);
    for (k, (n, _, _, _)) in gets.iter().enumerate() {
        results.push((
            "GET big".into(),
            n.clone(),
            median(by[k].clone()),
            "GB/s".into(),
        ));
    }
    for (k, (n, _, _, _)) in gets.iter().enumerate() {
        results.push((
            "GET big: CPU (client+server)".into(),
            n.clone(),
            median(cpu[k].clone()),
            "ns/B".into(),
        ));
    }
}

/// Every repetition's GB/s, in the order run (servers interleaved within a
/// repetition), so that a median hit by a slow spell of the host can be
/// told from a server that is slow in every repetition.
fn print_reps<'a>(what: &str, names: impl Iterator<Item = &'a str>, by: &[Vec<f64>]) {
    for (name, reps) in names.zip(by) {
        let list: Vec<String> = reps.iter().map(|r| format!("{r:.2}")).collect();
        println!("{what}, {name}: GB/s by repetition: {}", list.join(", "));
    }
}

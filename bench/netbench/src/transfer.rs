//! Large PUT and GET (`--size-mib`, one fresh connection each, median of
//! `--reps`, servers interleaved within each repetition) against servers
//! in this process, plus nginx when it runs. CPU is client + server: this
//! process's CPU time, and nginx's own (from /proc) for its rows.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
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
    let size = o.size;
    let stop = Arc::new(AtomicBool::new(false));
    let image_bytes = size * 3 + (64 << 20);
    // The threaded transport hands a large body to a persister thread (the
    // default) or keeps it on the connection's thread: for the PUT, each
    // threads server also runs without it. The io_uring loops never use
    // one (their pieces are made on the loop), so they get no such row.
    let mut specs: Vec<PktfsSpec> = o.pktfs.to_vec();
    for s in o.pktfs {
        if s.io == pktfs_netpath::IoMode::Threads {
            let mut s = s.clone();
            s.name = format!("{}, no persister thread", s.name);
            s.persister = false;
            specs.push(s);
        }
    }
    // Every large file first, taking memory in turns (crate::interleave).
    let copy_path = o.shm.join("copy.dat");
    let sf_file = o.shm.join("sendfile.dat");
    let fresh_dir = o.shm.join("recv-fresh");
    let fresh_mib = (3 * (size >> 20)).max(1);
    let mut files = vec![
        (copy_path.clone(), size + (8 << 20)),
        (sf_file.clone(), size),
    ];
    if o.put {
        files.push((fresh_dir.join("recv-fresh.dat"), fresh_mib << 20));
    }
    files.extend(specs.iter().map(|s| image_file(o.shm, s, image_bytes)));
    crate::interleave::allocate(&files).expect("allocate the large transfers' files");
    let copy_pm = copy_windows(copy_file(&copy_path, size + (8 << 20)));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&sf_file)
            .expect("sendfile file");
        let chunk = vec![0x5au8; 1 << 20];
        for _ in 0..(size >> 20) {
            f.write_all(&chunk).expect("write");
        }
    }
    let sf_pm = Arc::new(
        Pm::open(
            &sf_file,
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
    let servers: Vec<PktfsServer> = specs
        .iter()
        .map(|s| start_pktfs(o.shm, s, image_bytes).unwrap_or_else(|e| crate::fail(&e)))
        .collect();
    for s in &servers {
        println!("{} (large transfers, in this process): io {}", s.name, s.io);
    }
    // The body received straight into lines last written three transfers
    // ago (a window of 3x the size, wrapping), as a file system's free
    // buffers are, and written back: pktfs's one copy and clwb with no CRC,
    // no records and no commit, the floor of this design on the machine at
    // hand. (The copy+clwb row's 2 MiB window stays in cache, so it
    // measures the write-back of hot lines, not what storing a stream
    // costs.) For the PUT only; a process of its own (`netbench
    // serve-baseline "recv+clwb, fresh lines"`, which can also be run by
    // hand) on the file allocated above.
    let fresh_child = o.put.then(|| {
        crate::child::ChildServer::spawn(
            Base::RecvFresh.name(),
            &[
                "serve-baseline".to_string(),
                Base::RecvFresh.name().to_string(),
                "--port".into(),
                "0".into(),
                "--fresh-mib".into(),
                fresh_mib.to_string(),
                "--dir".into(),
                fresh_dir.display().to_string(),
                "--until-eof".into(),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"))
    });
    let pk = |s: &PktfsServer| Target {
        name: s.name.clone(),
        addr: s.addr,
        pid: None,
    };

    if o.put {
        let fresh = fresh_child.as_ref().expect("started for the PUT");
        let recv_fresh = Target {
            name: fresh.name.clone(),
            addr: fresh.addr,
            pid: Some(fresh.pid()),
        };
        let mut puts = vec![netonly, copy, recv_fresh];
        puts.extend(servers.iter().map(pk));
        if let Some((addr, pid)) = o.nginx {
            puts.push(Target {
                name: "nginx".into(),
                addr,
                pid: Some(pid),
            });
        }
        puts.push(ext4); // last: its write-back must not overlap the others
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
    if o.get {
        let chunk = vec![0x5au8; 1 << 20];
        // The servers as configured (the first o.pktfs.len()).
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
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(servers);
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

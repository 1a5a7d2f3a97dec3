//! The pktfs netpath server under test: in this process (large PUT/GET,
//! where the verify mode is switched between requests) or as a child
//! process of its own (`--serve-pktfs`, the small-PUT load, where its CPU
//! time is read from /proc).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pktfs_fs::media::PersistChoice;
use pktfs_fs::{FormatOptions, OpenOptions, Volume};

/// How a pktfs server is set up.
#[derive(Clone, Debug)]
pub struct PktfsSpec {
    pub name: String,
    pub persist: PersistChoice,
    pub io: pktfs_netpath::IoMode,
    /// With the persister thread for large bodies (the default).
    pub persister: bool,
    pub max_connections: usize,
    /// io_uring event loops (0: the server's default, one per two cores).
    pub loops: usize,
    /// The loops' busy polling, microseconds (None: the server's default).
    pub busy_poll_us: Option<u64>,
    /// The loops' ring: entries and bytes per entry (None: the server's).
    pub ring_entries: Option<u16>,
    pub ring_entry_bytes: Option<u32>,
}

impl PktfsSpec {
    pub fn new(name: &str, persist: PersistChoice, io: pktfs_netpath::IoMode) -> PktfsSpec {
        PktfsSpec {
            name: name.into(),
            persist,
            io,
            persister: true,
            max_connections: pktfs_netpath::Config::THREADS_DEFAULT_MAX,
            loops: 0,
            busy_poll_us: None,
            ring_entries: None,
            ring_entry_bytes: None,
        }
    }
}

#[derive(Debug)]
pub struct PktfsServer {
    pub name: String,
    pub addr: SocketAddr,
    pub vol: Arc<Volume>,
    /// How it serves its connections (`Services::io_summary`).
    pub io: String,
    _svc: pktfs_netpath::Services,
}

/// Whether io_uring event loops can run here; why not, when not.
pub fn uring_usable() -> Result<(), String> {
    pktfs_netpath::loops::choose(pktfs_netpath::IoMode::Uring, 0)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Where [`start_pktfs`] puts `spec`'s image in `dir`, and its length for
/// an `image_bytes` request.
pub fn image_file(dir: &Path, spec: &PktfsSpec, image_bytes: u64) -> (PathBuf, u64) {
    (
        dir.join(format!("{}.img", spec.name).replace([' ', ','], "-")),
        pktfs_layout::GeometryParams::for_size(image_bytes).image_len_bytes,
    )
}

/// Format an image of `image_bytes` in `dir` and serve it over HTTP on a
/// free loopback port. An image that cannot be made or served (no room
/// left in /dev/shm, a persist mode the CPU lacks) is an error naming the
/// server and the cause.
pub fn start_pktfs(dir: &Path, spec: &PktfsSpec, image_bytes: u64) -> Result<PktfsServer, String> {
    let (img, _) = image_file(dir, spec, image_bytes);
    let what = |step: &str, e: &dyn std::fmt::Display| format!("{}: {step}: {e}", spec.name);
    Volume::format(
        &img,
        &FormatOptions {
            params: pktfs_layout::GeometryParams::for_size(image_bytes),
            label: None,
        },
        &mut |_, _| {},
    )
    .map_err(|e| what("cannot format its image", &e))?;
    let vol = Arc::new(
        Volume::open(
            &img,
            &OpenOptions {
                persist: spec.persist,
                ..Default::default()
            },
        )
        .map_err(|e| what("cannot open its image", &e))?,
    );
    let mut cfg = pktfs_netpath::Config {
        http_listen: Some("127.0.0.1:0".parse().expect("addr")),
        io: spec.io,
        max_connections: Some(spec.max_connections),
        loops: spec.loops,
        ..Default::default()
    };
    if let Some(us) = spec.busy_poll_us {
        cfg.busy_poll = std::time::Duration::from_micros(us);
    }
    if let Some(n) = spec.ring_entries {
        cfg.ring_entries = n;
    }
    if let Some(b) = spec.ring_entry_bytes {
        cfg.ring_entry_bytes = b;
    }
    if !spec.persister {
        cfg.persister_min = u64::MAX;
    }
    // Measure nothing while the image is still being pre-faulted (it
    // zeroes pages on the other core, and the first copies into pages it
    // has not reached take a fault each).
    vol.pm().wait_populated();
    let svc = pktfs_netpath::Services::start(vol.clone(), cfg, None)
        .map_err(|e| what("cannot serve", &e))?;
    Ok(PktfsServer {
        name: spec.name.clone(),
        addr: svc.http_addr().expect("http"),
        vol,
        io: svc.io_summary(),
        _svc: svc,
    })
}

/// The arguments that make a netbench child serve `spec`.
pub fn child_args(spec: &PktfsSpec, dir: &Path, image_bytes: u64) -> Vec<String> {
    let persist = spec.persist.to_string();
    let mut args: Vec<String> = [
        "serve-pktfs",
        &spec.name,
        "--persist",
        &persist,
        "--io",
        &spec.io.to_string(),
        "--max-connections",
        &spec.max_connections.to_string(),
        "--loops",
        &spec.loops.to_string(),
        "--image-mib",
        &(image_bytes >> 20).to_string(),
        "--dir",
        &dir.display().to_string(),
        "--until-eof",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(us) = spec.busy_poll_us {
        args.push("--busy-poll-us".into());
        args.push(us.to_string());
    }
    if !spec.persister {
        args.push("--no-persister".into());
    }
    if let Some(n) = spec.ring_entries {
        args.push("--ring-entries".into());
        args.push(n.to_string());
    }
    if let Some(b) = spec.ring_entry_bytes {
        args.push("--ring-entry-kib".into());
        args.push((b / 1024).to_string());
    }
    args
}

/// `netbench serve-pktfs NAME --persist P --io M --max-connections N
/// --loops N --image-mib N --dir D --until-eof`: a pktfs server as
/// netbench's child, until its stdin closes.
pub fn serve_pktfs(a: &crate::cli::PktfsArgs) {
    let name = a.name.as_str();
    let mut spec = PktfsSpec::new(name, a.persist, a.io);
    spec.max_connections = a.max_connections as usize;
    spec.loops = a.loops as usize;
    spec.busy_poll_us = a.busy_poll_us;
    spec.persister = !a.no_persister;
    spec.ring_entries = a.ring_entries;
    spec.ring_entry_bytes = a.ring_entry_kib.map(|k| k.saturating_mul(1024));
    let image_bytes = a.image_mib << 20;
    let dir = crate::child::ChildDir::new(a.dir.clone());
    let s = match start_pktfs(dir.path(), &spec, image_bytes) {
        Ok(s) => s,
        Err(e) => {
            let (img, _) = image_file(dir.path(), &spec, image_bytes);
            dir.remove([img]);
            crate::fail(&e);
        }
    };
    let (img, _) = image_file(dir.path(), &spec, image_bytes);
    let readers = crate::direct_readers::attach(&img);
    crate::child::announce(name, s.addr, &s.io);
    crate::child::wait_for_parent();
    drop(readers);
    drop(s);
    let (img, _) = image_file(dir.path(), &spec, image_bytes);
    dir.remove([img]);
}

//! The FUSE mount: a thin adapter that turns kernel requests into
//! [`Volume`] calls (see `ops.rs`), and the session around it. The Volume
//! (pktfs-fs) knows nothing of FUSE; this crate is the only one that links
//! fuser, so the servers and the tier build without it.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use pktfs_fs::{Volume, OpenOptions};
//! # use pktfs_fuse::{mount, MountOptions};
//! let vol = Arc::new(Volume::open("img".as_ref(), &OpenOptions::default())?);
//! let h = mount(vol.clone(), "/mnt".as_ref(), &MountOptions::default())?;
//! // ... the mount is live; other services may share `vol` and tell the
//! // kernel about their changes through `h.notifier()` ...
//! h.unmount()?;
//! h.join()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Choices:
//! - the kernel checks permissions (`default_permissions`, always on),
//!   POSIX ACLs included (FUSE_POSIX_ACL; the Volume keeps ACLs and modes
//!   in step and applies the umask or a default ACL to new inodes);
//! - no writeback cache: a `write()` that returned is on the media;
//! - reads may be served from the kernel page cache (`FOPEN_KEEP_CACHE`,
//!   dropped when a refreshed mtime or size differs); a write through the
//!   mount updates the cache, so a read after a write sees the new data;
//! - one lookup reference from the kernel = one [`Volume::pin`], released by
//!   `forget`, so unlinked files stay readable while open.

mod dir;
mod ops;
mod state;
#[cfg(test)]
mod tests;
mod translate;

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use fuser::MountOption;
use fuser::{Config, INodeNo, Notifier, Session, SessionACL, SessionUnmounter};

use pktfs_direct::mounts::unescape_mountinfo;
use pktfs_fs::media::PersistChoice;
use pktfs_fs::{FsError, Result, Volume};

pub use ops::CHAIN_XATTR;

/// When a read or a directory listing updates atime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtimeMode {
    /// Never (`noatime`).
    Never,
    /// When atime is not newer than mtime or ctime, or a day old
    /// (`relatime`, the default, as on Linux file systems).
    Relative,
    /// Every time (`strictatime`, `atime`): each read is a small commit.
    Strict,
}

/// Options for a mount, as `-o a,b=c` gives them.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Mount read-only (`ro`); the Volume must be opened read-only too.
    pub read_only: bool,
    /// `allow_other`: every user may use the mount (needs `user_allow_other`
    /// in /etc/fuse.conf for an unprivileged mount).
    pub allow_other: bool,
    /// `allow_root`: the mounting user and root.
    pub allow_root: bool,
    /// `auto_unmount` (through fusermount3).
    pub auto_unmount: bool,
    /// `fsname=`: the source shown in /proc/mounts.
    pub fsname: Option<String>,
    /// `subtype=`: the type is shown as `fuse.<subtype>` (default `pktfs`).
    pub subtype: String,
    /// Kernel mount flags: dev/nodev, suid/nosuid, exec/noexec,
    /// atime/noatime, sync/async, dirsync.
    pub flags: Vec<MountOption>,
    /// Worker threads (`threads=N`).
    pub threads: usize,
    /// Largest write request (`max_write=`), bytes.
    pub max_write: u32,
    /// Kernel read-ahead (`max_readahead=`), bytes.
    pub max_readahead: u32,
    /// How long the kernel may cache attributes and names
    /// (`attr_timeout=`, `entry_timeout=`, seconds; default 30). Changes
    /// through the mount keep the caches right; whoever changes the Volume
    /// behind it must call [`MountHandle::inval_inode`] / `inval_entry`.
    pub attr_ttl: Duration,
    pub entry_ttl: Duration,
    /// Keep the page cache across opens (`kernel_cache`, default; turn off
    /// with `no_kernel_cache`).
    pub keep_cache: bool,
    /// Open files with FOPEN_DIRECT_IO (`direct_io`, default; turn off with
    /// `no_direct_io`): reads and writes go straight between the caller's
    /// buffer and the daemon, skipping the kernel page cache, the way a DAX
    /// file system skips it. One copy fewer each way; mmap still works
    /// (FUSE_DIRECT_IO_ALLOW_MMAP).
    pub direct_io: bool,
    /// When reads and listings update atime: `relatime` (default),
    /// `strictatime`/`atime` (always) or `noatime` (never). FUSE leaves
    /// atime to the daemon, so this is pktfs's own policy, not the kernel's.
    pub atime: AtimeMode,
    /// How the image is made durable (`persist=auto|clwb|clflushopt|clflush|msync|eadr`); for
    /// whoever opens the Volume.
    pub persist: PersistChoice,
    /// When reads check payload checksums (`verify=once|always|off`); for
    /// whoever opens the Volume.
    pub verify: pktfs_fs::VerifyMode,
}

impl Default for MountOptions {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2);
        MountOptions {
            read_only: false,
            allow_other: false,
            allow_root: false,
            auto_unmount: false,
            fsname: None,
            subtype: "pktfs".into(),
            flags: Vec::new(),
            threads: cpus.clamp(2, 8),
            max_write: 1 << 20,
            max_readahead: 1 << 20,
            attr_ttl: Duration::from_secs(30),
            entry_ttl: Duration::from_secs(30),
            keep_cache: true,
            direct_io: true,
            atime: AtimeMode::Relative,
            persist: PersistChoice::Auto,
            verify: pktfs_fs::VerifyMode::Once,
        }
    }
}

impl MountOptions {
    /// The option list for fusermount3.
    fn fusermount_options(&self, fallback_fsname: &str) -> String {
        let mut v = vec![
            format!(
                "fsname={}",
                escape_opt(self.fsname.as_deref().unwrap_or(fallback_fsname))
            ),
            format!("subtype={}", escape_opt(&self.subtype)),
            "default_permissions".to_string(),
            if self.read_only { "ro" } else { "rw" }.to_string(),
        ];
        for f in &self.flags {
            v.push(
                match f {
                    MountOption::Dev => "dev",
                    MountOption::NoDev => "nodev",
                    MountOption::Suid => "suid",
                    MountOption::NoSuid => "nosuid",
                    MountOption::Exec => "exec",
                    MountOption::NoExec => "noexec",
                    MountOption::Atime => "atime",
                    MountOption::NoAtime => "noatime",
                    MountOption::Sync => "sync",
                    MountOption::Async => "async",
                    MountOption::DirSync => "dirsync",
                    _ => continue,
                }
                .to_string(),
            );
        }
        if self.allow_other || self.allow_root {
            // fusermount3 knows allow_other; the session enforces allow_root.
            v.push("allow_other".into());
        }
        v.join(",")
    }

    fn fuser_config(&self, fallback_fsname: &str) -> Config {
        let mut c = Config::default();
        let mut m = vec![
            MountOption::FSName(
                self.fsname
                    .clone()
                    .unwrap_or_else(|| fallback_fsname.to_string()),
            ),
            // As a kernel option, so the direct mount shows fuse.<subtype>
            // too (fuser passes Subtype only to fusermount).
            MountOption::CUSTOM(format!("subtype={}", self.subtype)),
            MountOption::DefaultPermissions,
        ];
        m.push(if self.read_only {
            MountOption::RO
        } else {
            MountOption::RW
        });
        if self.auto_unmount {
            m.push(MountOption::AutoUnmount);
        }
        m.extend(self.flags.iter().cloned());
        // Later flags win, as with mount(8).
        let mut seen = Vec::new();
        for f in m.into_iter().rev() {
            let clash = |a: &MountOption, b: &MountOption| {
                use MountOption::*;
                matches!(
                    (a, b),
                    (Dev, NoDev)
                        | (NoDev, Dev)
                        | (Suid, NoSuid)
                        | (NoSuid, Suid)
                        | (Exec, NoExec)
                        | (NoExec, Exec)
                        | (Atime, NoAtime)
                        | (NoAtime, Atime)
                        | (Sync, Async)
                        | (Async, Sync)
                ) || a == b
            };
            if !seen.iter().any(|s| clash(s, &f)) {
                seen.push(f);
            }
        }
        seen.reverse();
        c.mount_options = seen;
        c.acl = if self.allow_other {
            SessionACL::All
        } else if self.allow_root {
            SessionACL::RootAndOwner
        } else {
            SessionACL::Owner
        };
        c.n_threads = Some(self.threads.max(1));
        c.clone_fd = self.threads > 1;
        c
    }
}

/// Unmounts a live mount; cheap to clone and usable from any thread (a
/// signal handler thread, another service).
#[derive(Clone, Debug)]
pub struct Unmounter {
    /// fuser's unmounter for a mount it made; `None` for a mount made
    /// through fusermount3 here (unmounted with `fusermount3 -u`).
    inner: Option<Arc<Mutex<SessionUnmounter>>>,
    mountpoint: PathBuf,
}

impl Unmounter {
    /// Unmount. If the mount is busy, detach it lazily (`umount -l`): it
    /// disappears from the namespace now and the session ends when the
    /// last open file on it is closed.
    pub fn unmount(&self) -> io::Result<()> {
        let Some(inner) = &self.inner else {
            if !is_mounted(&self.mountpoint) {
                return Ok(());
            }
            return fusermount_u(&self.mountpoint, false)
                .or_else(|_| fusermount_u(&self.mountpoint, true));
        };
        let r = inner.lock().unwrap_or_else(|e| e.into_inner()).unmount();
        match r {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => lazy_detach(&self.mountpoint),
            r => r,
        }
    }
}

/// Whether `mp` is a mount point in this mount namespace.
fn is_mounted(mp: &Path) -> bool {
    let Some(want) = mp.to_str() else {
        return false;
    };
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|s| {
            s.lines()
                .any(|l| l.split(' ').nth(4).map(unescape_mountinfo).as_deref() == Some(want))
        })
        .unwrap_or(false)
}

fn fusermount_u(mp: &Path, lazy: bool) -> io::Result<()> {
    let mut c = Command::new("fusermount3");
    c.arg("-u");
    if lazy {
        c.arg("-z");
    }
    let out = c.arg("--").arg(mp).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "fusermount3 -u: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn lazy_detach(mp: &Path) -> io::Result<()> {
    if nix::unistd::geteuid().is_root() {
        return nix::mount::umount2(mp, nix::mount::MntFlags::MNT_DETACH).map_err(io::Error::from);
    }
    fusermount_u(mp, true)
}

/// Set the read-ahead of the mount's backing device info (root only).
fn set_read_ahead(mp: &Path, kib: u32) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(mp)?.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    std::fs::write(
        format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb"),
        kib.max(4).to_string(),
    )
}

/// Mount through the setuid fusermount3 and take the /dev/fuse descriptor
/// it passes back: the unprivileged path. (fuser's own fallback to
/// fusermount3 first opens /dev/fuse itself, which fails where /dev/fuse
/// is root-only.)
fn fusermount(mp: &Path, options: &str) -> io::Result<std::os::fd::OwnedFd> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    use std::os::fd::AsRawFd;
    // fusermount3 inherits its end (no close-on-exec); ours is marked
    // close-on-exec at once.
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::empty(),
    )?;
    nix::fcntl::fcntl(
        &ours,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )?;
    let child = Command::new("fusermount3")
        .arg("-o")
        .arg(options)
        .arg("--")
        .arg(mp)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("fusermount3: {e}")))?;
    drop(theirs);
    let fd = recv_fd(&ours);
    drop(ours);
    let out = child.wait_with_output()?;
    match fd {
        Ok(fd) => Ok(fd),
        Err(_) => {
            let msg = String::from_utf8_lossy(&out.stderr);
            Err(io::Error::other(format!(
                "fusermount3: {}",
                msg.trim().trim_start_matches("fusermount3: ")
            )))
        }
    }
}

/// Receive the one descriptor fusermount3 sends with SCM_RIGHTS and own
/// it; any extra descriptors in the message are closed.
fn recv_fd(sock: &std::os::fd::OwnedFd) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    use std::mem::MaybeUninit;
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let msg = loop {
        match rustix::net::recvmsg(
            sock,
            &mut [io::IoSliceMut::new(&mut byte)],
            &mut cmsg,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(m) => break m,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    let mut fds = Vec::new();
    for m in cmsg.drain() {
        if let RecvAncillaryMessage::ScmRights(passed) = m {
            fds.extend(passed);
        }
    }
    if msg.bytes == 0 {
        fds.clear();
    }
    // Any extra descriptors are closed as `fds` drops.
    fds.into_iter()
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no descriptor received"))
}

/// An option value for fusermount3's comma-separated list.
fn escape_opt(v: &str) -> String {
    v.replace('\\', "\\\\").replace(',', "\\,")
}

/// Tells the kernel that a name or an inode changed (see
/// [`MountHandle::invalidator`]).
#[derive(Clone)]
pub struct Invalidator(Notifier);

impl std::fmt::Debug for Invalidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Invalidator")
    }
}

impl Invalidator {
    /// Drop the kernel's cached attributes and data of `ino`.
    pub fn inval_inode(&self, ino: u64) -> io::Result<()> {
        self.0.inval_inode(INodeNo(ino), 0, 0)
    }
    /// Drop the kernel's cached name `name` in directory `parent`.
    pub fn inval_entry(&self, parent: u64, name: &OsStr) -> io::Result<()> {
        self.0.inval_entry(INodeNo(parent), name)
    }
}

/// A live mount served by background threads.
#[derive(Debug)]
pub struct MountHandle {
    thread: Option<JoinHandle<io::Result<()>>>,
    unmounter: Unmounter,
    notifier: Notifier,
    mountpoint: PathBuf,
}

impl MountHandle {
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Tell the kernel about changes made to the Volume behind the mount's
    /// back (netpath): `inval_inode`, `inval_entry`, `delete`.
    pub fn notifier(&self) -> Notifier {
        self.notifier.clone()
    }

    /// Drop the kernel's cached attributes and data of `ino`.
    pub fn inval_inode(&self, ino: u64) -> io::Result<()> {
        self.notifier.inval_inode(INodeNo(ino), 0, 0)
    }

    /// Drop the kernel's cached name `name` in directory `parent`.
    pub fn inval_entry(&self, parent: u64, name: &OsStr) -> io::Result<()> {
        self.notifier.inval_entry(INodeNo(parent), name)
    }

    /// A cloneable handle for telling the kernel about changes made behind
    /// its back (the network servers beside the mount).
    pub fn invalidator(&self) -> Invalidator {
        Invalidator(self.notifier.clone())
    }

    pub fn unmounter(&self) -> Unmounter {
        self.unmounter.clone()
    }

    /// Unmount (lazily if busy); the session then ends, see [`join`](Self::join).
    pub fn unmount(&self) -> io::Result<()> {
        self.unmounter.unmount()
    }

    /// Whether the session has ended (unmounted by anyone).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Wait for the session to end (after `unmount()`, `umount`,
    /// `fusermount3 -u`). The file system's reference to the Volume is
    /// dropped by then.
    pub fn join(mut self) -> io::Result<()> {
        self.join_inner()
    }

    fn join_inner(&mut self) -> io::Result<()> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("the FUSE session panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for MountHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.unmount();
            let _ = self.join_inner();
        }
    }
}

/// Mount `vol` at `mountpoint` and serve it from background threads. The
/// mount is live when this returns (the kernel's INIT has been answered).
pub fn mount(vol: Arc<Volume>, mountpoint: &Path, opts: &MountOptions) -> Result<MountHandle> {
    let io_err = |source| FsError::Io {
        path: mountpoint.to_path_buf(),
        source,
    };
    let mut opts = opts.clone();
    // A read-only Volume can only be mounted read-only.
    opts.read_only |= vol.is_read_only();
    let mountpoint = mountpoint.canonicalize().map_err(io_err)?;
    let fsname = vol
        .pm()
        .path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "pktfs".into());
    let config = opts.fuser_config(&fsname);
    let fs = state::PktFuse {
        vol,
        tune: state::Tuning {
            attr_ttl: opts.attr_ttl,
            entry_ttl: opts.entry_ttl,
            max_write: opts.max_write,
            max_readahead: opts.max_readahead,
            keep_cache: opts.keep_cache,
            direct_io: opts.direct_io,
            atime: opts.atime,
        },
        notifier: Default::default(),
        kernel_refs: Default::default(),
    };
    let late_notifier = fs.notifier.clone();
    let root = nix::unistd::geteuid().is_root();
    let (session, inner) = if root || opts.auto_unmount {
        // Direct mount(2) as root (no fusermount3 needed); for auto_unmount
        // fuser goes through fusermount3 itself.
        let mut s = Session::new(fs, &mountpoint, &config).map_err(io_err)?;
        let u = s.unmount_callable();
        (s, Some(Arc::new(Mutex::new(u))))
    } else {
        let fd = fusermount(&mountpoint, &opts.fusermount_options(&fsname)).map_err(io_err)?;
        let s = Session::from_fd(fs, fd, config.acl, config.clone()).map_err(|e| {
            let _ = fusermount_u(&mountpoint, true);
            io_err(e)
        })?;
        (s, None)
    };
    let unmounter = Unmounter {
        inner,
        mountpoint: mountpoint.clone(),
    };
    let notifier = session.notifier();
    let _ = late_notifier.set(notifier.clone());
    let thread = std::thread::Builder::new()
        .name("pktfs-fuse".into())
        .spawn(move || session.run())
        .map_err(io_err)?;
    if root {
        // The kernel offers FUSE at most the bdi's read-ahead (128 KiB by
        // default) however large max_readahead is; raise it for this mount
        // so sequential reads come in max_readahead-sized requests. Only
        // after the session serves: the stat below asks the daemon.
        let _ = set_read_ahead(&mountpoint, opts.max_readahead / 1024);
    }
    Ok(MountHandle {
        thread: Some(thread),
        unmounter,
        notifier,
        mountpoint,
    })
}

//! Raw stream mode: each connection's bytes become one file.
//!
//! The file is named by the connection's arrival time and peer (e.g.
//! `20250101T120000.123456789Z-127.0.0.1-54321`) in the configured
//! directory, and what each receive completion took from the socket (at
//! most one ring entry's room on the loops, one `recv` on threads) is
//! appended as soon as it lands: bytes go from the kernel into packet
//! buffers, become one record (CRC32C, stream position, and the kernel's
//! receive time, FLAG_KERNEL_TIME; a record the kernel gave no time for
//! has the receiver's clock and lacks the flag) and are linked at the
//! end of the file (receives under 2 KiB are copied together into one
//! record first, stored within 100 ms of their first byte: a trickling
//! sender would otherwise take a record per byte). Each commit is atomic
//! and appends in stream order, so after a crash the file holds an exact
//! prefix of what was sent: never a hole, never a foreign byte. There is
//! nothing to answer; when the volume is full the connection is closed and
//! the file keeps what was stored.
//!
//! # The file appears with its first bytes
//! Nothing is made for a connection until its first stream byte arrives:
//! then an unnamed file is made and the commit that stores the first
//! bytes also gives it its name (the loops: one commit; threads: the
//! first commit, then the name). A connection that sends nothing, or only
//! its preface, leaves nothing behind, and a crash never leaves an empty
//! file or a name without the bytes that made it (an unnamed file is gone
//! after a crash by construction).
//!
//! # The token preface
//! With a token configured ([`crate::Config::token`], `--token-file`),
//! a connection must start with one line before its stream:
//!
//! ```text
//! PKTFS-TOKEN <token>\n
//! ```
//!
//! (`\r\n` is accepted too), at most [`MAX_PREFACE`] bytes with its newline,
//! complete within `header_timeout` of the connection's start. The stream
//! (what the file holds) is every byte after that newline. A connection
//! whose first bytes are not the preface, whose token is wrong, or whose
//! preface does not complete in time is closed and stores nothing. Without
//! a token nothing is expected (a preface sent anyway is stored as data).
//! [`preface`] builds the line; `pktfs send --token-file` sends it.
//!
//! # Connection caps
//! At most [`crate::Config::raw_max_connections`] raw connections are
//! served at once (default 1024), on their own count, and raw and HTTP
//! together stay within `max_connections`; a connection over either cap is
//! closed at once, before anything is made for it.
//!
//! # Who the files belong to
//! Raw files are made as [`crate::Config::as_user`] (`--as-user`), so the
//! server checks, as the kernel would check that user making them on the
//! mount, that it may: [`raw_directory`] at start (search on every
//! directory on the way, write and search where a missing one is made and
//! on the directory itself; a server that may not fails to start, naming
//! what is missing), and write and search on the directory again before
//! each new file is named (a chmod after start is seen, as a process
//! holding the directory open would see it).
//!
//! Two ways to serve it, same semantics: a thread per connection
//! (`serve_connection`, receiving with [`crate::receive::to_file::recv_into`]), or a
//! session on the io_uring event loops (`RawProtocol`), where the bytes
//! land in the loop's ring of free packet buffers and everything a
//! connection received in one loop turn is appended by one commit (the
//! same exact-prefix guarantee: commits append in stream order).

use std::cell::{Cell, RefCell};
use std::io::Read;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pktfs_fs::{Access, Cred, Denial, FileType, FsError, RxHeld, RxPiece, TmpFile, Volume};

use crate::config::{Change, Token};
use crate::receive::body::{Framing, Pieces, Walk};
use crate::receive::to_file::{recv_into, CommitPolicy, RecvHooks, RecvMode, RecvOptions};
use crate::shared::Shared;
use crate::util::{now_ns, raw_name};

/// Growth of a raw file is told to the change callback at most this often
/// (and within this long of the last commit).
const NOTE_EVERY: Duration = Duration::from_millis(100);

/// What a preface line starts with (the token follows).
pub const PREFACE_TAG: &[u8] = b"PKTFS-TOKEN ";

/// Longest preface line, its newline included: a token is a short
/// printable word, and a client that sends more without a newline is not
/// speaking the protocol.
pub const MAX_PREFACE: usize = 512;

/// The preface line a client sends first when the server has `token`.
pub fn preface(token: &Token) -> Vec<u8> {
    let mut v = PREFACE_TAG.to_vec();
    v.extend_from_slice(token.secret().as_bytes());
    v.push(b'\n');
    v
}

/// What the bytes received so far say about the preface.
#[derive(Debug, PartialEq, Eq)]
enum Preface {
    /// Not complete yet, and nothing wrong so far.
    Incomplete,
    /// Complete and right: its length, newline included.
    Done(usize),
    /// Refused (for the log; the client is told nothing).
    Bad(&'static str),
}

/// Judge the first bytes of a connection (at most [`MAX_PREFACE`] of them).
/// A wrong start is refused as soon as it shows, so a client that sends a
/// stream without a preface is closed at its first bytes.
fn check_preface(got: &[u8], token: &Token) -> Preface {
    let Some(nl) = got.iter().position(|&b| b == b'\n') else {
        let n = got.len().min(PREFACE_TAG.len());
        if got[..n] != PREFACE_TAG[..n] {
            return Preface::Bad("no PKTFS-TOKEN preface");
        }
        if got.len() >= MAX_PREFACE {
            return Preface::Bad("preface line too long");
        }
        return Preface::Incomplete;
    };
    let line = &got[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.strip_prefix(PREFACE_TAG) {
        None => Preface::Bad("no PKTFS-TOKEN preface"),
        Some(t) if token.matches(t) => Preface::Done(nl + 1),
        Some(_) => Preface::Bad("wrong token"),
    }
}

/// Take one of the raw connection slots: false (and counted refused) when
/// `raw_max_connections` are being served, or `total_full` (HTTP and raw
/// together at `max_connections`).
fn take_slot(sh: &Shared, peer: SocketAddr, total_full: bool) -> bool {
    let cap = sh.cfg.raw_max_connections;
    let before = sh.raw_open.fetch_add(1, Ordering::AcqRel);
    if before < cap && !total_full {
        return true;
    }
    sh.raw_open.fetch_sub(1, Ordering::AcqRel);
    sh.metrics.refused.inc();
    tracing::info!(
        "raw connection from {peer} refused: {} raw connections (raw_max_connections {cap}) or the connection cap reached",
        before.min(cap)
    );
    false
}

/// Why raw mode cannot store into its directory.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RawDirError {
    #[error(
        "raw directory {path}: raw files are made as uid {uid} gid {gid} (--as-user), \
         which has no {what} permission on {at}; give that identity the permission \
         (chown or chmod), or choose another --raw-dir or --as-user"
    )]
    Denied {
        path: String,
        uid: u32,
        gid: u32,
        what: &'static str,
        at: String,
    },
    #[error(
        "raw directory {path}: {at} is a sticky directory another user owns, \
         and uid {uid} may not make entries in it"
    )]
    Sticky { path: String, uid: u32, at: String },
    #[error("raw directory {path}: {at} is not a directory")]
    NotDir { path: String, at: String },
    #[error("raw directory {path}: {source}")]
    Fs { path: String, source: FsError },
}

/// "write and search (wx)" for a message.
fn access_words(a: Access) -> &'static str {
    match a.letters() {
        "x" => "search (x)",
        "w" => "write (w)",
        _ => "write and search (wx)",
    }
}

/// Find or make (`mkdir -p`) raw mode's directory `path` as `who` would:
/// search (x) on every directory on the way, write and search (wx) on the
/// one a missing directory is made in (what is made below it is `who`'s
/// own, 0755), and write and search on the directory itself, where every
/// raw file is made as `who`. Refused with what is missing and where, so
/// a server whose identity may not store there fails to start instead of
/// making files that user could not make.
pub(crate) fn raw_directory(
    vol: &Volume,
    path: &str,
    who: &Cred,
    notify: &dyn Fn(Change<'_>),
) -> Result<u64, RawDirError> {
    let fs = |source| RawDirError::Fs {
        path: path.to_string(),
        source,
    };
    let denied = |at: &str, what: Access| RawDirError::Denied {
        path: path.to_string(),
        uid: who.uid,
        gid: who.gid,
        what: access_words(what),
        at: at.to_string(),
    };
    let parts = || path.split('/').filter(|p| !p.is_empty());
    let mut dir = vol.root();
    let mut at = String::from("/");
    for part in parts() {
        let name = part.as_bytes();
        let next = match at.as_str() {
            "/" => format!("/{part}"),
            _ => format!("{at}/{part}"),
        };
        match vol.lookup_as(dir, name, who) {
            Ok(a) if a.kind == FileType::Directory => dir = a.ino,
            Ok(_) => {
                return Err(RawDirError::NotDir {
                    path: path.to_string(),
                    at: next,
                })
            }
            Err(FsError::Access) => return Err(denied(&at, Access::SEARCH)),
            Err(FsError::NotFound) => {
                // Made from here on: the identity must be able to make the
                // first missing one; the rest are its own.
                match vol.may_change_entry(dir, name, who).map_err(fs)? {
                    None => break,
                    Some(Denial::Missing(a)) => return Err(denied(&at, a)),
                    Some(Denial::Sticky) => {
                        return Err(RawDirError::Sticky {
                            path: path.to_string(),
                            uid: who.uid,
                            at,
                        })
                    }
                }
            }
            Err(e) => return Err(fs(e)),
        }
        at = next;
    }
    // Made as the image's owner (the walk above checked the identity may),
    // owned by the identity.
    let ino = vol
        .make_dirs(
            parts().map(str::as_bytes),
            (0o755, who.uid, who.gid),
            None,
            &mut |parent, name, ino| notify(Change::Entry { parent, name, ino }),
        )
        .map_err(fs)?;
    let lacks = vol.missing(ino, who, Access::WRITE_SEARCH).map_err(fs)?;
    if lacks.bits() != 0 {
        let shown = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        return Err(denied(&shown, lacks));
    }
    Ok(ino)
}

/// May the identity still make a file in the raw directory (write and
/// search on it, checked again as each file is named: a chmod or chown
/// after start counts)? Root always may. The directory's ancestors are
/// not walked again: the server holds the directory as a process holds
/// its working directory.
fn may_make_file(sh: &Shared) -> bool {
    let who = &sh.cfg.as_user;
    who.is_root()
        || sh
            .vol
            .permits(sh.raw_dir, who, Access::WRITE_SEARCH)
            .unwrap_or(false)
}

/// Gives a raw connection slot back when dropped (threads transport).
/// One of the `raw_max_connections` places, held by a thread-served raw
/// connection from its accept to its end. Taken on the accept thread
/// ([`RawSlot::take`]), so a connection over the cap never costs a thread.
pub(crate) struct RawSlot(std::sync::Arc<Shared>);

impl RawSlot {
    /// `None` (counted refused, logged) when the raw cap is reached.
    pub(crate) fn take(sh: &std::sync::Arc<Shared>, peer: SocketAddr) -> Option<RawSlot> {
        take_slot(sh, peer, false).then(|| RawSlot(sh.clone()))
    }
}

impl Drop for RawSlot {
    fn drop(&mut self) {
        self.0.raw_open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Name the unnamed file `tmp` (arrived `born_ns` from `peer`), appending
/// `tail` in the same commit. The name is the arrival time and peer, with
/// `-1` .. `-7` added when taken. `None` (logged): nothing was named, the
/// tail was dropped, and `tmp` still owns the file (freed when dropped).
fn link_file<'v>(
    sh: &Shared,
    tmp: &mut TmpFile<'v>,
    tail: Vec<RxPiece<'v>>,
    born_ns: u64,
    peer: SocketAddr,
) -> Option<String> {
    let vol = &*sh.vol;
    if !may_make_file(sh) {
        let who = &sh.cfg.as_user;
        tracing::warn!(
            "raw connection from {peer}: uid {} gid {} (--as-user) may no longer make files in {} \
             (no write and search permission); closing it, nothing stored",
            who.uid,
            who.gid,
            sh.cfg.raw_dir
        );
        vol.rx_abort(tail);
        return None;
    }
    let base = raw_name(born_ns, peer);
    let free = (0..8)
        .map(|k| match k {
            0 => base.clone(),
            k => format!("{base}-{k}"),
        })
        .find(|n| {
            matches!(
                vol.lookup(sh.raw_dir, n.as_bytes()),
                Err(pktfs_fs::FsError::NotFound)
            )
        });
    let Some(name) = free else {
        tracing::warn!("raw connection from {peer}: {base} and its variants are taken; closing it");
        vol.rx_abort(tail);
        return None;
    };
    match tmp.link(tail, sh.raw_dir, name.as_bytes(), false) {
        Ok(_linked) => {}
        Err(e) => {
            tracing::warn!("raw connection from {peer}: cannot store {name}: {e}; closing it");
            return None;
        }
    }
    tracing::info!(target: "pktfs::access", %peer, file = %name, "raw stream started");
    sh.metrics.files_stored.inc();
    sh.notify(Change::Entry {
        parent: sh.raw_dir,
        name: name.as_bytes(),
        ino: tmp.ino(),
    });
    Some(name)
}

/// Threads transport: read the preface off a blocking socket, taking no
/// byte past its newline (peeked first, then read exactly).
fn read_preface(sh: &Shared, sock: &TcpStream, token: &Token) -> Result<(), &'static str> {
    let deadline = Instant::now() + sh.cfg.header_timeout;
    let mut got = Vec::new();
    let mut buf = [0u8; MAX_PREFACE];
    loop {
        if sh.stop.load(Ordering::Relaxed) {
            return Err("the server is stopping");
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no complete preface in time");
        }
        // Short waits, so a stop is seen.
        let _ = sock.set_read_timeout(Some(left.min(Duration::from_millis(200))));
        let room = MAX_PREFACE - got.len();
        let n = match sock.peek(&mut buf[..room]) {
            Ok(0) => return Err("closed before its preface"),
            Ok(n) => n,
            Err(e) if is_wait(&e) => continue,
            Err(_) => return Err("receiving the preface failed"),
        };
        let take = buf[..n]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(n, |i| i + 1);
        if (&*sock).read_exact(&mut buf[..take]).is_err() {
            return Err("receiving the preface failed");
        }
        got.extend_from_slice(&buf[..take]);
        match check_preface(&got, token) {
            Preface::Incomplete => {}
            Preface::Done(_) => return Ok(()),
            Preface::Bad(why) => return Err(why),
        }
    }
}

/// Threads transport: wait (up to `raw_idle_timeout`) until the first
/// stream byte is there, without taking it. False: the peer closed or
/// stayed silent, or the server stops.
fn first_byte(sh: &Shared, sock: &TcpStream) -> bool {
    let until = Instant::now() + sh.cfg.raw_idle_timeout;
    let mut b = [0u8; 1];
    loop {
        if sh.stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let _ = sock.set_read_timeout(Some(left.min(Duration::from_millis(200))));
        match sock.peek(&mut b) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(e) if is_wait(&e) => continue,
            Err(_) => return false,
        }
    }
}

fn is_wait(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), WouldBlock | TimedOut | Interrupted)
}

/// Serve one raw connection on its own thread. `_slot` was taken where the
/// connection was admitted (the total cap is checked there too) and is
/// given back when this returns.
pub(crate) fn serve_connection(sh: &Shared, sock: TcpStream, peer: SocketAddr, _slot: RawSlot) {
    let born = now_ns();
    if let Some(t) = &sh.cfg.token {
        if let Err(why) = read_preface(sh, &sock, t) {
            tracing::info!("raw connection from {peer} refused: {why}; nothing stored");
            let _ = sock.shutdown(Shutdown::Both);
            return;
        }
    }
    if !first_byte(sh, &sock) {
        tracing::debug!("raw connection from {peer} ended before any data; nothing stored");
        let _ = sock.shutdown(Shutdown::Both);
        return;
    }
    let vol = &*sh.vol;
    let tmp = match vol.tmpfile(0o644, sh.uid, sh.gid) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!("raw connection from {peer}: cannot make its file: {e}; closing it");
            let _ = sock.shutdown(Shutdown::Both);
            return;
        }
    };
    let ino = tmp.ino();
    // Every receive is committed at once (the smallest loss window; small
    // ones once coalesced, within 100 ms: recv_into); the file is named
    // right after its first commit (unnamed until then: nothing half-made
    // is ever visible). The mount hears of the growth at
    // most every NOTE_EVERY, and within that of the last commit even when
    // the sender goes quiet.
    let opts = RecvOptions {
        mode: RecvMode::Append,
        commit: CommitPolicy::EveryChunk,
        chunk_bytes: sh.cfg.rx_chunk,
        idle_timeout: sh.cfg.raw_idle_timeout,
        ..Default::default()
    };
    let tmp = RefCell::new(tmp);
    let name: RefCell<Option<String>> = RefCell::new(None);
    let noted = Cell::new((Instant::now(), 0u64, 0u64)); // (when, told, size)
    let mut on_commit = |_ino: u64, size: u64| {
        if name.borrow().is_none() {
            match link_file(sh, &mut tmp.borrow_mut(), Vec::new(), born, peer) {
                Some(n) => *name.borrow_mut() = Some(n),
                None => {
                    // Ends the receive; the unnamed file is freed below.
                    let _ = sock.shutdown(Shutdown::Both);
                    return;
                }
            }
        }
        let (when, told, before) = noted.get();
        sh.metrics.bytes_in.inc_by(size.saturating_sub(before));
        noted.set((when, told, size));
        if when.elapsed() >= NOTE_EVERY {
            sh.notify(Change::Data { ino, size });
            noted.set((Instant::now(), size, size));
        }
    };
    let mut on_tick = || {
        let (_, told, size) = noted.get();
        if told != size {
            sh.notify(Change::Data { ino, size });
            noted.set((Instant::now(), size, size));
        }
    };
    let t0 = Instant::now();
    let report = recv_into(
        vol,
        &sock,
        ino,
        &opts,
        RecvHooks {
            stop: Some(&sh.stop),
            on_commit: Some(&mut on_commit),
            tick: Some((NOTE_EVERY, &mut on_tick)),
        },
    );
    let (_, told, size) = noted.get();
    let Some(name) = name.into_inner() else {
        tracing::info!(%peer, "raw connection: nothing stored");
        return;
    };
    if told != size {
        sh.notify(Change::Data { ino, size });
    }
    tracing::info!(
        target: "pktfs::access",
        %peer,
        file = %name,
        bytes_in = size,
        ms = t0.elapsed().as_millis() as u64,
        records = report.records,
        ended_cleanly = report.ended_cleanly,
        "raw stream ended"
    );
}

/// The raw protocol on the io_uring event loops.
#[derive(Debug)]
pub(crate) struct RawProtocol {
    pub sh: Arc<Shared>,
}

impl crate::loops::Protocol for RawProtocol {
    fn name(&self) -> &'static str {
        "raw"
    }

    fn open<'v>(
        &'v self,
        vol: &'v Volume,
        peer: SocketAddr,
    ) -> Option<Box<dyn crate::loops::Session<'v> + 'v>> {
        if !std::ptr::eq(vol, &*self.sh.vol) {
            return None;
        }
        let sh = &self.sh;
        // None: the loop closes the connection at once.
        let total_full = sh.open_connections() >= sh.cfg.loop_cap();
        if !take_slot(sh, peer, total_full) {
            return None;
        }
        sh.metrics.accepted.inc();
        let now = Instant::now();
        let preface = sh.cfg.token.as_ref().map(|_| Pending {
            got: Vec::new(),
            deadline: now + sh.cfg.header_timeout,
        });
        Some(Box::new(RawSession {
            sh: sh.clone(),
            vol,
            ino: None,
            peer,
            name: String::new(),
            born_ns: now_ns(),
            started: now,
            records: 0,
            preface,
            walk: Walk::new(Framing::Stream, 0),
            pieces: Pieces::default(),
            seq: 0,
            size: 0,
            told: 0,
            told_at: now,
            small_since: None,
        }))
    }
}

/// A preface still being received (loops).
struct Pending {
    got: Vec<u8>,
    deadline: Instant,
}

/// One raw connection on a loop: pieces made as bytes land, committed at
/// the end of each loop turn.
struct RawSession<'v> {
    sh: Arc<Shared>,
    vol: &'v Volume,
    /// The file, once named (its first bytes are stored).
    ino: Option<u64>,
    /// For the access log: who, which file, since when, records stored.
    peer: SocketAddr,
    name: String,
    /// Arrival time (the file's name).
    born_ns: u64,
    started: Instant,
    records: u64,
    /// The preface, while it is awaited (a token is configured).
    preface: Option<Pending>,
    /// The stream walked (all of it data) into pieces of this turn, in
    /// stream order. Small landed pieces are copied together into one
    /// record (a sender of 1-byte segments would otherwise take a record
    /// per byte and exhaust the record table while buffer space is free);
    /// made a piece when full, when a large piece comes,
    /// [`COALESCE_FLUSH`] after their first byte (raw files are read while
    /// they grow) and at the end.
    walk: Walk,
    pieces: Pieces<'v>,
    /// Stream position of the next byte (after the preface).
    seq: u64,
    /// File size after the last commit, and what the callback was told.
    size: u64,
    told: u64,
    told_at: Instant,
    /// When the oldest small byte waiting to be copied together arrived.
    small_since: Option<Instant>,
}

/// The longest small bytes wait in the coalescing reservation before
/// they are stored (and visible in the file).
const COALESCE_FLUSH: Duration = Duration::from_millis(100);

impl Drop for RawSession<'_> {
    fn drop(&mut self) {
        self.sh.raw_open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<'v> RawSession<'v> {
    /// Take the preface from the front of `data`. `Some(rest)`: the
    /// preface is complete and `rest` is stream bytes; `None` with `Ok`:
    /// all of `data` was preface (or it is still incomplete); `Err`: refused.
    fn take_preface(&mut self, mut data: RxHeld<'v>) -> Result<Option<RxHeld<'v>>, &'static str> {
        let Some(p) = self.preface.as_mut() else {
            return Ok(Some(data));
        };
        let token = self.sh.cfg.token.as_ref().ok_or("no token")?;
        let before = p.got.len();
        let bytes = data.bytes();
        let take = bytes.len().min(MAX_PREFACE - before);
        p.got.extend_from_slice(&bytes[..take]);
        match check_preface(&p.got, token) {
            Preface::Incomplete => Ok(None),
            Preface::Bad(why) => Err(why),
            Preface::Done(k) => {
                self.preface = None;
                // The newline is in this chunk (else it was done before).
                let used = (k - before) as u32;
                if used >= data.len() {
                    return Ok(None);
                }
                let _preface = data.split_to(used);
                Ok(Some(data))
            }
        }
    }

    /// Make the coalesced small bytes a piece, after the pieces before it.
    fn flush_small(&mut self) {
        // Only a copy into a reservation could fail, and a flush copies
        // nothing.
        let _ = self.pieces.flush_small();
        self.small_since = None;
    }

    /// Append this turn's pieces (one commit; the first also names the
    /// file). `false`: the volume refused (full, or stopped): the
    /// connection must close.
    fn commit(&mut self) -> bool {
        if self.pieces.made() == 0 {
            return true;
        }
        let r = match self.ino {
            Some(ino) => {
                let records = self.pieces.made() as u64;
                self.pieces
                    .commit(self.vol, ino, &mut ())
                    .map(|s| (s, records))
            }
            None => return self.first_commit(),
        };
        match r {
            Ok((size, records)) => {
                self.stored(size, records);
                true
            }
            Err(e) => {
                tracing::debug!("raw: inode {:?}: commit: {e}", self.ino);
                false
            }
        }
    }

    /// The first bytes: an unnamed file made, and named by the commit that
    /// stores them.
    fn first_commit(&mut self) -> bool {
        let batch = self.pieces.take_made(&mut ());
        let records = batch.len() as u64;
        let sh = &*self.sh;
        let mut tmp = match self.vol.tmpfile(0o644, sh.uid, sh.gid) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(
                    "raw connection from {}: cannot make its file: {e}; closing it",
                    self.peer
                );
                self.vol.rx_abort(batch);
                return false;
            }
        };
        let Some(name) = link_file(sh, &mut tmp, batch, self.born_ns, self.peer) else {
            return false;
        };
        let ino = tmp.ino();
        let size = self.vol.getattr(ino).map_or(0, |a| a.size);
        self.ino = Some(ino);
        self.name = name;
        self.stored(size, records);
        true
    }

    fn stored(&mut self, size: u64, records: u64) {
        self.sh
            .metrics
            .bytes_in
            .inc_by(size.saturating_sub(self.size));
        self.size = size;
        self.records += records;
        if self.told_at.elapsed() >= NOTE_EVERY {
            self.note();
        }
    }

    fn note(&mut self) {
        if let Some(ino) = self.ino.filter(|_| self.told != self.size) {
            self.sh.notify(Change::Data {
                ino,
                size: self.size,
            });
            self.told = self.size;
        }
        self.told_at = Instant::now();
    }
}

impl<'v> crate::loops::Session<'v> for RawSession<'v> {
    fn on_data(
        &mut self,
        data: RxHeld<'v>,
        rx: pktfs_fs::RxTime,
        at: crate::loops::TurnClock,
    ) -> crate::loops::Flow<'v> {
        let data = match self.take_preface(data) {
            Ok(Some(d)) => d,
            Ok(None) => return crate::loops::Flow::Continue,
            Err(why) => {
                tracing::info!(
                    "raw connection from {} refused: {why}; nothing stored",
                    self.peer
                );
                return crate::loops::Flow::Close;
            }
        };
        // Large pieces stay where they landed (CRC and write-back now,
        // while the bytes are hot); small ones are copied together.
        let r = self.walk.step(
            data,
            rx,
            &mut self.seq,
            Some(&mut self.pieces),
            &mut (),
            self.vol,
        );
        if let Err(e) = r {
            tracing::info!(
                "raw connection from {}: no buffer space for small pieces: {e}; closing",
                self.peer
            );
            return crate::loops::Flow::Close;
        }
        if self.pieces.pending_small() == 0 {
            self.small_since = None;
        } else if self.small_since.is_none() {
            self.small_since = Some(at.now);
        }
        crate::loops::Flow::Continue
    }

    fn end_turn(&mut self) -> crate::loops::Flow<'v> {
        match self.commit() {
            true => crate::loops::Flow::Continue,
            false => crate::loops::Flow::Close,
        }
    }

    fn on_eof(&mut self) -> crate::loops::Flow<'v> {
        // Nothing to answer: the stream is complete (what was coalesced
        // is stored at the close).
        crate::loops::Flow::Close
    }

    fn next_timer(&self) -> Option<Instant> {
        // The preface has a deadline; and the mount hears of growth within
        // NOTE_EVERY of the last commit, even when the sender goes quiet.
        let note = (self.told != self.size).then_some(self.told_at + NOTE_EVERY);
        let small = self.small_since.map(|t| t + COALESCE_FLUSH);
        [self.preface.as_ref().map(|p| p.deadline), note, small]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_timer(&mut self, now: Instant) -> crate::loops::Flow<'v> {
        if self.preface.as_ref().is_some_and(|p| now >= p.deadline) {
            tracing::info!(
                "raw connection from {} refused: no complete preface in time; nothing stored",
                self.peer
            );
            return crate::loops::Flow::Close;
        }
        if self.small_since.is_some_and(|t| now >= t + COALESCE_FLUSH) {
            // Small bytes waited long enough: stored now.
            self.flush_small();
            if !self.commit() {
                return crate::loops::Flow::Close;
            }
        }
        self.note();
        crate::loops::Flow::Continue
    }

    #[allow(clippy::misnamed_getters)] // raw mode's own timeout
    fn idle_timeout(&self) -> Duration {
        self.sh.cfg.raw_idle_timeout
    }

    fn on_close(&mut self, why: crate::loops::CloseReason) {
        // What arrived before the close is stored (a shutdown or timeout
        // does not lose delivered bytes), unless the volume refuses.
        self.flush_small();
        let _ = self.commit();
        if self.ino.is_none() {
            tracing::debug!(peer = %self.peer, closed = ?why, "raw connection ended; nothing stored");
            return;
        }
        self.note();
        tracing::info!(
            target: "pktfs::access",
            peer = %self.peer,
            file = %self.name,
            bytes_in = self.size,
            ms = self.started.elapsed().as_millis() as u64,
            records = self.records,
            ended_cleanly = matches!(why, crate::loops::CloseReason::Eof),
            closed = ?why,
            "raw stream ended"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preface_lines() {
        let t = Token::from_file_contents("tok-123").unwrap();
        assert_eq!(preface(&t), b"PKTFS-TOKEN tok-123\n");
        let ok = b"PKTFS-TOKEN tok-123\nDATA";
        assert_eq!(check_preface(ok, &t), Preface::Done(20));
        assert_eq!(
            check_preface(b"PKTFS-TOKEN tok-123\r\nx", &t),
            Preface::Done(21)
        );
        for part in [&b""[..], b"PKT", b"PKTFS-TOKEN ", b"PKTFS-TOKEN tok"] {
            assert_eq!(check_preface(part, &t), Preface::Incomplete, "{part:?}");
        }
        for bad in [
            &b"hello world\n"[..],
            b"X",
            b"pktfs-token tok-123\n",
            b"PKTFS-TOKEN tok-12\n",
            b"PKTFS-TOKEN tok-1234\n",
            b"PKTFS-TOKEN  tok-123\n",
            b"PKTFS-TOKEN\n",
        ] {
            assert!(matches!(check_preface(bad, &t), Preface::Bad(_)), "{bad:?}");
        }
        let mut long = PREFACE_TAG.to_vec();
        long.resize(MAX_PREFACE, b'a');
        assert_eq!(
            check_preface(&long, &t),
            Preface::Bad("preface line too long")
        );
    }
}

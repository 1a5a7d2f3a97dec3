//! Rebuilding an image from a snapshot (`pktfs restore`).
//!
//! The tree is recreated through the Volume's public calls: directories,
//! files, symlinks, device nodes and FIFOs, hard links, xattrs and ACLs;
//! every regular file that was wholly in the tier at the snapshot gets its
//! remote records back, field for field (`Volume::link_remote`); times and
//! modes are set last, deepest first, so creating children does not move a
//! directory's times (ctime is the time of the restore, as with any
//! copy). Files that still had bytes in PM at the snapshot are
//! not restored (those bytes were never in the bucket): the report names
//! them. No request goes to the store: reads of the restored files fetch
//! through whatever tier the restored image is served with.

use std::collections::HashMap;
use std::path::Path;

use layout::FileType;
use pktfs::{RemoteExtent, SetAttr, TimeSet, Volume, XattrFlags};

use crate::snapshot::{self, InodeEntry, ParsedSnapshot, SnapshotError};

/// How to restore.
#[derive(Clone, Debug, Default)]
pub struct RestoreOptions {
    /// Overwrite an existing image file.
    pub force: bool,
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RestoreReport {
    pub snapshot: u64,
    pub snapshot_created_ns: u64,
    pub directories: u64,
    pub files: u64,
    pub bytes: u64,
    pub symlinks: u64,
    pub special: u64,
    pub hard_links: u64,
    /// Files not restored: they had bytes outside the tier at the
    /// snapshot. (path, size)
    pub skipped_partial: Vec<(String, u64)>,
}

impl RestoreReport {
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "restored snapshot {}: {} directories, {} files ({} bytes, all in the tier), {} \
             symlinks, {} special files, {} extra hard links",
            self.snapshot,
            self.directories,
            self.files,
            self.bytes,
            self.symlinks,
            self.special,
            self.hard_links
        );
        if !self.skipped_partial.is_empty() {
            s += &format!(
                "\nnot restored ({} files had bytes in PM only when the snapshot was taken):",
                self.skipped_partial.len()
            );
            for (p, size) in &self.skipped_partial {
                s += &format!("\n  {p} ({size} bytes)");
            }
        }
        s
    }
}

/// Why a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("{0}")]
    Snapshot(#[from] SnapshotError),
    #[error("{path}: {msg}")]
    Image { path: String, msg: String },
    #[error("restoring {path}: {source}")]
    Fs {
        path: String,
        source: pktfs::FsError,
    },
}

fn is_acl(name: &[u8]) -> bool {
    name == pktfs::volume::ACL_ACCESS_XATTR.as_bytes()
        || name == pktfs::volume::ACL_DEFAULT_XATTR.as_bytes()
}

/// Restore `snap` into `vol`, a freshly formatted, empty image.
pub fn restore_into(vol: &Volume, snap: &ParsedSnapshot) -> Result<RestoreReport, RestoreError> {
    let mut rep = RestoreReport {
        snapshot: snap.seq,
        snapshot_created_ns: snap.created_ns,
        ..Default::default()
    };
    let by_ino: HashMap<u64, &InodeEntry> = snap.inodes.iter().map(|i| (i.ino, i)).collect();
    // Old inode number -> new, and a path for messages.
    let mut new: HashMap<u64, u64> = HashMap::new();
    let mut paths: HashMap<u64, String> = HashMap::new();
    new.insert(snap.root, vol.root());
    paths.insert(snap.root, String::new());
    let fs_err = |path: &str| {
        let path = path.to_string();
        move |source| RestoreError::Fs { path, source }
    };
    let mut made: Vec<(u64, u64)> = vec![(snap.root, vol.root())];
    for n in &snap.names {
        let Some(&parent) = new.get(&n.parent) else {
            continue; // its directory was not restored
        };
        let path = format!(
            "{}/{}",
            paths.get(&n.parent).map(String::as_str).unwrap_or(""),
            String::from_utf8_lossy(&n.name)
        );
        let Some(i) = by_ino.get(&n.ino) else {
            continue;
        };
        if let Some(&existing) = new.get(&n.ino) {
            vol.link(existing, parent, &n.name).map_err(fs_err(&path))?;
            rep.hard_links += 1;
            continue;
        }
        if i.kind == FileType::Regular && !i.complete {
            if !rep.skipped_partial.iter().any(|(p, _)| *p == path) {
                rep.skipped_partial.push((path, i.size));
            }
            continue;
        }
        let a = match i.kind {
            FileType::Directory => {
                rep.directories += 1;
                vol.mkdir(parent, &n.name, 0o700, i.uid, i.gid)
            }
            FileType::Regular => {
                rep.files += 1;
                rep.bytes += i.size;
                vol.create(parent, &n.name, 0o600, i.uid, i.gid)
            }
            FileType::Symlink => {
                rep.symlinks += 1;
                vol.symlink(parent, &n.name, &i.target, i.uid, i.gid)
            }
            k => {
                rep.special += 1;
                vol.mknod(parent, &n.name, k, 0o600, i.uid, i.gid, i.rdev)
            }
        }
        .map_err(fs_err(&path))?;
        // ACLs wait for the last pass: a default ACL set now would be
        // inherited by the children created next, which had their own.
        for (name, value) in i.xattrs.iter().filter(|(n, _)| !is_acl(n)) {
            vol.restore_xattr(a.ino, name, value)
                .map_err(fs_err(&path))?;
        }
        if i.kind == FileType::Regular {
            let ext: Vec<RemoteExtent> = i
                .extents
                .iter()
                .map(|e| RemoteExtent {
                    file_off: e.file_off,
                    obj: e.obj,
                    obj_off: e.obj_off,
                    len: e.len,
                    crc32c: e.crc32c,
                    seq: e.seq,
                    timestamp_ns: e.timestamp_ns,
                    flags: 0,
                })
                .collect();
            if !ext.is_empty() {
                vol.link_remote(a.ino, &ext).map_err(fs_err(&path))?;
            }
            if vol.getattr(a.ino).map_err(fs_err(&path))?.size != i.size {
                vol.setattr(
                    a.ino,
                    &SetAttr {
                        size: Some(i.size),
                        ..Default::default()
                    },
                )
                .map_err(fs_err(&path))?;
            }
        }
        new.insert(n.ino, a.ino);
        paths.insert(n.ino, path);
        made.push((n.ino, a.ino));
    }
    // Modes, owners and times last, children before their directories.
    for (old, ino) in made.iter().rev() {
        let Some(i) = by_ino.get(old) else { continue };
        let path = paths.get(old).cloned().unwrap_or_default();
        if i.kind != FileType::Symlink {
            vol.setattr(
                *ino,
                &SetAttr {
                    mode: Some(i.perm),
                    uid: Some(i.uid),
                    gid: Some(i.gid),
                    ..Default::default()
                },
            )
            .map_err(fs_err(&path))?;
        }
        // The ACL is the mode's and an xattr's: set again after the mode.
        for (name, value) in i
            .xattrs
            .iter()
            .filter(|(n, _)| n.starts_with(b"system.posix_acl"))
        {
            vol.setxattr(*ino, name, value, XattrFlags::default())
                .map_err(fs_err(&path))?;
        }
        // ctime is the restore's (as with any copy): a directory's times
        // may also be carried by its dirents (FLAG_DIR_TIME), which win
        // over a slot ctime older than them, so a ctime set into the past
        // would not hold.
        vol.setattr(
            *ino,
            &SetAttr {
                atime: Some(TimeSet::Ns(i.atime_ns)),
                mtime: Some(TimeSet::Ns(i.mtime_ns)),
                ..Default::default()
            },
        )
        .map_err(fs_err(&path))?;
    }
    Ok(rep)
}

/// Format a new image at `image` (the snapshot's image size unless
/// `size_bytes`), restore `snap_bytes` into it, close it cleanly.
pub fn restore_image(
    image: &Path,
    size_bytes: Option<u64>,
    snap_bytes: &[u8],
    opts: &RestoreOptions,
) -> Result<RestoreReport, RestoreError> {
    // Everything is checked before the image file is touched.
    let snap = snapshot::parse(snap_bytes)?;
    let shown = image.display().to_string();
    let img_err = |msg: String| RestoreError::Image {
        path: shown.clone(),
        msg,
    };
    if let Ok(m) = std::fs::metadata(image) {
        if m.len() > 0 && !opts.force {
            return Err(img_err("exists; give --force to overwrite it".into()));
        }
    }
    let size = size_bytes.unwrap_or(snap.image_len_bytes);
    let params = layout::GeometryParams::for_size(size);
    pktfs::Volume::format(
        image,
        &pktfs::FormatOptions {
            params,
            label: None,
        },
        &mut |_, _| {},
    )
    .map_err(|e| img_err(format!("cannot create the image: {e}")))?;
    let vol = pktfs::Volume::open(image, &pktfs::OpenOptions::default())
        .map_err(|e| img_err(format!("cannot open the new image: {e}")))?;
    let rep = restore_into(&vol, &snap)?;
    vol.close()
        .map_err(|e| img_err(format!("closing the image: {e}")))?;
    Ok(rep)
}

//! The metadata snapshot: enough to rebuild an image from the bucket alone
//! (names, attributes, xattrs and ACLs, symlink targets, and every regular
//! file's remote extents). Its format is in docs/TIER.md.
//!
//! A snapshot is taken while the image is live, through the Volume's
//! public calls, one file at a time: each file's entry is self-consistent
//! (its chain is read in one call, under the file's lock), the snapshot as
//! a whole is fuzzy (a rename during the walk may show a file under its old
//! name, or twice, or not at all; the next snapshot has it right). Every
//! object a snapshot names stays in the bucket while the snapshot is kept
//! (the collector reads the list at the head of the snapshot).
//!
//! Every block carries a CRC32C: a damaged or truncated snapshot is refused
//! before anything is built from it.

use std::collections::{BTreeSet, HashMap, VecDeque};

use pktfs_fs::Volume;
use pktfs_layout::{FileType, Superblock};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `PKTSNAP` + version 2: what [`capture`] writes. Version 2 added a
/// flags byte to each extent, so that a restored record says, as the
/// tiered one did, whether its bytes came from the network path.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"PKTSNAP\x02";
/// `PKTSNAP` + version 1: extents without flags; still read (its
/// records restore as written by a local write).
pub const SNAPSHOT_MAGIC_V1: [u8; 8] = *b"PKTSNAP\x01";
pub const HEADER_BYTES: usize = 64;

/// The head of a snapshot.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct HeaderRaw {
    pub magic: [u8; 8],
    pub seq: U64,
    pub created_ns: U64,
    /// The source image's uuid and size (restore makes an image this size
    /// unless told otherwise).
    pub uuid: [u8; 16],
    pub image_len_bytes: U64,
    /// Objects named, listed right after the header.
    pub objects: U32,
    /// Entries after the object list.
    pub entries: U32,
    /// The root directory's inode number.
    pub root: U32,
    /// CRC32C of bytes 0..60.
    pub crc: U32,
}
const _: () = assert!(size_of::<HeaderRaw>() == HEADER_BYTES);

/// One remote extent of a file, as its record was (version 2; a version 1
/// extent is the first [`EXTENT_V1_BYTES`] of it).
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct ExtentRaw {
    pub file_off: U64,
    pub obj: U64,
    pub obj_off: U64,
    pub seq: U64,
    pub timestamp_ns: U64,
    pub len: U32,
    pub crc: U32,
    /// [`EXTENT_FROM_NETWORK`], [`EXTENT_KERNEL_TIME`]; other bits are
    /// refused (a newer writer).
    pub flags: u8,
    pub reserved: [u8; 7],
}
const _: () = assert!(size_of::<ExtentRaw>() == 56);
/// A version 1 extent: the fields up to `crc`, no flags.
pub const EXTENT_V1_BYTES: usize = 48;
const _: () = assert!(std::mem::offset_of!(ExtentRaw, flags) == EXTENT_V1_BYTES);
/// Extent flag: the record's bytes came from the network path (the
/// record's `FLAG_RX`).
pub const EXTENT_FROM_NETWORK: u8 = 1;
/// Extent flag: its time is the kernel's receive time (the record's
/// `FLAG_KERNEL_TIME`).
pub const EXTENT_KERNEL_TIME: u8 = 2;

/// The fixed part of an inode entry.
#[repr(C)]
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
pub struct InodeRaw {
    pub ino: U64,
    pub size: U64,
    pub atime_ns: U64,
    pub mtime_ns: U64,
    pub ctime_ns: U64,
    /// dtype (as in a dirent).
    pub dtype: u8,
    /// Bit 0: every byte of a regular file is in remote extents or holes.
    pub flags: u8,
    pub reserved: [u8; 2],
    pub perm: U32,
    pub uid: U32,
    pub gid: U32,
    pub rdev: U32,
    pub xattrs: U32,
    pub extents: U32,
    pub target_len: U32,
}
const _: () = assert!(size_of::<InodeRaw>() == 72);

const ENTRY_INODE: u8 = 1;
const ENTRY_NAME: u8 = 2;
const FLAG_COMPLETE: u8 = 1;

/// Why a snapshot could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("reading the image: {0}")]
    Fs(#[from] pktfs_fs::FsError),
    #[error("the snapshot is damaged or not a snapshot: {0}")]
    Corrupt(String),
}

fn corrupt(s: impl Into<String>) -> SnapshotError {
    SnapshotError::Corrupt(s.into())
}

/// A captured snapshot.
#[derive(Debug)]
pub struct Snapshot {
    pub bytes: Vec<u8>,
    pub referenced_objects: BTreeSet<u64>,
    pub files: u64,
    pub complete_files: u64,
    pub partial_files: u64,
}

/// One remote extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub file_off: u64,
    pub obj: u64,
    pub obj_off: u64,
    pub len: u32,
    pub crc32c: u32,
    pub seq: u64,
    pub timestamp_ns: u64,
    /// The record's bytes came from the network path.
    pub from_network: bool,
    /// Its `timestamp_ns` is the kernel's receive time.
    pub kernel_time: bool,
}

/// An inode as the snapshot has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeEntry {
    pub ino: u64,
    pub kind: FileType,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u32,
    pub size: u64,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub complete: bool,
    pub target: Vec<u8>,
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    pub extents: Vec<Extent>,
}

/// A name: `name` in directory `parent` is inode `ino`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameEntry {
    pub parent: u64,
    pub ino: u64,
    pub name: Vec<u8>,
}

/// A parsed snapshot, entries in the order restore needs (a directory's
/// inode before any name in it, an inode before its first name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedSnapshot {
    pub seq: u64,
    pub created_ns: u64,
    pub uuid: [u8; 16],
    pub image_len_bytes: u64,
    pub objects: BTreeSet<u64>,
    pub root: u64,
    pub inodes: Vec<InodeEntry>,
    pub names: Vec<NameEntry>,
}

/// `snap/<seq as 16 hex digits>`.
pub fn snapshot_key_rel(seq: u64) -> String {
    format!("snap/{seq:016x}")
}

/// The sequence number a relative key names, if it is a snapshot key.
pub fn parse_snapshot_key_rel(rel: &str) -> Option<u64> {
    let hex = rel.strip_prefix("snap/")?;
    if hex.len() != 16
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Append one checksummed entry: `[len u32][body][crc32c u32]`.
fn push_entry(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&pktfs_layout::crc32c(body).to_le_bytes());
}

/// Walk the volume from the root and encode it: every inode's entry
/// before the first name that leads to it, a directory's inode before any
/// name in it; then the header and the list of the objects named.
pub fn capture(vol: &Volume, seq: u64) -> Result<Snapshot, SnapshotError> {
    let sb = vol.superblock();
    let mut c = Capture::default();
    let mut seen: HashMap<u64, ()> = HashMap::new();
    let mut queue = VecDeque::new();
    let root = vol.root();
    c.inode(vol, root)?;
    c.n_entries += 1;
    seen.insert(root, ());
    queue.push_back(root);
    while let Some(dir) = queue.pop_front() {
        let list = match vol.list_dir(dir) {
            Ok(l) => l,
            Err(pktfs_fs::FsError::NotFound) => continue,
            Err(e) => return Err(e.into()),
        };
        for d in list {
            if d.name == b"." || d.name == b".." {
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(v) = seen.entry(d.ino) {
                match c.inode(vol, d.ino)? {
                    Some(k) => {
                        c.n_entries += 1;
                        v.insert(());
                        if k == FileType::Directory {
                            queue.push_back(d.ino);
                        }
                    }
                    None => continue,
                }
            }
            c.name(dir, d.ino, &d.name);
        }
    }
    Ok(c.finish(&sb, seq, root))
}

/// A snapshot being captured: its entries so far, the objects they name,
/// and the counts of files.
#[derive(Default)]
struct Capture {
    objects: BTreeSet<u64>,
    entries: Vec<u8>,
    n_entries: u32,
    files: u64,
    complete_files: u64,
    partial_files: u64,
}

impl Capture {
    /// The entry of inode `ino` (not counted: the caller counts it): its
    /// attributes, xattrs, a symlink's target, a regular file's remote
    /// extents. `None`: it was removed meanwhile (no entry).
    fn inode(&mut self, vol: &Volume, ino: u64) -> Result<Option<FileType>, SnapshotError> {
        let a = match vol.getattr(ino) {
            Ok(a) => a,
            Err(pktfs_fs::FsError::NotFound) => return Ok(None), // removed meanwhile
            Err(e) => return Err(e.into()),
        };
        let mut xattrs = Vec::new();
        for name in vol.listxattr(ino).unwrap_or_default() {
            if let Ok(v) = vol.getxattr(ino, &name) {
                xattrs.push((name, v));
            }
        }
        let target = if a.kind == FileType::Symlink {
            vol.readlink(ino)?
        } else {
            Vec::new()
        };
        let (extents, complete) = match a.kind {
            FileType::Regular => self.file_extents(vol, ino)?,
            _ => (Vec::new(), true),
        };
        let head = InodeRaw {
            ino: ino.into(),
            size: a.size.into(),
            atime_ns: (a.atime_ns as u64).into(),
            mtime_ns: (a.mtime_ns as u64).into(),
            ctime_ns: (a.ctime_ns as u64).into(),
            dtype: a.kind.dtype(),
            flags: if complete { FLAG_COMPLETE } else { 0 },
            reserved: [0; 2],
            perm: a.perm.into(),
            uid: a.uid.into(),
            gid: a.gid.into(),
            rdev: a.rdev.into(),
            xattrs: (xattrs.len() as u32).into(),
            extents: (extents.len() as u32).into(),
            target_len: (target.len() as u32).into(),
        };
        let mut body = vec![ENTRY_INODE];
        body.extend_from_slice(head.as_bytes());
        body.extend_from_slice(&target);
        for (n, v) in &xattrs {
            body.extend_from_slice(&(n.len() as u32).to_le_bytes());
            body.extend_from_slice(&(v.len() as u32).to_le_bytes());
            body.extend_from_slice(n);
            body.extend_from_slice(v);
        }
        for e in &extents {
            body.extend_from_slice(e.as_bytes());
        }
        push_entry(&mut self.entries, &body);
        Ok(Some(a.kind))
    }

    /// A regular file's remote extents, each object they name noted, and
    /// whether every byte is in them (or in holes); counted as a complete
    /// or partial file.
    fn file_extents(
        &mut self,
        vol: &Volume,
        ino: u64,
    ) -> Result<(Vec<ExtentRaw>, bool), SnapshotError> {
        self.files += 1;
        let mut extents = Vec::new();
        let mut complete = true;
        for c in vol.chain(ino)? {
            match c.remote {
                Some((obj, obj_off)) => {
                    self.objects.insert(obj);
                    extents.push(ExtentRaw {
                        file_off: c.file_off.into(),
                        obj: obj.into(),
                        obj_off: obj_off.into(),
                        seq: c.seq.into(),
                        timestamp_ns: c.timestamp_ns.into(),
                        len: c.len.into(),
                        crc: c.payload_crc.into(),
                        flags: if c.from_network {
                            EXTENT_FROM_NETWORK
                        } else {
                            0
                        } | if c.kernel_time { EXTENT_KERNEL_TIME } else { 0 },
                        reserved: [0; 7],
                    });
                }
                None => complete = false,
            }
        }
        if complete {
            self.complete_files += 1;
        } else {
            self.partial_files += 1;
        }
        Ok((extents, complete))
    }

    /// The entry of a name: `name` in directory `dir` is inode `ino`.
    fn name(&mut self, dir: u64, ino: u64, name: &[u8]) {
        let mut body = vec![ENTRY_NAME];
        body.extend_from_slice(&dir.to_le_bytes());
        body.extend_from_slice(&ino.to_le_bytes());
        body.extend_from_slice(name);
        push_entry(&mut self.entries, &body);
        self.n_entries += 1;
    }

    /// The snapshot: its header, the objects named, then the entries.
    fn finish(self, sb: &Superblock, seq: u64, root: u64) -> Snapshot {
        let mut head = HeaderRaw {
            magic: SNAPSHOT_MAGIC,
            seq: seq.into(),
            created_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
                .into(),
            uuid: sb.uuid,
            image_len_bytes: sb.geometry.image_len_bytes.into(),
            objects: (self.objects.len() as u32).into(),
            entries: self.n_entries.into(),
            root: (root as u32).into(),
            crc: 0.into(),
        };
        head.crc = pktfs_layout::crc32c(&head.as_bytes()[..60]).into();
        let mut bytes =
            Vec::with_capacity(HEADER_BYTES + self.objects.len() * 8 + 4 + self.entries.len());
        bytes.extend_from_slice(head.as_bytes());
        let list: Vec<u8> = self.objects.iter().flat_map(|o| o.to_le_bytes()).collect();
        bytes.extend_from_slice(&list);
        bytes.extend_from_slice(&pktfs_layout::crc32c(&list).to_le_bytes());
        bytes.extend_from_slice(&self.entries);
        Snapshot {
            bytes,
            referenced_objects: self.objects,
            files: self.files,
            complete_files: self.complete_files,
            partial_files: self.partial_files,
        }
    }
}

fn parse_header(b: &[u8]) -> Result<HeaderRaw, SnapshotError> {
    let h = b
        .get(..HEADER_BYTES)
        .and_then(|h| HeaderRaw::read_from_bytes(h).ok())
        .ok_or_else(|| corrupt("shorter than a snapshot header"))?;
    if h.magic != SNAPSHOT_MAGIC && h.magic != SNAPSHOT_MAGIC_V1 {
        return Err(corrupt(
            "bad magic (not a pktfs snapshot, or a newer version)",
        ));
    }
    if pktfs_layout::crc32c(&h.as_bytes()[..60]) != h.crc.get() {
        return Err(corrupt("header checksum mismatch"));
    }
    Ok(h)
}

/// The objects a snapshot names (reads only its head).
pub fn referenced_objects(b: &[u8]) -> Result<BTreeSet<u64>, SnapshotError> {
    let h = parse_header(b)?;
    let n = h.objects.get() as usize;
    let end = HEADER_BYTES + n * 8;
    let list = b
        .get(HEADER_BYTES..end)
        .ok_or_else(|| corrupt("object list truncated"))?;
    let crc = b
        .get(end..end + 4)
        .ok_or_else(|| corrupt("object list truncated"))?;
    if pktfs_layout::crc32c(list).to_le_bytes() != crc {
        return Err(corrupt("object list checksum mismatch"));
    }
    Ok(list
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

/// A bounds-checked reader over one entry body.
struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        if self.0.len() < n {
            return Err(corrupt("an entry is shorter than its fields say"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().map_err(|_| corrupt("u32"))?,
        ))
    }
    fn u64(&mut self) -> Result<u64, SnapshotError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().map_err(|_| corrupt("u64"))?,
        ))
    }
}

/// Parse and check a whole snapshot.
pub fn parse(b: &[u8]) -> Result<ParsedSnapshot, SnapshotError> {
    let h = parse_header(b)?;
    let extent_bytes = if h.magic == SNAPSHOT_MAGIC_V1 {
        EXTENT_V1_BYTES
    } else {
        size_of::<ExtentRaw>()
    };
    let objects = referenced_objects(b)?;
    let mut at = HEADER_BYTES + objects.len() * 8 + 4;
    let mut inodes = Vec::new();
    let mut names = Vec::new();
    let mut known: HashMap<u64, FileType> = HashMap::new();
    let root = h.root.get() as u64;
    for k in 0..h.entries.get() {
        let len = b
            .get(at..at + 4)
            .map(|l| u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize)
            .ok_or_else(|| corrupt(format!("truncated at entry {k}")))?;
        let body = b
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| corrupt(format!("truncated in entry {k}")))?;
        let crc = b
            .get(at + 4 + len..at + 8 + len)
            .ok_or_else(|| corrupt(format!("truncated after entry {k}")))?;
        if pktfs_layout::crc32c(body).to_le_bytes() != crc {
            return Err(corrupt(format!("entry {k}: checksum mismatch")));
        }
        at += 8 + len;
        let mut c = Cur(body);
        match c.take(1)?[0] {
            ENTRY_INODE => {
                let raw = InodeRaw::read_from_bytes(c.take(size_of::<InodeRaw>())?)
                    .map_err(|_| corrupt("inode entry"))?;
                let kind = FileType::from_dtype(raw.dtype)
                    .ok_or_else(|| corrupt(format!("entry {k}: bad file type {}", raw.dtype)))?;
                let target = c.take(raw.target_len.get() as usize)?.to_vec();
                let mut xattrs = Vec::new();
                for _ in 0..raw.xattrs.get() {
                    let (nl, vl) = (c.u32()? as usize, c.u32()? as usize);
                    if nl == 0 || nl > 255 || vl > 65536 {
                        return Err(corrupt(format!("entry {k}: xattr of {nl}+{vl} bytes")));
                    }
                    xattrs.push((c.take(nl)?.to_vec(), c.take(vl)?.to_vec()));
                }
                let mut extents = Vec::new();
                let mut prev_end = 0u64;
                for _ in 0..raw.extents.get() {
                    // A version 1 extent is a version 2 one without its
                    // flags and reserved bytes: read into a zeroed one.
                    let mut whole = [0u8; size_of::<ExtentRaw>()];
                    whole[..extent_bytes].copy_from_slice(c.take(extent_bytes)?);
                    let e =
                        ExtentRaw::read_from_bytes(&whole[..]).map_err(|_| corrupt("extent"))?;
                    if e.flags & !(EXTENT_FROM_NETWORK | EXTENT_KERNEL_TIME) != 0
                        || e.reserved != [0; 7]
                    {
                        return Err(corrupt(format!(
                            "entry {k}: extent flags {:#x} or reserved bytes this version does not know",
                            e.flags
                        )));
                    }
                    let (off, len) = (e.file_off.get(), e.len.get());
                    let end = off
                        .checked_add(len as u64)
                        .ok_or_else(|| corrupt("extent overflows"))?;
                    if len == 0 || off < prev_end || end > raw.size.get() || e.obj.get() == 0 {
                        return Err(corrupt(format!(
                            "entry {k}: extents out of order or past the size"
                        )));
                    }
                    if !objects.contains(&e.obj.get()) {
                        return Err(corrupt(format!(
                            "entry {k}: names object {} the list lacks",
                            e.obj.get()
                        )));
                    }
                    prev_end = end;
                    extents.push(Extent {
                        file_off: off,
                        obj: e.obj.get(),
                        obj_off: e.obj_off.get(),
                        len,
                        crc32c: e.crc.get(),
                        seq: e.seq.get(),
                        timestamp_ns: e.timestamp_ns.get(),
                        from_network: e.flags & EXTENT_FROM_NETWORK != 0,
                        kernel_time: e.flags & EXTENT_KERNEL_TIME != 0,
                    });
                }
                if !c.0.is_empty() {
                    return Err(corrupt(format!("entry {k}: trailing bytes")));
                }
                let ino = raw.ino.get();
                if known.insert(ino, kind).is_some() {
                    return Err(corrupt(format!("inode {ino} appears twice")));
                }
                inodes.push(InodeEntry {
                    ino,
                    kind,
                    perm: raw.perm.get() & 0o7777,
                    uid: raw.uid.get(),
                    gid: raw.gid.get(),
                    rdev: raw.rdev.get(),
                    size: raw.size.get(),
                    atime_ns: raw.atime_ns.get() as i64,
                    mtime_ns: raw.mtime_ns.get() as i64,
                    ctime_ns: raw.ctime_ns.get() as i64,
                    complete: raw.flags & FLAG_COMPLETE != 0,
                    target,
                    xattrs,
                    extents,
                });
            }
            ENTRY_NAME => {
                let parent = c.u64()?;
                let ino = c.u64()?;
                let name = c.0.to_vec();
                if name.is_empty() || name.len() > 255 || name.contains(&b'/') || name.contains(&0)
                {
                    return Err(corrupt(format!("entry {k}: bad name")));
                }
                if known.get(&parent) != Some(&FileType::Directory) || !known.contains_key(&ino) {
                    return Err(corrupt(format!("entry {k}: a name before its inodes")));
                }
                names.push(NameEntry { parent, ino, name });
            }
            t => return Err(corrupt(format!("entry {k}: unknown type {t}"))),
        }
    }
    if at != b.len() {
        return Err(corrupt("bytes after the last entry"));
    }
    if known.get(&root) != Some(&FileType::Directory) {
        return Err(corrupt("no root directory"));
    }
    Ok(ParsedSnapshot {
        seq: h.seq.get(),
        created_ns: h.created_ns.get(),
        uuid: h.uuid,
        image_len_bytes: h.image_len_bytes.get(),
        objects,
        root,
        inodes,
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    /// docs/TIER.md's tables of the snapshot's header and extent are the
    /// structs: every row's offset and size, and every field in a row.
    #[test]
    fn the_format_doc_tables_match_the_structs() {
        let fields: &[crate::format_doc::Field] = &[
            ("HeaderRaw", "magic", offset_of!(HeaderRaw, magic), 8),
            ("HeaderRaw", "seq", offset_of!(HeaderRaw, seq), 8),
            (
                "HeaderRaw",
                "created_ns",
                offset_of!(HeaderRaw, created_ns),
                8,
            ),
            ("HeaderRaw", "uuid", offset_of!(HeaderRaw, uuid), 16),
            (
                "HeaderRaw",
                "image_len_bytes",
                offset_of!(HeaderRaw, image_len_bytes),
                8,
            ),
            ("HeaderRaw", "objects", offset_of!(HeaderRaw, objects), 4),
            ("HeaderRaw", "entries", offset_of!(HeaderRaw, entries), 4),
            ("HeaderRaw", "root", offset_of!(HeaderRaw, root), 4),
            ("HeaderRaw", "crc", offset_of!(HeaderRaw, crc), 4),
            ("ExtentRaw", "file_off", offset_of!(ExtentRaw, file_off), 8),
            ("ExtentRaw", "obj", offset_of!(ExtentRaw, obj), 8),
            ("ExtentRaw", "obj_off", offset_of!(ExtentRaw, obj_off), 8),
            ("ExtentRaw", "seq", offset_of!(ExtentRaw, seq), 8),
            (
                "ExtentRaw",
                "timestamp_ns",
                offset_of!(ExtentRaw, timestamp_ns),
                8,
            ),
            ("ExtentRaw", "len", offset_of!(ExtentRaw, len), 4),
            ("ExtentRaw", "crc", offset_of!(ExtentRaw, crc), 4),
            ("ExtentRaw", "flags", offset_of!(ExtentRaw, flags), 1),
            ("ExtentRaw", "reserved", offset_of!(ExtentRaw, reserved), 7),
            ("ExtentRaw", "(total)", 0, size_of::<ExtentRaw>()),
        ];
        crate::format_doc::assert_doc_tables_match(fields);
        // The header's last field ends the header.
        assert_eq!(offset_of!(HeaderRaw, crc) + 4, HEADER_BYTES);
    }
}

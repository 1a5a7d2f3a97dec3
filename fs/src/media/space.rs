//! Making an image file real memory before it is trusted.
//!
//! A mapped image whose file is sparse faults (SIGBUS) on the first store
//! to a page the file system cannot back, long after mkfs or mount said yes.
//! So mkfs allocates the whole file, and a writable open allocates whatever
//! is still missing, both refusing up front when the file system lacks the
//! room. Character devices (/dev/dax) are already real memory and are left
//! alone.
//!
//! **How sparseness is detected: `st_blocks`.** `st_blocks * 512 < st_size`
//! means some of the file has no backing. SEEK_HOLE would not do: on ext4,
//! xfs (iomap) and tmpfs an allocated-but-never-written range (exactly what
//! fallocate leaves) reads as a hole, so a freshly allocated image would look
//! sparse forever. `st_blocks` counts those allocations on all three. It can
//! err the other way only by a few blocks (ext4 and xfs count extent-tree
//! blocks too, so a file with holes smaller than its extent tree looks
//! complete); pktfs never makes such a file.
//!
//! **How it is allocated: fallocate(FALLOC_FL_KEEP_SIZE) over `[0, len)`.**
//! It allocates holes only: data already there is kept, and no byte of the
//! file changes. KEEP_SIZE rather than mode 0 so a refused or failed
//! allocation never leaves the file longer than it was; the caller sets the
//! length afterwards. On tmpfs a failed fallocate gives back what it took.
//!
//! **Where fallocate is not supported** (EOPNOTSUPP: some network and FUSE
//! file systems), the holes are filled by writing zeros, in 1 MiB reads and
//! writes: only 4 KiB pages that read as all zeros are rewritten (with
//! zeros), so the fill changes no byte either, and one that fails half way
//! leaves the contents as they were. That costs one read and at most one
//! write of the image, once. File systems that compress or deduplicate
//! zeros (or copy on write, like btrfs) may still fail a later write for
//! lack of space; nothing short of dedicated memory avoids that.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};

use nix::errno::Errno;
use nix::fcntl::FallocateFlags;

/// Bytes the file system has allocated to the file (`st_blocks` is in
/// 512-byte units whatever the block size).
pub fn allocated_bytes(meta: &std::fs::Metadata) -> u64 {
    meta.blocks().saturating_mul(512)
}

/// Does this kind of file need allocating? Only regular files can be
/// sparse; a DAX character device is memory already.
pub fn is_allocatable(meta: &std::fs::Metadata) -> bool {
    let t = meta.file_type();
    t.is_file() && !t.is_char_device()
}

/// Bytes an unprivileged writer may still allocate on the file system
/// holding `file` (statvfs `f_bavail * f_frsize`, what df calls Avail).
/// `None` when the file system reports no size at all (tmpfs mounted
/// without a size limit reports 0 blocks): then only the allocation itself
/// can tell.
pub fn free_bytes(file: &File) -> io::Result<Option<u64>> {
    let st = nix::sys::statvfs::fstatvfs(file).map_err(io::Error::from)?;
    if st.blocks() == 0 {
        return Ok(None);
    }
    Ok(Some(
        (st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64),
    ))
}

/// How [`allocate`] made the file real.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocatedBy {
    Fallocate,
    /// fallocate is not supported here: holes were filled with zeros.
    ZeroFill,
}

/// Allocate `[0, len_bytes)` of `file` without changing a byte of it. The
/// file's length is not changed by fallocate; the zero-fill fallback may
/// extend it to `len_bytes`, and puts the old length back if it fails. On
/// error nothing the file held is changed (some of the allocation may stay,
/// on file systems that do not give a failed fallocate back).
pub fn allocate(file: &File, len_bytes: u64) -> io::Result<AllocatedBy> {
    if len_bytes == 0 {
        return Ok(AllocatedBy::Fallocate);
    }
    let len = i64::try_from(len_bytes).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    loop {
        match nix::fcntl::fallocate(file, FallocateFlags::FALLOC_FL_KEEP_SIZE, 0, len) {
            Ok(()) => return Ok(AllocatedBy::Fallocate),
            // tmpfs gives up (and gives back) on a pending signal; the call
            // is idempotent, so ask again.
            Err(Errno::EINTR) => continue,
            Err(Errno::EOPNOTSUPP) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let old_len = file.metadata()?.len();
    match fill_zeros(file, len_bytes) {
        Ok(()) => Ok(AllocatedBy::ZeroFill),
        Err(e) => {
            if file.metadata().map(|m| m.len()).unwrap_or(old_len) != old_len {
                let _ = file.set_len(old_len);
            }
            Err(e)
        }
    }
}

/// Rewrite every 4 KiB page of `[0, len_bytes)` that reads as zeros (a hole,
/// past EOF, or zeros already) with zeros, so the file system must back it.
/// Pages holding data are already backed and are not touched.
pub(crate) fn fill_zeros(file: &File, len_bytes: u64) -> io::Result<()> {
    const CHUNK: usize = 1 << 20;
    const PAGE: usize = 4096;
    let zeros = vec![0u8; CHUNK];
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0u64;
    while off < len_bytes {
        let n = (len_bytes - off).min(CHUNK as u64) as usize;
        // Read what is there; short reads past EOF leave zeros behind.
        buf[..n].fill(0);
        let mut got = 0;
        while got < n {
            match file.read_at(&mut buf[got..n], off + got as u64) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // Write each run of all-zero pages back as one write.
        let mut p = 0;
        while p < n {
            let end = |q: usize| (q + PAGE).min(n);
            if buf[p..end(p)].iter().any(|&b| b != 0) {
                p = end(p);
                continue;
            }
            let mut q = end(p);
            while q < n && buf[q..end(q)].iter().all(|&b| b == 0) {
                q = end(q);
            }
            file.write_all_at(&zeros[..q - p], off + p as u64)?;
            p = q;
        }
        off += n as u64;
    }
    file.sync_data()
}

/// "63.9 MiB": sizes in messages.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human() {
        assert_eq!(human_bytes(100), "100 B");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
        assert_eq!(human_bytes(67_004_416), "63.9 MiB");
    }

    /// The fallback allocates holes (and past EOF) and changes no byte.
    #[test]
    fn zero_fill_keeps_data_and_backs_holes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        f.set_len(3 << 20).unwrap();
        f.write_all_at(b"keep me", 5000).unwrap();
        f.write_all_at(&[7u8; 8192], (2 << 20) + 100).unwrap();
        let before = std::fs::read(&p).unwrap();
        assert!(allocated_bytes(&f.metadata().unwrap()) < 1 << 20);
        fill_zeros(&f, 4 << 20).unwrap();
        let after = std::fs::read(&p).unwrap();
        assert_eq!(after.len(), 4 << 20);
        assert_eq!(&after[..before.len()], &before[..]);
        assert!(after[before.len()..].iter().all(|&b| b == 0));
        assert!(allocated_bytes(&f.metadata().unwrap()) >= 4 << 20);
    }

    #[test]
    fn allocate_backs_a_sparse_file_without_changing_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        f.set_len(2 << 20).unwrap();
        f.write_all_at(b"data", 70_000).unwrap();
        let before = std::fs::read(&p).unwrap();
        allocate(&f, 2 << 20).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), before);
        assert!(allocated_bytes(&f.metadata().unwrap()) >= 2 << 20);
    }
}

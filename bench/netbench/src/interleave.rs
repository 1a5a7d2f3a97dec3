//! The large transfers' files get their memory together, a slice of each
//! in turn.
//!
//! On this benchmark's VMs how fast stores stream into memory depends on
//! which memory it is, and in a run the memory taken first was the
//! slowest: two identical pktfs servers, one made first and one last,
//! were far apart in the same run, and a baseline's file ran much faster
//! made last than made first.
//! Why is not known for certain (this guest reports freed memory to its
//! host, virtio-balloon free page reporting, which may back it differently
//! when it is touched again). Files allocated one after another would each
//! get one kind; allocated in turns of [`STEP_BYTES`] each gets its share
//! of every kind, so no server is favoured by when it was made.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::PathBuf;

use nix::fcntl::{fallocate, FallocateFlags};

/// How much of one file is allocated before the next file's turn.
pub const STEP_BYTES: u64 = 16 << 20;

/// Create (or keep) each file at its length and allocate its blocks, the
/// files taking turns of [`STEP_BYTES`]. Files that exist keep their
/// bytes (they are only extended or allocated); a file system without
/// `fallocate` is left to allocate as the files are written.
pub fn allocate(files: &[(PathBuf, u64)]) -> io::Result<()> {
    let mut open: Vec<(File, u64)> = Vec::with_capacity(files.len());
    for (path, len) in files {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        f.set_len(*len)?;
        open.push((f, *len));
    }
    let longest = open.iter().map(|(_, l)| *l).max().unwrap_or(0);
    let mut off = 0;
    while off < longest {
        for (f, len) in &open {
            if off >= *len {
                continue;
            }
            let n = STEP_BYTES.min(len - off);
            loop {
                match fallocate(f, FallocateFlags::FALLOC_FL_KEEP_SIZE, off as i64, n as i64) {
                    Ok(()) => break,
                    // tmpfs gives up on a pending signal; asking again is safe.
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(nix::errno::Errno::EOPNOTSUPP) => return Ok(()),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        off += STEP_BYTES;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn every_file_is_allocated_at_its_length_and_keeps_its_bytes() {
        let dir = std::env::temp_dir().join(format!("netbench-interleave-{}", std::process::id()));
        let a = dir.join("a");
        let b = dir.join("sub").join("b");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&a, b"kept").unwrap();
        let (la, lb) = (3 * super::STEP_BYTES / 2, super::STEP_BYTES / 4);
        super::allocate(&[(a.clone(), la), (b.clone(), lb)]).unwrap();
        for (p, l) in [(&a, la), (&b, lb)] {
            let m = std::fs::metadata(p).unwrap();
            assert_eq!(m.len(), l);
            assert!(m.blocks() * 512 >= l, "{} not allocated", p.display());
        }
        assert_eq!(&std::fs::read(&a).unwrap()[..4], b"kept");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

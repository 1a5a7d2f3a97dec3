//! A sparse image is completed (its holes allocated) by a writable open, or
//! the open is refused with a clear error and the image left untouched:
//! never a mapping that faults (SIGBUS) once the file system fills up.
//! Read-only opens map it as it is.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use pktfs_fs::media::{MapOptions, MediaError, Pm};
use pktfs_fs::{FormatOptions, FsError, OpenOptions, Volume};
use pktfs_layout::GeometryParams;
use pktfs_testkit::tmpfs::Tmpfs;
use rustix::fs::FallocateFlags;

fn allocated_bytes(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

/// An image of `len_bytes` holding /keep, with its last `hole_bytes` (free
/// packet buffers: the file's data sits at the front) punched out.
fn sparse_image(p: &Path, len_bytes: u64, hole_bytes: u64) -> Vec<u8> {
    Volume::format(
        p,
        &FormatOptions {
            params: GeometryParams::for_size(len_bytes),
            label: None,
        },
        &mut |_, _| {},
    )
    .unwrap();
    assert!(allocated_bytes(p) >= len_bytes, "format allocates it all");
    let v = Volume::open(p, &OpenOptions::default()).unwrap();
    let f = v.create(v.root(), b"keep", 0o644, 0, 0).unwrap();
    v.write(f.ino, 0, &[0x5a; 10_000]).unwrap();
    v.close().unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    rustix::fs::fallocate(
        &file,
        FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
        len_bytes - hole_bytes,
        hole_bytes,
    )
    .unwrap();
    assert!(
        allocated_bytes(p) <= len_bytes - hole_bytes,
        "the punch made a hole"
    );
    std::fs::read(p).unwrap()
}

fn read_keep(v: &Volume) -> Vec<u8> {
    let ino = v.lookup(v.root(), b"keep").unwrap().ino;
    v.read(ino, 0, 100_000).unwrap()
}

/// Works on any file system that punches holes (no mount needed).
#[test]
fn writable_open_completes_a_sparse_image() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("img");
    let len = 16u64 << 20;
    sparse_image(&p, len, 6 << 20);
    let sparse_blocks = allocated_bytes(&p);

    // Read-only: mapped as it is.
    let v = Volume::open(
        &p,
        &OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(v.open_report().completed_bytes, 0);
    assert_eq!(read_keep(&v), vec![0x5a; 10_000]);
    drop(v);
    assert_eq!(
        allocated_bytes(&p),
        sparse_blocks,
        "read-only open allocated"
    );

    // Writable: completed first, and says so.
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    assert!(
        v.open_report().completed_bytes >= 5 << 20,
        "{:?}",
        v.open_report()
    );
    let note = v.open_report().completed_note(&p).unwrap();
    assert!(note.contains("was sparse"), "{note}");
    assert!(allocated_bytes(&p) >= len, "{}", allocated_bytes(&p));
    assert_eq!(read_keep(&v), vec![0x5a; 10_000]);
    // The volume works: fill most of it, into the part that was a hole.
    let f = v.create(v.root(), b"big", 0o644, 0, 0).unwrap();
    let chunk = vec![0xa5u8; 1 << 20];
    for i in 0..8 {
        v.write(f.ino, i << 20, &chunk).unwrap();
    }
    v.close().unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    assert_eq!(
        v.open_report().completed_bytes,
        0,
        "complete stays complete"
    );
    let ino = v.lookup(v.root(), b"big").unwrap().ino;
    assert_eq!(v.read(ino, 7 << 20, 1 << 20).unwrap(), chunk);
    v.close().unwrap();
}

/// On a tmpfs too full to complete it, a writable open is refused with the
/// numbers, the image untouched; read-only still works; once there is room
/// the writable open completes it.
#[test]
fn writable_open_of_a_sparse_image_without_room_is_refused() {
    let Some(fs) = Tmpfs::mount(
        "sparse_open::writable_open_of_a_sparse_image_without_room_is_refused",
        32 << 20,
    ) else {
        return;
    };
    let p = fs.path().join("img");
    let len = 16u64 << 20;
    let before = sparse_image(&p, len, 12 << 20);
    let sparse_blocks = allocated_bytes(&p);
    // Leave less free than the 12 MiB hole needs.
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![1u8; 24 << 20]).unwrap();

    let e = Volume::open(&p, &OpenOptions::default()).expect_err("no room to complete it");
    assert!(
        matches!(e, FsError::Media(MediaError::SparseNoRoom { .. })),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{} is sparse: ", p.display()))
            && msg.contains("are not allocated")
            && msg.contains("free")
            && msg.contains("read-only"),
        "{msg}"
    );
    assert_eq!(
        msg.matches(&*p.display().to_string()).count(),
        1,
        "path named once: {msg}"
    );
    assert_eq!(std::fs::read(&p).unwrap(), before, "a refused open wrote");
    assert_eq!(
        allocated_bytes(&p),
        sparse_blocks,
        "a refused open allocated"
    );
    // The media layer refuses the same way (fsck -y, mkfs's re-open).
    assert!(matches!(
        Pm::open(&p, &MapOptions::default()),
        Err(MediaError::SparseNoRoom { .. })
    ));

    let v = Volume::open(
        &p,
        &OpenOptions {
            read_only: true,
            ..Default::default()
        },
    )
    .expect("read-only needs no backing");
    assert_eq!(read_keep(&v), vec![0x5a; 10_000]);
    drop(v);
    // Nor does a read-only open take room: it is not pre-faulted (on tmpfs
    // a read fault on a hole allocates a page).
    assert_eq!(
        allocated_bytes(&p),
        sparse_blocks,
        "a read-only open allocated"
    );

    std::fs::remove_file(&filler).unwrap();
    // Completing changes no byte of the image.
    let pm = Pm::open(&p, &MapOptions::default()).unwrap();
    assert!(pm.completed_bytes() >= 11 << 20, "{}", pm.completed_bytes());
    drop(pm);
    assert!(allocated_bytes(&p) >= len);
    assert_eq!(std::fs::read(&p).unwrap(), before, "completing wrote");
    // Fill the tmpfs around it again: the image's own writes cannot fault.
    std::fs::write(&filler, vec![1u8; 15 << 20]).unwrap();
    let v = Volume::open(&p, &OpenOptions::default()).unwrap();
    assert_eq!(v.open_report().completed_bytes, 0);
    let f = v.create(v.root(), b"big", 0o644, 0, 0).unwrap();
    let chunk = vec![0xa5u8; 1 << 20];
    for i in 0..8 {
        v.write(f.ino, i << 20, &chunk).unwrap();
    }
    assert_eq!(read_keep(&v), vec![0x5a; 10_000]);
    v.close().unwrap();
}

/// Volume::format (what mkfs.pktfs and `pktfs up` call) on a tmpfs: too
/// large is refused with no file left; an existing image asked to grow past
/// the room keeps its length and bytes.
#[test]
fn format_refuses_what_the_tmpfs_cannot_hold() {
    let Some(fs) = Tmpfs::mount(
        "sparse_open::format_refuses_what_the_tmpfs_cannot_hold",
        32 << 20,
    ) else {
        return;
    };
    let fmt = |p: &Path, len: u64| {
        Volume::format(
            p,
            &FormatOptions {
                params: GeometryParams::for_size(len),
                label: None,
            },
            &mut |_, _| {},
        )
    };
    let p = fs.path().join("img");
    let e = fmt(&p, 64 << 20).expect_err("64 MiB on a 32 MiB tmpfs");
    assert!(
        matches!(e, FsError::Media(MediaError::NoRoom { .. })),
        "{e:?}"
    );
    assert!(!p.exists());

    fmt(&p, 8 << 20).unwrap();
    assert!(allocated_bytes(&p) >= 8 << 20);
    let before = std::fs::read(&p).unwrap();
    let e = fmt(&p, 48 << 20).expect_err("48 MiB does not fit");
    assert!(e.to_string().contains("choose --size at most"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), before);
    Volume::open(&p, &OpenOptions::default())
        .unwrap()
        .close()
        .unwrap();
}

//! The C ABI of this library (`include/pktfs_direct.h`, libpktfs_direct.so): opaque handles
//! over `Image` and `File`, errno and a per-thread message for failures.
//!
//! # Contract
//! Handles are boxes this library made and only it frees (`*_close`);
//! every pointer argument is used as the header says (a C string, a buffer
//! of the given length, a `struct pktfs_stat` to fill). NULL handles and
//! paths are refused with EINVAL rather than dereferenced. Nothing here
//! panics across the boundary: a panic is caught and reported as EIO.

#![allow(unsafe_code)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::IoSliceMut;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::{Error, File, Image, OpenOptions, Seg, Stat, VerifyMode};

/// The image handle behind `pktfs_image *`.
#[derive(Debug)]
pub struct PktfsImage(Image);
/// The file handle behind `pktfs_file *`.
#[derive(Debug)]
pub struct PktfsFile(File);

#[repr(C)]
#[derive(Debug, Default)]
pub struct PktfsStat {
    pub ino: u64,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub blocks: u64,
    pub blksize: u32,
    pub rdev: u32,
    pub atime_ns: i64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

#[repr(C)]
#[derive(Debug)]
pub struct PktfsPiece {
    pub data: *const c_void,
    pub len: usize,
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::new("no error").expect("no NUL"));
}

fn fail(errno: c_int, msg: String) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    let _ = LAST.try_with(|l| *l.borrow_mut() = c);
    // SAFETY: errno's location is valid for the calling thread.
    unsafe { *libc::__errno_location() = errno };
}

fn fail_with(e: &Error) {
    fail(e.errno(), e.to_string());
}

/// Run `f`, turning a panic into EIO and `err` (what to return then).
fn guarded<T>(err: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            fail(
                libc::EIO,
                "pktfs_direct: an internal error (a panic)".into(),
            );
            err
        }
    }
}

/// A C string argument as &str, or EINVAL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives the call.
unsafe fn text<'a>(p: *const c_char, what: &str) -> Option<&'a str> {
    if p.is_null() {
        fail(libc::EINVAL, format!("{what} is NULL"));
        return None;
    }
    // SAFETY: the caller's promise.
    match unsafe { CStr::from_ptr(p) }.to_str() {
        Ok(s) => Some(s),
        Err(_) => {
            fail(libc::EINVAL, format!("{what} is not UTF-8"));
            None
        }
    }
}

fn fill(out: &mut PktfsStat, s: &Stat) {
    *out = PktfsStat {
        ino: s.ino,
        mode: s.mode(),
        nlink: s.nlink,
        uid: s.uid,
        gid: s.gid,
        size: s.size,
        blocks: s.blocks,
        blksize: s.blksize,
        rdev: s.rdev,
        atime_ns: s.atime_ns,
        mtime_ns: s.mtime_ns,
        ctime_ns: s.ctime_ns,
    };
}

/// # Safety
/// See pktfs_direct.h.
#[no_mangle]
pub unsafe extern "C" fn pktfs_image_open(path: *const c_char, verify: c_int) -> *mut PktfsImage {
    guarded(std::ptr::null_mut(), || {
        // SAFETY: the caller's string.
        let Some(path) = (unsafe { text(path, "the image path") }) else {
            return std::ptr::null_mut();
        };
        let verify = match verify {
            0 => None,
            1 => Some(VerifyMode::Once),
            2 => Some(VerifyMode::Always),
            3 => Some(VerifyMode::Off),
            v => {
                fail(libc::EINVAL, format!("unknown verify mode {v}"));
                return std::ptr::null_mut();
            }
        };
        match Image::open_with(path, &OpenOptions { verify }) {
            Ok(i) => Box::into_raw(Box::new(PktfsImage(i))),
            Err(e) => {
                fail_with(&e);
                std::ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// `image` is NULL or a handle from pktfs_image_open, not used after.
#[no_mangle]
pub unsafe extern "C" fn pktfs_image_close(image: *mut PktfsImage) {
    if !image.is_null() {
        // SAFETY: made by Box::into_raw in pktfs_image_open; freed once.
        drop(unsafe { Box::from_raw(image) });
    }
}

/// # Safety
/// See pktfs_direct.h.
#[no_mangle]
pub unsafe extern "C" fn pktfs_stat(
    image: *mut PktfsImage,
    path: *const c_char,
    out: *mut PktfsStat,
) -> c_int {
    guarded(-1, || {
        // SAFETY: NULL or a live handle (the caller's promise).
        let (Some(img), false) = (unsafe { image.as_ref() }, out.is_null()) else {
            fail(libc::EINVAL, "a NULL image or stat buffer".into());
            return -1;
        };
        // SAFETY: the caller's string.
        let Some(path) = (unsafe { text(path, "the path") }) else {
            return -1;
        };
        match img.0.stat_path(path) {
            Ok(s) => {
                // SAFETY: `out` is a struct pktfs_stat to fill (non-NULL).
                fill(unsafe { &mut *out }, &s);
                0
            }
            Err(e) => {
                fail_with(&e);
                -1
            }
        }
    })
}

fn boxed(r: Result<File, Error>) -> *mut PktfsFile {
    match r {
        Ok(f) => Box::into_raw(Box::new(PktfsFile(f))),
        Err(e) => {
            fail_with(&e);
            std::ptr::null_mut()
        }
    }
}

/// # Safety
/// See pktfs_direct.h.
#[no_mangle]
pub unsafe extern "C" fn pktfs_open(image: *mut PktfsImage, path: *const c_char) -> *mut PktfsFile {
    guarded(std::ptr::null_mut(), || {
        // SAFETY: NULL or a live handle.
        let Some(img) = (unsafe { image.as_ref() }) else {
            fail(libc::EINVAL, "a NULL image".into());
            return std::ptr::null_mut();
        };
        // SAFETY: the caller's string.
        match unsafe { text(path, "the path") } {
            Some(p) => boxed(img.0.open_file(p)),
            None => std::ptr::null_mut(),
        }
    })
}

/// # Safety
/// See pktfs_direct.h.
#[no_mangle]
pub unsafe extern "C" fn pktfs_open_ino(image: *mut PktfsImage, ino: u64) -> *mut PktfsFile {
    guarded(std::ptr::null_mut(), || {
        // SAFETY: NULL or a live handle.
        match unsafe { image.as_ref() } {
            Some(img) => boxed(img.0.open_ino(ino)),
            None => {
                fail(libc::EINVAL, "a NULL image".into());
                std::ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// `file` is NULL or a handle from pktfs_open*, not used after.
#[no_mangle]
pub unsafe extern "C" fn pktfs_close(file: *mut PktfsFile) {
    if !file.is_null() {
        // SAFETY: made by Box::into_raw in pktfs_open*; freed once.
        drop(unsafe { Box::from_raw(file) });
    }
}

/// # Safety
/// See pktfs_direct.h.
#[no_mangle]
pub unsafe extern "C" fn pktfs_fstat(file: *mut PktfsFile, out: *mut PktfsStat) -> c_int {
    guarded(-1, || {
        // SAFETY: NULL or a live handle.
        let (Some(f), false) = (unsafe { file.as_ref() }, out.is_null()) else {
            fail(libc::EINVAL, "a NULL file or stat buffer".into());
            return -1;
        };
        match f.0.stat() {
            Ok(s) => {
                // SAFETY: a struct pktfs_stat to fill (non-NULL).
                fill(unsafe { &mut *out }, &s);
                0
            }
            Err(e) => {
                fail_with(&e);
                -1
            }
        }
    })
}

fn read_into(f: &PktfsFile, bufs: &mut [IoSliceMut<'_>], off: u64) -> isize {
    match f.0.read_vectored_at(bufs, off) {
        Ok(n) => n as isize,
        Err(e) => {
            fail_with(&e);
            -1
        }
    }
}

/// # Safety
/// See pktfs_direct.h: `buf` is valid for writes of `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn pktfs_pread(
    file: *mut PktfsFile,
    buf: *mut c_void,
    len: usize,
    off: u64,
) -> isize {
    guarded(-1, || {
        // SAFETY: NULL or a live handle.
        let Some(f) = (unsafe { file.as_ref() }) else {
            fail(libc::EINVAL, "a NULL file".into());
            return -1;
        };
        if len == 0 {
            return 0;
        }
        if buf.is_null() {
            fail(libc::EFAULT, "a NULL buffer".into());
            return -1;
        }
        // SAFETY: the caller's buffer of `len` bytes.
        let b =
            unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len.min(isize::MAX as usize)) };
        read_into(f, &mut [IoSliceMut::new(b)], off)
    })
}

/// # Safety
/// See pktfs_direct.h: `iov` holds `iovcnt` buffers valid for writes.
#[no_mangle]
pub unsafe extern "C" fn pktfs_preadv(
    file: *mut PktfsFile,
    iov: *const libc::iovec,
    iovcnt: c_int,
    off: u64,
) -> isize {
    guarded(-1, || {
        // SAFETY: NULL or a live handle.
        let Some(f) = (unsafe { file.as_ref() }) else {
            fail(libc::EINVAL, "a NULL file".into());
            return -1;
        };
        if !(0..=1024).contains(&iovcnt) || (iovcnt > 0 && iov.is_null()) {
            fail(libc::EINVAL, format!("{iovcnt} iovecs"));
            return -1;
        }
        let mut bufs = Vec::with_capacity(iovcnt as usize);
        for k in 0..iovcnt as usize {
            // SAFETY: the caller's iovec array of `iovcnt` entries.
            let v = unsafe { *iov.add(k) };
            if v.iov_len == 0 {
                continue;
            }
            if v.iov_base.is_null() {
                fail(libc::EFAULT, "an iovec with a NULL base".into());
                return -1;
            }
            // SAFETY: each iovec names a buffer valid for writes.
            bufs.push(IoSliceMut::new(unsafe {
                std::slice::from_raw_parts_mut(v.iov_base as *mut u8, v.iov_len)
            }));
        }
        read_into(f, &mut bufs, off)
    })
}

/// # Safety
/// See pktfs_direct.h.
#[no_mangle]
pub unsafe extern "C" fn pktfs_read_with(
    file: *mut PktfsFile,
    off: u64,
    len: usize,
    cb: Option<unsafe extern "C" fn(*const PktfsPiece, usize, *mut c_void) -> c_int>,
    arg: *mut c_void,
) -> c_int {
    guarded(-1, || {
        // SAFETY: NULL or a live handle.
        let (Some(f), Some(cb)) = (unsafe { file.as_ref() }, cb) else {
            fail(libc::EINVAL, "a NULL file or callback".into());
            return -1;
        };
        let r = f.0.read_with(off, len as u64, |segs| {
            let pieces: Vec<PktfsPiece> = segs
                .iter()
                .map(|s| match *s {
                    Seg::Data(d) => PktfsPiece {
                        data: d.as_ptr() as *const c_void,
                        len: d.len(),
                    },
                    Seg::Zero(n) => PktfsPiece {
                        data: std::ptr::null(),
                        len: n,
                    },
                })
                .collect();
            // SAFETY: the caller's callback, given pieces valid while it
            // runs (the lend lasts until read_with returns) and its `arg`.
            unsafe { cb(pieces.as_ptr(), pieces.len(), arg) }
        });
        match r {
            Ok(v) => v,
            Err(e) => {
                fail_with(&e);
                -1
            }
        }
    })
}

/// # Safety
/// Always safe; the pointer is valid until this thread's next call.
#[no_mangle]
pub unsafe extern "C" fn pktfs_last_error() -> *const c_char {
    LAST.try_with(|l| l.borrow().as_ptr())
        .unwrap_or(c"pktfs_direct: no error state (thread exiting)".as_ptr())
}

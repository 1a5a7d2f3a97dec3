//! The functions the shim exports in place of the C library's.
//!
//! # Contract
//! Every interposer first does exactly what the C library would for any
//! descriptor the shim does not serve (it calls the real function with the
//! same arguments). For a served descriptor (a regular file of a pktfs
//! mount opened read-only, whose image this process may map) it copies
//! the bytes from the image instead, and keeps the kernel's half true: the
//! descriptor stays the real FUSE one, and `read`/`readv` move the
//! kernel's file offset exactly as the kernel would, so `dup`, `fork`,
//! `sendfile`, stdio and anything else that uses the descriptor directly
//! see the same position. Whatever the shim cannot serve (a range in the
//! tier, damage, a file that keeps changing, an error of any kind) goes to
//! the kernel, whose answer is what the program would have had anyway.
//!
//! Pointers from the program are used exactly as the C function would use
//! them: `buf` for `count` bytes, `iov` for `iovcnt` entries, `statbuf` as
//! one `struct stat`. A program that passes invalid ones gets from the
//! shim what it gets from any C library function that touches them.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::io::IoSliceMut;
use std::sync::Arc;

use libc::{iovec, off64_t, off_t, size_t, ssize_t, FILE};

use crate::guard::{self, Inside};
use crate::table::{self, Entry};
use crate::{mounts, real, stats};

/// The most one read moves, as the kernel caps it (MAX_RW_COUNT).
const MAX_RW: usize = 0x7fff_f000;
/// The most iovecs one call takes (IOV_MAX).
const IOV_MAX: c_int = 1024;

/// The served entry of `fd`, unless this thread is inside the shim.
fn entry(fd: c_int) -> Option<Arc<Entry>> {
    if guard::inside() {
        return None;
    }
    table::get(fd)
}

/// Keep errno as it was across the shim's own work.
struct KeepErrno(c_int);

impl KeepErrno {
    fn new() -> KeepErrno {
        // SAFETY: errno's location is valid for the calling thread.
        KeepErrno(unsafe { *libc::__errno_location() })
    }
}

impl Drop for KeepErrno {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

/// After a successful open: serve `fd`'s reads directly if it is a
/// regular file of a pktfs mount opened for reading (read-only or
/// read-write: writes go to the kernel, and a write through FUSE is in the
/// image when it returns, pktfs mounting without a writeback cache) whose
/// image this process may map.
fn after_open(fd: c_int, flags: c_int) -> c_int {
    if fd < 0 || guard::inside() || !crate::enabled() {
        return fd;
    }
    let _inside = Inside::enter();
    let _errno = KeepErrno::new();
    // Whatever entry the number had belongs to a descriptor closed behind
    // the shim's back (by a path it cannot see): it is gone now.
    table::remove(fd);
    let skip = libc::O_PATH | libc::O_DIRECTORY | libc::O_DIRECT;
    if flags & libc::O_ACCMODE == libc::O_WRONLY || flags & skip != 0 {
        return fd;
    }
    // SAFETY: a zeroed stat64 is a valid out-parameter.
    let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open (just returned) and `st` is a valid out-param.
    if unsafe { real::fstat64(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return fd;
    }
    if crate::mapped_for_write(st.st_dev, st.st_ino) {
        return fd;
    }
    let Some(image) = mounts::image_of(fd, st.st_dev) else {
        return fd;
    };
    if let Ok(file) = image.open_ino(st.st_ino) {
        table::insert(fd, Entry::new(file, st));
        stats::opened();
    }
    fd
}

/// A direct read for `fd`'s entry at `off` into the program's buffers;
/// None: let the kernel do it.
fn read_into(e: &Entry, fd: c_int, bufs: &mut [IoSliceMut<'_>], off: u64) -> Option<usize> {
    match e.file.read_vectored_at(bufs, off) {
        Ok(n) => {
            stats::read(n);
            Some(n)
        }
        Err(pktfs_direct::Error::Stale(_)) => {
            // The holder restarted: still the same file behind `fd`?
            let still = || {
                // SAFETY: a zeroed stat64 is a valid out-parameter.
                let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
                // SAFETY: `st` is a valid out-parameter.
                let ok = unsafe { real::fstat64(fd, &mut st) } == 0;
                ok && st.st_ino == e.base.st_ino && st.st_dev == e.base.st_dev
            };
            if e.file.rebind(still).is_err() {
                table::remove(fd);
            }
            stats::fell_back();
            None
        }
        Err(_) => {
            stats::fell_back();
            None
        }
    }
}

/// The program's buffer as a slice (None for a null pointer with a length).
///
/// # Safety
/// `buf` must be valid for writes of `n` bytes (the C contract of read).
unsafe fn user_buf<'a>(buf: *mut c_void, n: size_t) -> Option<&'a mut [u8]> {
    let n = n.min(MAX_RW);
    if n == 0 {
        return Some(&mut []);
    }
    if buf.is_null() {
        return None;
    }
    // SAFETY: the caller's promise (the program's, through read).
    Some(unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, n) })
}

/// The program's iovecs as slices (None if the kernel would refuse them).
///
/// # Safety
/// `iov` must point to `cnt` iovecs, each valid for writes of its length.
unsafe fn user_iov<'a>(iov: *const iovec, cnt: c_int) -> Option<Vec<IoSliceMut<'a>>> {
    if !(0..=IOV_MAX).contains(&cnt) || (cnt > 0 && iov.is_null()) {
        return None;
    }
    let mut total = 0usize;
    let mut out = Vec::with_capacity(cnt as usize);
    for k in 0..cnt as usize {
        // SAFETY: the caller's promise.
        let v = unsafe { *iov.add(k) };
        total = total.checked_add(v.iov_len)?;
        if total > isize::MAX as usize {
            return None; // the kernel says EINVAL
        }
        // SAFETY: the caller's promise.
        out.push(IoSliceMut::new(unsafe { user_buf(v.iov_base, v.iov_len)? }));
    }
    Some(out)
}

/// `read`/`readv` on a served descriptor: at the kernel's offset, which
/// then moves by what was read.
fn read_at_pos(e: &Entry, fd: c_int, bufs: &mut [IoSliceMut<'_>]) -> Option<ssize_t> {
    let _inside = Inside::enter();
    e.with_pos(|| {
        // SAFETY: lseek on the program's own descriptor.
        let cur = unsafe { real::lseek64(fd, 0, libc::SEEK_CUR) };
        if cur < 0 {
            return None;
        }
        let n = read_into(e, fd, bufs, cur as u64)?;
        // SAFETY: as above. If the kernel refuses to move, the bytes are
        // not counted: the kernel's own read will fetch them again.
        if unsafe { real::lseek64(fd, cur + n as i64, libc::SEEK_SET) } < 0 {
            return None;
        }
        Some(n as ssize_t)
    })
    .flatten()
}

fn pread_direct(e: &Entry, fd: c_int, bufs: &mut [IoSliceMut<'_>], off: i64) -> Option<ssize_t> {
    if off < 0 {
        return None; // EINVAL, from the kernel
    }
    let _inside = Inside::enter();
    read_into(e, fd, bufs, off as u64).map(|n| n as ssize_t)
}

/// # Safety
/// The C contract of read.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    if let Some(e) = entry(fd) {
        // SAFETY: the program's promise, through read.
        if let Some(b) = unsafe { user_buf(buf, n) } {
            if let Some(r) = read_at_pos(&e, fd, &mut [IoSliceMut::new(b)]) {
                return r;
            }
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::read(fd, buf, n) }
}

/// # Safety
/// The C contract of pread.
#[no_mangle]
pub unsafe extern "C" fn pread(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
    if let Some(e) = entry(fd) {
        // SAFETY: the program's promise.
        if let Some(b) = unsafe { user_buf(buf, n) } {
            if let Some(r) = pread_direct(&e, fd, &mut [IoSliceMut::new(b)], off) {
                return r;
            }
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::pread(fd, buf, n, off) }
}

/// # Safety
/// The C contract of pread64.
#[no_mangle]
pub unsafe extern "C" fn pread64(fd: c_int, buf: *mut c_void, n: size_t, off: off64_t) -> ssize_t {
    if let Some(e) = entry(fd) {
        // SAFETY: the program's promise.
        if let Some(b) = unsafe { user_buf(buf, n) } {
            if let Some(r) = pread_direct(&e, fd, &mut [IoSliceMut::new(b)], off) {
                return r;
            }
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::pread64(fd, buf, n, off) }
}

/// # Safety
/// The C contract of readv.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    if let Some(e) = entry(fd) {
        // SAFETY: the program's promise.
        if let Some(mut v) = unsafe { user_iov(iov, cnt) } {
            if let Some(r) = read_at_pos(&e, fd, &mut v) {
                return r;
            }
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::readv(fd, iov, cnt) }
}

/// Shared by the preadv family (`flags` other than 0 go to the kernel).
///
/// # Safety
/// The C contract of preadv.
unsafe fn preadv_any(fd: c_int, iov: *const iovec, cnt: c_int, off: i64) -> Option<ssize_t> {
    let e = entry(fd)?;
    // SAFETY: the caller's promise.
    let mut v = unsafe { user_iov(iov, cnt) }?;
    pread_direct(&e, fd, &mut v, off)
}

/// # Safety
/// The C contract of preadv.
#[no_mangle]
pub unsafe extern "C" fn preadv(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
    // SAFETY: the program's promise, then its call passed on.
    unsafe { preadv_any(fd, iov, cnt, off).unwrap_or_else(|| real::preadv(fd, iov, cnt, off)) }
}

/// # Safety
/// The C contract of preadv64.
#[no_mangle]
pub unsafe extern "C" fn preadv64(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off64_t,
) -> ssize_t {
    // SAFETY: as preadv.
    unsafe { preadv_any(fd, iov, cnt, off).unwrap_or_else(|| real::preadv64(fd, iov, cnt, off)) }
}

/// # Safety
/// The C contract of preadv2.
#[no_mangle]
pub unsafe extern "C" fn preadv2(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off_t,
    flags: c_int,
) -> ssize_t {
    // offset -1: "the current position", as readv.
    if flags == 0 && off >= 0 {
        // SAFETY: as preadv.
        if let Some(r) = unsafe { preadv_any(fd, iov, cnt, off) } {
            return r;
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::preadv2(fd, iov, cnt, off, flags) }
}

/// # Safety
/// The C contract of preadv64v2.
#[no_mangle]
pub unsafe extern "C" fn preadv64v2(
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: off64_t,
    flags: c_int,
) -> ssize_t {
    if flags == 0 && off >= 0 {
        // SAFETY: as preadv.
        if let Some(r) = unsafe { preadv_any(fd, iov, cnt, off) } {
            return r;
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::preadv64v2(fd, iov, cnt, off, flags) }
}

/// SEEK_END from the image's size (the kernel's may be a cached one);
/// every other whence is the kernel's.
fn lseek_direct(fd: c_int, off: i64, whence: c_int) -> Option<i64> {
    if whence != libc::SEEK_END {
        return None;
    }
    let e = entry(fd)?;
    let _inside = Inside::enter();
    let size = e.file.len().ok()? as i64;
    let to = size.checked_add(off).filter(|&t| t >= 0)?;
    // SAFETY: lseek on the program's own descriptor.
    e.with_pos(|| unsafe { real::lseek64(fd, to, libc::SEEK_SET) })
}

/// # Safety
/// The C contract of lseek.
#[no_mangle]
pub unsafe extern "C" fn lseek(fd: c_int, off: off_t, whence: c_int) -> off_t {
    // SAFETY: the program's call, passed on.
    lseek_direct(fd, off, whence).unwrap_or_else(|| unsafe { real::lseek(fd, off, whence) })
}

/// # Safety
/// The C contract of lseek64.
#[no_mangle]
pub unsafe extern "C" fn lseek64(fd: c_int, off: off64_t, whence: c_int) -> off64_t {
    // SAFETY: the program's call, passed on.
    lseek_direct(fd, off, whence).unwrap_or_else(|| unsafe { real::lseek64(fd, off, whence) })
}

/// The served descriptor's `stat`: the kernel's fields from its open, the
/// image's attributes now.
fn stat_direct(fd: c_int) -> Option<libc::stat64> {
    let e = entry(fd)?;
    let _inside = Inside::enter();
    let s = e.file.stat().ok()?;
    let mut st = e.base;
    st.st_mode = s.mode();
    st.st_nlink = s.nlink as _;
    st.st_uid = s.uid;
    st.st_gid = s.gid;
    st.st_size = s.size as i64;
    st.st_blocks = s.blocks as i64;
    st.st_blksize = s.blksize as _;
    st.st_atime = s.atime_ns.div_euclid(1_000_000_000);
    st.st_atime_nsec = s.atime_ns.rem_euclid(1_000_000_000);
    st.st_mtime = s.mtime_ns.div_euclid(1_000_000_000);
    st.st_mtime_nsec = s.mtime_ns.rem_euclid(1_000_000_000);
    st.st_ctime = s.ctime_ns.div_euclid(1_000_000_000);
    st.st_ctime_nsec = s.ctime_ns.rem_euclid(1_000_000_000);
    Some(st)
}

/// # Safety
/// The C contract of fstat.
#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, out: *mut libc::stat) -> c_int {
    if !out.is_null() {
        if let Some(st) = stat_direct(fd) {
            // SAFETY: on Linux's 64-bit ABIs struct stat and stat64 are one
            // layout (asserted at build time below); `out` is the
            // program's stat buffer.
            unsafe { *(out as *mut libc::stat64) = st };
            return 0;
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::fstat(fd, out) }
}

const _: () = assert!(std::mem::size_of::<libc::stat>() == std::mem::size_of::<libc::stat64>());

/// # Safety
/// The C contract of fstat64.
#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, out: *mut libc::stat64) -> c_int {
    if !out.is_null() {
        if let Some(st) = stat_direct(fd) {
            // SAFETY: the program's stat buffer.
            unsafe { *out = st };
            return 0;
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::fstat64(fd, out) }
}

/// glibc before 2.33 compiled fstat into this (`ver` the stat version).
///
/// # Safety
/// The C contract of __fxstat.
#[no_mangle]
pub unsafe extern "C" fn __fxstat(ver: c_int, fd: c_int, out: *mut libc::stat) -> c_int {
    if !out.is_null() && ver == 1 {
        if let Some(st) = stat_direct(fd) {
            // SAFETY: as fstat.
            unsafe { *(out as *mut libc::stat64) = st };
            return 0;
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::__fxstat(ver, fd, out) }
}

/// # Safety
/// The C contract of __fxstat64.
#[no_mangle]
pub unsafe extern "C" fn __fxstat64(ver: c_int, fd: c_int, out: *mut libc::stat64) -> c_int {
    if !out.is_null() && ver == 1 {
        if let Some(st) = stat_direct(fd) {
            // SAFETY: the program's stat buffer.
            unsafe { *out = st };
            return 0;
        }
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::__fxstat64(ver, fd, out) }
}

macro_rules! open_like {
    ($name:ident ( $($arg:ident : $ty:ty),* ) flags = $flags:ident) => {
        /// # Safety
        /// The C contract of the function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            // SAFETY: the program's call, passed on.
            let fd = unsafe { real::$name($($arg),*) };
            after_open(fd, $flags)
        }
    };
}

// `mode` is read only with O_CREAT or O_TMPFILE, as the C library does: a
// variadic argument the caller did not pass is an unused register here.
open_like!(open(path: *const c_char, flags: c_int, mode: c_uint) flags = flags);
open_like!(open64(path: *const c_char, flags: c_int, mode: c_uint) flags = flags);
open_like!(openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) flags = flags);
open_like!(openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) flags = flags);
open_like!(__open_2(path: *const c_char, flags: c_int) flags = flags);
open_like!(__open64_2(path: *const c_char, flags: c_int) flags = flags);
open_like!(__openat_2(dirfd: c_int, path: *const c_char, flags: c_int) flags = flags);
open_like!(__openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) flags = flags);

/// # Safety
/// The C contract of close.
#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    table::remove(fd);
    // SAFETY: the program's call, passed on.
    unsafe { real::close(fd) }
}

/// # Safety
/// The C contract of dup2.
#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    // SAFETY: the program's call, passed on.
    let r = unsafe { real::dup2(old, new) };
    if r >= 0 && old != new {
        table::remove(new); // `new` was closed and now names `old`'s file
    }
    r
}

/// # Safety
/// The C contract of dup3.
#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    // SAFETY: the program's call, passed on.
    let r = unsafe { real::dup3(old, new, flags) };
    if r >= 0 {
        table::remove(new);
    }
    r
}

/// # Safety
/// The C contract of close_range.
#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    // SAFETY: the program's call, passed on.
    let r = unsafe { real::close_range(first, last, flags) };
    // CLOEXEC only marks them: they stay open until an exec.
    if r == 0 && flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        table::remove_range(first, last);
    }
    r
}

/// # Safety
/// The C contract of closefrom.
#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    table::remove_range(low.max(0) as u32, u32::MAX);
    // SAFETY: the program's call, passed on.
    unsafe { real::closefrom(low) }
}

/// stdio closes its descriptor inside the C library, where the shim
/// cannot see it: forget it first.
///
/// # Safety
/// The C contract of fclose.
#[no_mangle]
pub unsafe extern "C" fn fclose(f: *mut FILE) -> c_int {
    if !f.is_null() {
        // SAFETY: the program's stream.
        table::remove(unsafe { libc::fileno(f) });
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::fclose(f) }
}

/// # Safety
/// The C contract of freopen.
#[no_mangle]
pub unsafe extern "C" fn freopen(
    path: *const c_char,
    mode: *const c_char,
    f: *mut FILE,
) -> *mut FILE {
    if !f.is_null() {
        // SAFETY: the program's stream.
        table::remove(unsafe { libc::fileno(f) });
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::freopen(path, mode, f) }
}

/// # Safety
/// The C contract of freopen64.
#[no_mangle]
pub unsafe extern "C" fn freopen64(
    path: *const c_char,
    mode: *const c_char,
    f: *mut FILE,
) -> *mut FILE {
    if !f.is_null() {
        // SAFETY: the program's stream.
        table::remove(unsafe { libc::fileno(f) });
    }
    // SAFETY: the program's call, passed on.
    unsafe { real::freopen64(path, mode, f) }
}

/// A shared writable mapping of a pktfs file: its stores reach the image
/// only when the kernel writes them back, so this process's reads of that
/// file go through the kernel from now on (which sees them).
fn note_mmap(fd: c_int, prot: c_int, flags: c_int) {
    if fd < 0 || prot & libc::PROT_WRITE == 0 || flags & libc::MAP_SHARED == 0 || guard::inside() {
        return;
    }
    let _inside = Inside::enter();
    let _errno = KeepErrno::new();
    // SAFETY: a zeroed stat64 is a valid out-parameter.
    let mut st: libc::stat64 = unsafe { std::mem::zeroed() };
    // SAFETY: fstat of the program's descriptor into `st`.
    if unsafe { real::fstat64(fd, &mut st) } == 0 && libc::major(st.st_dev) == 0 {
        crate::mark_mapped_for_write(st.st_dev, st.st_ino);
    }
}

/// # Safety
/// The C contract of mmap.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off_t,
) -> *mut c_void {
    note_mmap(fd, prot, flags);
    // SAFETY: the program's call, passed on.
    unsafe { real::mmap(addr, len, prot, flags, fd, off) }
}

/// # Safety
/// The C contract of mmap64.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: off64_t,
) -> *mut c_void {
    note_mmap(fd, prot, flags);
    // SAFETY: the program's call, passed on.
    unsafe { real::mmap64(addr, len, prot, flags, fd, off) }
}

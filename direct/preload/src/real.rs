//! The C library's own functions, found with `dlsym(RTLD_NEXT, ...)` the
//! first time each is needed: the shim's interposers call them for every
//! descriptor that is not a direct one, and for the kernel's half of the
//! direct ones (the descriptor itself, its offset).
//!
//! The shim's own file operations (opening and mapping an image, reading
//! /proc/self/mountinfo) go through Rust's std, which calls the C library
//! by name and so reaches the shim's interposers first; those see the
//! thread's "inside the shim" mark (`guard`) and pass straight here.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{iovec, off64_t, off_t, size_t, ssize_t, FILE};

/// Ask the daemon serving `fd` a read ioctl; false on any error. The shim
/// does not interpose `ioctl`, so the C library's is the real one.
pub(crate) fn ioctl_read(fd: c_int, cmd: u32, out: &mut [u8]) -> bool {
    // SAFETY: `out` is valid for the size the command encodes (its
    // length, checked by the caller against the command), and ioctl does
    // not keep the pointer.
    unsafe { libc::ioctl(fd, cmd as _, out.as_mut_ptr()) == 0 }
}

/// Look `name` up in the objects loaded after the shim; 0 if none has it.
fn next(name: &CStr) -> usize {
    // SAFETY: `name` is a NUL-terminated string; RTLD_NEXT is a valid
    // pseudo-handle for a caller inside a shared object.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
}

/// One lazily resolved function pointer.
struct Lazy {
    addr: AtomicUsize,
    name: &'static CStr,
}

impl Lazy {
    const fn new(name: &'static CStr) -> Lazy {
        Lazy {
            addr: AtomicUsize::new(0),
            name,
        }
    }

    fn get(&self) -> usize {
        let a = self.addr.load(Ordering::Acquire);
        if a != 0 {
            return a;
        }
        let a = next(self.name);
        if a == 0 {
            // Every C library this shim runs on has these functions; one
            // without is not something a program can go on from.
            let msg = b"pktfs preload: a C library function is missing\n";
            // SAFETY: a valid buffer and its length, to stderr.
            unsafe { libc::write(2, msg.as_ptr() as *const c_void, msg.len()) };
            std::process::abort();
        }
        self.addr.store(a, Ordering::Release);
        a
    }
}

macro_rules! real {
    ($( $name:ident : $sym:literal => fn($($arg:ident : $ty:ty),*) -> $ret:ty; )*) => {
        $(
            /// The C library's function of this name.
            ///
            /// # Safety
            /// As the C function's own contract.
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                static L: Lazy = Lazy::new($sym);
                type F = unsafe extern "C" fn($($ty),*) -> $ret;
                let a = L.get();
                // SAFETY: the address dlsym gave for this symbol, which is
                // the C library's function of this exact signature.
                let f = unsafe { std::mem::transmute::<usize, F>(a) };
                // SAFETY: the caller's promise.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

/// The open family takes its mode as a variadic argument: called through a
/// variadic pointer type, so the caller side of the ABI is C's.
macro_rules! real_open {
    ($( $name:ident : $sym:literal => fn($($arg:ident : $ty:ty),*); )*) => {
        $(
            /// The C library's function of this name.
            ///
            /// # Safety
            /// As the C function's own contract.
            pub unsafe fn $name($($arg: $ty),*, mode: c_uint) -> c_int {
                static L: Lazy = Lazy::new($sym);
                type F = unsafe extern "C" fn($($ty),*, ...) -> c_int;
                let a = L.get();
                // SAFETY: the address dlsym gave for this symbol, the C
                // library's variadic function of this signature.
                let f = unsafe { std::mem::transmute::<usize, F>(a) };
                // SAFETY: the caller's promise.
                unsafe { f($($arg),*, mode) }
            }
        )*
    };
}

real_open! {
    open: c"open" => fn(path: *const c_char, flags: c_int);
    open64: c"open64" => fn(path: *const c_char, flags: c_int);
    openat: c"openat" => fn(dirfd: c_int, path: *const c_char, flags: c_int);
    openat64: c"openat64" => fn(dirfd: c_int, path: *const c_char, flags: c_int);
}

real! {
    __open_2: c"__open_2" => fn(path: *const c_char, flags: c_int) -> c_int;
    __open64_2: c"__open64_2" => fn(path: *const c_char, flags: c_int) -> c_int;
    __openat_2: c"__openat_2" => fn(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
    __openat64_2: c"__openat64_2" => fn(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int;
    close: c"close" => fn(fd: c_int) -> c_int;
    read: c"read" => fn(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    pread: c"pread" => fn(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t;
    pread64: c"pread64" => fn(fd: c_int, buf: *mut c_void, n: size_t, off: off64_t) -> ssize_t;
    readv: c"readv" => fn(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t;
    preadv: c"preadv" => fn(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t;
    preadv64: c"preadv64" => fn(fd: c_int, iov: *const iovec, cnt: c_int, off: off64_t) -> ssize_t;
    preadv2: c"preadv2" => fn(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t;
    preadv64v2: c"preadv64v2" => fn(fd: c_int, iov: *const iovec, cnt: c_int, off: off64_t, flags: c_int) -> ssize_t;
    lseek: c"lseek" => fn(fd: c_int, off: off_t, whence: c_int) -> off_t;
    lseek64: c"lseek64" => fn(fd: c_int, off: off64_t, whence: c_int) -> off64_t;
    fstat: c"fstat" => fn(fd: c_int, st: *mut libc::stat) -> c_int;
    fstat64: c"fstat64" => fn(fd: c_int, st: *mut libc::stat64) -> c_int;
    __fxstat: c"__fxstat" => fn(ver: c_int, fd: c_int, st: *mut libc::stat) -> c_int;
    __fxstat64: c"__fxstat64" => fn(ver: c_int, fd: c_int, st: *mut libc::stat64) -> c_int;
    dup2: c"dup2" => fn(old: c_int, new: c_int) -> c_int;
    dup3: c"dup3" => fn(old: c_int, new: c_int, flags: c_int) -> c_int;
    close_range: c"close_range" => fn(first: c_uint, last: c_uint, flags: c_int) -> c_int;
    closefrom: c"closefrom" => fn(low: c_int) -> ();
    fclose: c"fclose" => fn(f: *mut FILE) -> c_int;
    freopen: c"freopen" => fn(path: *const c_char, mode: *const c_char, f: *mut FILE) -> *mut FILE;
    freopen64: c"freopen64" => fn(path: *const c_char, mode: *const c_char, f: *mut FILE) -> *mut FILE;
    mmap: c"mmap" => fn(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
    mmap64: c"mmap64" => fn(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off64_t) -> *mut c_void;
}

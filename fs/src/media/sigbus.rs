//! A fault on the mapping (SIGBUS) says why before the process dies.
//!
//! A load or store on a mapped image page that the host cannot back (a
//! sparse file on a full tmpfs, a truncated image, a poisoned PM line)
//! raises SIGBUS. Rust cannot unwind out of a signal handler, and resuming
//! would re-run the faulting access, so the process must stop; what it must
//! not do is die silently. This handler, when the address lies in a
//! registered image mapping, writes one line naming the image and the
//! offset (async-signal-safe: `write(2)` of preformatted bytes, no
//! allocation, no locks), restores the default action and returns: the
//! access faults again and the kernel ends the process with SIGBUS, as it
//! would have. Nothing acknowledged is lost (every acknowledged operation
//! was durable before it returned) and the next open recovers the image.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

const SLOTS: usize = 64;
const NAME_BYTES: usize = 200;

/// One registered mapping: base address and length (0 = free slot), and
/// the image's name, written before the base is published.
struct Slot {
    base: AtomicUsize,
    len: AtomicUsize,
    name_len: AtomicUsize,
    name: [std::sync::atomic::AtomicU8; NAME_BYTES],
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    base: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    name_len: AtomicUsize::new(0),
    name: [const { std::sync::atomic::AtomicU8::new(0) }; NAME_BYTES],
};
static TABLE: [Slot; SLOTS] = [EMPTY; SLOTS];
static INSTALL: Once = Once::new();

/// A registration; dropping it forgets the mapping.
#[derive(Debug)]
pub(crate) struct Registration(Option<usize>);

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(k) = self.0 {
            TABLE[k].len.store(0, Ordering::SeqCst);
            TABLE[k].base.store(0, Ordering::SeqCst);
        }
    }
}

/// Name the mapping `[base, base+len)` for the handler (installing it on
/// first use). With every slot taken the mapping goes unnamed: a fault
/// there still kills the process, just without the line.
pub(crate) fn register(base: *const u8, len: usize, name: &str) -> Registration {
    INSTALL.call_once(install);
    for (k, s) in TABLE.iter().enumerate() {
        // Claim a free slot by its length word (1 = being written).
        if s.len
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let b = name.as_bytes();
            let n = b.len().min(NAME_BYTES);
            for (i, &c) in b[..n].iter().enumerate() {
                s.name[i].store(c, Ordering::Relaxed);
            }
            s.name_len.store(n, Ordering::Relaxed);
            s.base.store(base as usize, Ordering::SeqCst);
            s.len.store(len, Ordering::SeqCst);
            return Registration(Some(k));
        }
    }
    Registration(None)
}

fn install() {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
    // the handler has the SA_SIGINFO signature; sigaction only reads `sa`.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

/// Write `bytes` to stderr (async-signal-safe).
fn say(bytes: &[u8]) {
    // SAFETY: write(2) on fd 2 with a valid buffer; async-signal-safe.
    unsafe { libc::write(2, bytes.as_ptr() as *const libc::c_void, bytes.len()) };
}

/// Decimal digits of `v` into `buf`; returns the used tail.
fn digits(mut v: usize, buf: &mut [u8; 24]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[i..];
        }
    }
}

extern "C" fn handler(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for s in TABLE.iter() {
        let (base, len) = (s.base.load(Ordering::SeqCst), s.len.load(Ordering::SeqCst));
        if base != 0 && len > 1 && addr >= base && addr < base + len {
            let mut name = [0u8; NAME_BYTES];
            let n = s.name_len.load(Ordering::Relaxed).min(NAME_BYTES);
            for (i, c) in name[..n].iter_mut().enumerate() {
                *c = s.name[i].load(Ordering::Relaxed);
            }
            let mut d = [0u8; 24];
            say(b"pktfs: fatal: fault (SIGBUS) on the mapping of ");
            say(&name[..n]);
            say(b" at image offset ");
            say(digits(addr - base, &mut d));
            say(
                b": the host could not back that page (a sparse image on a full file \
                system, a truncated image, or a media error). Stopping now; nothing \
                acknowledged is lost and the next open recovers the image.\n",
            );
            break;
        }
    }
    // SAFETY: restoring the default action is async-signal-safe; returning
    // re-runs the faulting access, which now ends the process with SIGBUS.
    unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn digits_are_decimal() {
        let mut b = [0u8; 24];
        assert_eq!(super::digits(0, &mut b), b"0");
        assert_eq!(super::digits(1_234_567, &mut b), b"1234567");
        assert_eq!(
            super::digits(usize::MAX, &mut b),
            usize::MAX.to_string().as_bytes()
        );
    }
}

//! CPU cache-control primitives: clwb / clflushopt / clflush, sfence, and a
//! non-temporal copy. Stable Rust has no intrinsic for clwb, so it is emitted
//! with `asm!`.

/// Which instruction writes a dirty line back to the persistence domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushInsn {
    /// Write back and keep the line cached (best).
    Clwb,
    /// Write back and evict, weakly ordered.
    Clflushopt,
    /// Write back and evict, strongly ordered (slow; every x86-64 has it).
    Clflush,
    /// Not x86-64: nothing to issue (msync is used instead).
    None,
}

impl FlushInsn {
    /// The instruction's name, as `--persist` spells it.
    pub fn name(self) -> &'static str {
        match self {
            FlushInsn::Clwb => "clwb",
            FlushInsn::Clflushopt => "clflushopt",
            FlushInsn::Clflush => "clflush",
            FlushInsn::None => "none",
        }
    }

    /// Whether this CPU can execute it. `None` (issue nothing) always can.
    #[cfg(target_arch = "x86_64")]
    pub fn available(self) -> bool {
        // CPUID leaf 7, subleaf 0, EBX: bit 24 CLWB, bit 23 CLFLUSHOPT; leaf
        // 1, EDX bit 19: CLFLUSH (every x86-64 has it, but ask anyway).
        let l7 = std::arch::x86_64::__cpuid_count(7, 0);
        match self {
            FlushInsn::Clwb => l7.ebx & (1 << 24) != 0,
            FlushInsn::Clflushopt => l7.ebx & (1 << 23) != 0,
            FlushInsn::Clflush => std::arch::x86_64::__cpuid(1).edx & (1 << 19) != 0,
            FlushInsn::None => true,
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn available(self) -> bool {
        self == FlushInsn::None
    }
}

#[cfg(target_arch = "x86_64")]
pub fn detect_flush() -> FlushInsn {
    [FlushInsn::Clwb, FlushInsn::Clflushopt]
        .into_iter()
        .find(|i| i.available())
        .unwrap_or(FlushInsn::Clflush)
}

#[cfg(not(target_arch = "x86_64"))]
pub fn detect_flush() -> FlushInsn {
    FlushInsn::None
}

/// Write back every cache line that overlaps `[ptr, ptr + len)`.
///
/// # Safety
/// `ptr..ptr+len` must lie inside one live mapping.
#[cfg(target_arch = "x86_64")]
pub unsafe fn flush_lines(insn: FlushInsn, ptr: *const u8, len: usize) {
    if len == 0 {
        return;
    }
    let start = ptr as usize & !63;
    let end = ptr as usize + len;
    let mut p = start;
    while p < end {
        // SAFETY: `p` is inside a cache line that overlaps the caller's mapped
        // range; these instructions only write the line back (and maybe evict
        // it), they do not change memory contents.
        unsafe {
            match insn {
                FlushInsn::Clwb => {
                    std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
                FlushInsn::Clflushopt => {
                    std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
                FlushInsn::Clflush => {
                    std::arch::asm!("clflush [{0}]", in(reg) p, options(nostack, preserves_flags))
                }
                FlushInsn::None => {}
            }
        }
        p += 64;
    }
}

/// # Safety
/// Always safe to call; `unsafe` only for signature symmetry with x86.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn flush_lines(_insn: FlushInsn, _ptr: *const u8, _len: usize) {}

/// Order all earlier stores and write-backs before any later store.
#[inline]
pub fn sfence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no memory operands and no preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Copy `src` to `dst` with non-temporal stores where the destination is
/// 16-byte aligned, regular stores (then written back) elsewhere. The caller
/// must still `sfence` before relying on persistence.
///
/// # Safety
/// `dst..dst+src.len()` must be inside one live, writable mapping that no
/// other thread is accessing, and must not overlap `src`.
pub unsafe fn copy_nt(insn: FlushInsn, dst: *mut u8, src: &[u8]) {
    let len = src.len();
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let head = ((16 - (dst as usize & 15)) & 15).min(len);
        // SAFETY: the caller guarantees dst..dst+len is writable and disjoint
        // from src; head <= len.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
            flush_lines(insn, dst, head);
        }
        let body = (len - head) / 64 * 64;
        let mut i = head;
        while i < head + body {
            // SAFETY: dst+i is 16-byte aligned (head brought it there, i
            // advances by 64); i+64 <= len so all four 16-byte loads and
            // stores are in bounds of src and dst.
            unsafe {
                let s = src.as_ptr().add(i) as *const __m128i;
                let d = dst.add(i) as *mut __m128i;
                _mm_stream_si128(d, _mm_loadu_si128(s));
                _mm_stream_si128(d.add(1), _mm_loadu_si128(s.add(1)));
                _mm_stream_si128(d.add(2), _mm_loadu_si128(s.add(2)));
                _mm_stream_si128(d.add(3), _mm_loadu_si128(s.add(3)));
            }
            i += 64;
        }
        let tail = len - i;
        // SAFETY: i + tail == len, within both buffers.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(i), tail);
            flush_lines(insn, dst.add(i), tail);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = insn;
        // SAFETY: the caller guarantees dst..dst+len is writable and disjoint from src.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, len) };
    }
}

//! Exclusive, borrow-checked access to a mapping's bytes for code outside
//! the crate (tools, benchmarks, tests).

use std::os::fd::AsRawFd;

use super::{net, Pm};

/// Exclusive access to a [`Pm`]'s bytes, made from `&mut Pm`
/// ([`Pm::exclusive`], or `Volume::pm_exclusive`): while it lives no Volume,
/// handle or thread can reach the region, so the borrow rules are the
/// whole proof of soundness: reads borrow `&self`, writes need
/// `&mut self`, and a shared `&ExclusivePm` (even across threads) only
/// reads.
///
/// What it cannot rule out is another *process* writing the image file:
/// pktfs processes exclude each other with the image lock (a writable
/// open is exclusive, a read-only one shared); [`MapOptions::no_lock`](super::MapOptions::no_lock)
/// gives that up for a read-only look at a mounted image, whose bytes may
/// then change underneath (as with any shared mapping).
///
/// [`ExclusivePm::split_at`] cuts it into handles on disjoint windows,
/// one per thread, each checked to stay inside its own.
#[derive(Debug)]
pub struct ExclusivePm<'a> {
    pm: &'a Pm,
    /// The window this handle owns: `[start, end)` (the whole region
    /// unless split with [`ExclusivePm::split_at`]).
    start: u64,
    end: u64,
    /// Stands for the `&'a mut Pm` (or the part of it) this was made from.
    _excl: std::marker::PhantomData<&'a mut Pm>,
}

impl<'a> ExclusivePm<'a> {
    /// The whole region; `&mut` is the proof that nothing else reaches it.
    pub(super) fn whole(pm: &'a mut Pm) -> ExclusivePm<'a> {
        ExclusivePm {
            start: 0,
            end: pm.len(),
            pm,
            _excl: std::marker::PhantomData,
        }
    }

    #[track_caller]
    fn inside(&self, off: u64, len: u64) {
        assert!(
            off >= self.start && off.checked_add(len).is_some_and(|e| e <= self.end),
            "access {off}+{len} outside this handle's window {}..{}",
            self.start,
            self.end
        );
    }

    /// Split into two handles owning `[start, at)` and `[at, end)`: each
    /// may then go to its own thread (like `split_at_mut`).
    pub fn split_at(self, at: u64) -> (ExclusivePm<'a>, ExclusivePm<'a>) {
        assert!(
            (self.start..=self.end).contains(&at),
            "split at {at} outside {}..{}",
            self.start,
            self.end
        );
        (
            ExclusivePm {
                pm: self.pm,
                start: self.start,
                end: at,
                _excl: std::marker::PhantomData,
            },
            ExclusivePm {
                pm: self.pm,
                start: at,
                end: self.end,
                _excl: std::marker::PhantomData,
            },
        )
    }
    /// The window `[start, end)` this handle owns (image offsets).
    pub fn window(&self) -> std::ops::Range<u64> {
        self.start..self.end
    }
    /// Does this handle own the whole region?
    pub fn is_whole(&self) -> bool {
        self.start == 0 && self.end == self.pm.len()
    }
    /// The region's shared API (length, mode, flush, fence, the crash log).
    pub fn pm(&self) -> &Pm {
        self.pm
    }
    /// The whole region's length (offsets are the region's, whatever the
    /// window).
    pub fn len(&self) -> u64 {
        self.pm.len()
    }
    pub fn is_empty(&self) -> bool {
        self.pm.is_empty()
    }
    pub fn is_read_only(&self) -> bool {
        self.pm.is_read_only()
    }
    /// Borrow `len` bytes at `off` (panics outside the window).
    #[track_caller]
    pub fn slice(&self, off: u64, len: usize) -> &[u8] {
        self.inside(off, len as u64);
        self.pm.slice(off, len)
    }
    /// Copy bytes out.
    #[track_caller]
    pub fn read(&self, off: u64, out: &mut [u8]) {
        self.inside(off, out.len() as u64);
        self.pm.read(off, out)
    }
    /// An aligned 8-byte little-endian word.
    #[track_caller]
    pub fn read_u64(&self, off: u64) -> u64 {
        self.inside(off, 8);
        self.pm.read_u64(off)
    }
    /// A copy of the window (cache view).
    pub fn snapshot(&self) -> Vec<u8> {
        self.pm
            .slice(self.start, (self.end - self.start) as usize)
            .to_vec()
    }
    /// Plain stores; durable after [`Self::persist`] (or flush + fence).
    #[track_caller]
    pub fn write(&mut self, off: u64, data: &[u8]) {
        self.inside(off, data.len() as u64);
        self.pm.write(off, data)
    }
    /// Non-temporal copy, flushed; durable after the next fence.
    #[track_caller]
    pub fn write_nt(&mut self, off: u64, data: &[u8]) {
        self.inside(off, data.len() as u64);
        self.pm.write_nt(off, data)
    }
    /// Fill with zeros (cached stores).
    #[track_caller]
    pub fn zero(&mut self, off: u64, len: u64) {
        self.inside(off, len);
        self.pm.zero(off, len)
    }
    /// Aligned 8-byte store, not yet durable.
    #[track_caller]
    pub fn store_u64(&mut self, off: u64, value: u64) {
        self.inside(off, 8);
        self.pm.store_u64(off, value)
    }
    /// Aligned 8-byte store, then persist.
    #[track_caller]
    pub fn publish_u64(&mut self, off: u64, value: u64) {
        self.inside(off, 8);
        self.pm.publish_u64(off, value)
    }
    /// Write `[off, off+len)` back: durable after this thread's next
    /// [`fence`](Self::fence) (a small range waits for that fence; see
    /// [`Pm::flush`]).
    pub fn flush(&self, off: u64, len: u64) {
        self.pm.flush(off, len)
    }
    /// Everything this thread flushed is durable before anything after.
    pub fn fence(&self) {
        self.pm.fence()
    }
    /// Flush, then fence.
    pub fn persist(&self, off: u64, len: u64) {
        self.pm.persist(off, len)
    }
    /// recv(2) from socket `fd` straight into `[off, off+len)` of the
    /// window (the kernel copies the bytes there once); returns the byte
    /// count, not yet durable (persist them). Sound from safe code: the
    /// window is this handle's alone and `&mut self` excludes every other
    /// reader and writer for the call.
    #[track_caller]
    pub fn recv(
        &mut self,
        fd: impl std::os::fd::AsFd,
        off: u64,
        len: usize,
        flags: i32,
    ) -> std::io::Result<usize> {
        self.inside(off, len as u64);
        self.pm
            .recv_into(std::os::fd::AsFd::as_fd(&fd).as_raw_fd(), off, len, flags)
    }
    /// sendmsg(2) of `(offset, len)` segments of the window (the kernel
    /// reads them during the call).
    pub fn send_segments(
        &self,
        fd: impl std::os::fd::AsFd,
        segs: impl IntoIterator<Item = (u64, usize)>,
        flags: i32,
    ) -> std::io::Result<usize> {
        let segs = segs.into_iter().map(|(off, len)| {
            self.inside(off, len as u64);
            net::IoSeg::Image { off, len }
        });
        self.pm
            .send_segments(std::os::fd::AsFd::as_fd(&fd).as_raw_fd(), segs, flags)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    use super::super::Pm;

    #[test]
    fn recv_lands_in_the_window_and_nowhere_else() {
        let mut pm = Pm::from_bytes(vec![0u8; 1 << 16]);
        let (_, mut right) = pm.exclusive().split_at(4096);
        let (mut tx, rx) = UnixStream::pair().expect("socket pair");
        tx.write_all(b"packet bytes").expect("send");
        let n = right.recv(&rx, 8192, 64, 0).expect("recv");
        assert_eq!(n, 12);
        assert_eq!(right.slice(8192, 12), b"packet bytes");
        // Nothing before or after the received bytes was touched.
        assert!(right.slice(4096, 4096).iter().all(|&b| b == 0));
        assert!(right.slice(8192 + 12, 64).iter().all(|&b| b == 0));
        right.persist(8192, n as u64);
        right.pm().debug_assert_persisted(8192, n as u64);
    }

    #[test]
    #[should_panic(expected = "outside this handle's window")]
    fn recv_outside_the_window_is_refused_before_the_kernel_writes() {
        let mut pm = Pm::from_bytes(vec![0u8; 1 << 16]);
        let (mut left, _) = pm.exclusive().split_at(4096);
        let (_tx, rx) = UnixStream::pair().expect("socket pair");
        // Ends past the window: refused (the receive would block otherwise).
        let _ = left.recv(&rx, 4000, 200, 0);
    }
}

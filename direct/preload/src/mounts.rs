//! Which image serves a file of a pktfs mount, and whether this process
//! may map it.
//!
//! The kernel says which mount a descriptor is on (its device); the mount
//! table says the mount is `fuse.pktfs` and names its source, the image
//! file. Trusting that name alone would let whoever controls the path
//! (after a rename, say) feed this process another image's bytes, so the
//! shim asks the mount itself: the `IOC_IDENTITY` ioctl goes through FUSE
//! to the daemon serving that very file, which answers with the device,
//! inode and UUID of the image it maps. The shim maps the source only if
//! the file it opened there is that one. A user who may not read the image
//! file cannot map it, and reads through the kernel as before.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

use pktfs_layout::live::{Identity, IOC_IDENTITY};

#[derive(Default)]
struct Known {
    /// Devices seen, and the source if they are pktfs mounts.
    devices: HashMap<u64, Option<String>>,
    /// Images by identity: mapped, or not mappable by this process.
    images: HashMap<(u64, u64, [u8; 16]), Option<pktfs_direct::Image>>,
}

static KNOWN: Mutex<Option<Known>> = Mutex::new(None);

/// The image serving the file open on `fd` (device `dev`), if it is a
/// pktfs mount's and this process may map it.
pub fn image_of(fd: i32, dev: u64) -> Option<pktfs_direct::Image> {
    let source = source_of(dev)?;
    let id = identity(fd)?;
    let key = (id.dev, id.ino, id.uuid);
    let mut g = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    let known = g.get_or_insert_with(Known::default);
    if let Some(m) = known.images.get(&key) {
        return m.clone();
    }
    let m = map(&source, &id);
    known.images.insert(key, m.clone());
    m
}

/// The source of the pktfs mount with device `dev` (None if `dev` is not
/// one). The mount table is read again for a device not seen before.
fn source_of(dev: u64) -> Option<String> {
    if libc::major(dev) != 0 {
        return None; // a block device: not FUSE
    }
    let mut g = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    let known = g.get_or_insert_with(Known::default);
    if let Some(s) = known.devices.get(&dev) {
        return s.clone();
    }
    for m in pktfs_direct::mounts::mounts().unwrap_or_default() {
        known
            .devices
            .insert(m.dev, Some(m.source.to_string_lossy().into_owned()));
    }
    known.devices.entry(dev).or_insert(None).clone()
}

/// Ask the daemon serving `fd`'s file which image it maps.
fn identity(fd: i32) -> Option<Identity> {
    let mut out = [0u8; 32];
    if !crate::real::ioctl_read(fd, IOC_IDENTITY, &mut out) {
        return None;
    }
    Identity::from_bytes(&out)
}

/// Map the image at `source` if it is the one `id` names.
fn map(source: &str, id: &Identity) -> Option<pktfs_direct::Image> {
    let image = pktfs_direct::Image::open(source).ok()?;
    let m = image.metadata().ok()?;
    (m.dev() == id.dev && m.ino() == id.ino && image.uuid() == id.uuid).then_some(image)
}

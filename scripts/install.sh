#!/usr/bin/env bash
# Build pktfs in release mode and install it:
#   scripts/install.sh [DIR]        (default DIR: /sbin)
# installs pktfs, mount-pktfs, mkfs-pktfs and fsck-pktfs into DIR, and the
# links mount(8), mkfs(8) and fsck(8) look for: mount.pktfs,
# mount.fuse.pktfs (used by `mount -o remount` of a fuse.pktfs mount),
# mkfs.pktfs and fsck.pktfs. Cargo does not allow dots in binary names,
# hence the links. Then `mount -t pktfs IMAGE DIR` and an /etc/fstab line
#   /dev/shm/pm.img  /mnt/pm  pktfs  defaults  0 0
# work.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-/sbin}"
cd "$repo"
cargo build --release -q -p pktfs-cli -p pktfs-mkfs -p pktfs-fsck
out="${CARGO_TARGET_DIR:-$repo/target}/release"
mkdir -p "$dest"
for b in pktfs mount-pktfs mkfs-pktfs fsck-pktfs; do
    install -m 0755 "$out/$b" "$dest/$b"
done
ln -sf mount-pktfs "$dest/mount.pktfs"
ln -sf mount-pktfs "$dest/mount.fuse.pktfs"
ln -sf mkfs-pktfs "$dest/mkfs.pktfs"
ln -sf fsck-pktfs "$dest/fsck.pktfs"
echo "installed into $dest: pktfs mount.pktfs mount.fuse.pktfs mkfs.pktfs fsck.pktfs"

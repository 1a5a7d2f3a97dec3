#!/usr/bin/env bash
# Build pktfs in release mode and install it:
#   scripts/install.sh [DIR]        (default DIR: /sbin; PREFIX: /usr/local)
# installs pktfs, mount-pktfs, mkfs-pktfs and fsck-pktfs into DIR, and the
# links mount(8), mkfs(8) and fsck(8) look for: mount.pktfs,
# mount.fuse.pktfs (used by `mount -o remount` of a fuse.pktfs mount),
# mkfs.pktfs and fsck.pktfs. Cargo does not allow dots in binary names,
# hence the links. Then `mount -t pktfs IMAGE DIR` and an /etc/fstab line
#   /dev/shm/pm.img  /mnt/pm  pktfs  defaults  0 0
# work.
#
# Also, under PREFIX: man pages (share/man/man8: pktfs(8), pktfs-mount(8),
# ..., mkfs.pktfs(8), fsck.pktfs(8)), bash, zsh and fish completions, and
# the systemd units pktfs-mount@.service and pktfs-serve@.service
# (lib/systemd/system; see docs/MOUNT.md, "systemd"). All of it is made
# from the binaries' own command-line definitions (their hidden gen-docs).
# And direct reading (docs/DIRECT.md): lib/libpktfs_direct.so (the
# library's C ABI), include/pktfs_direct.h, and lib/libpktfs_preload.so
# (the preload shim), then ldconfig.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-/sbin}"
prefix="${PREFIX:-/usr/local}"
cd "$repo"
cargo build --release -q -p pktfs -p pktfs-mkfs -p pktfs-fsck -p pktfs-direct -p pktfs-preload
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

gen="$(mktemp -d)"
trap 'rm -rf "$gen"' EXIT
"$out/pktfs" gen-docs "$gen"
"$out/mkfs-pktfs" --gen-docs "$gen"
"$out/fsck-pktfs" --gen-docs "$gen"
install -d "$prefix/share/man/man8" \
    "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" \
    "$prefix/share/fish/vendor_completions.d" \
    "$prefix/lib/systemd/system"
install -m 0644 "$gen"/man8/*.8 "$prefix/share/man/man8/"
install -m 0644 "$gen"/bash/* "$prefix/share/bash-completion/completions/"
install -m 0644 "$gen"/zsh/* "$prefix/share/zsh/site-functions/"
install -m 0644 "$gen"/fish/* "$prefix/share/fish/vendor_completions.d/"
for u in pktfs-mount@.service pktfs-serve@.service; do
    sed "s|@BINDIR@|$dest|g" "scripts/systemd/$u" >"$prefix/lib/systemd/system/$u"
    chmod 0644 "$prefix/lib/systemd/system/$u"
done
echo "installed under $prefix: man pages (man 8 pktfs), bash/zsh/fish completions, systemd units pktfs-mount@ and pktfs-serve@"

install -d "$prefix/lib" "$prefix/include"
install -m 0755 "$out/libpktfs_direct.so" "$out/libpktfs_preload.so" "$prefix/lib/"
install -m 0644 direct/include/pktfs_direct.h "$prefix/include/"
command -v ldconfig >/dev/null && ldconfig || true
echo "installed under $prefix: lib/libpktfs_direct.so, include/pktfs_direct.h, lib/libpktfs_preload.so (docs/DIRECT.md)"

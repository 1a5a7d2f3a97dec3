#!/usr/bin/env bash
# Run the POSIX suite pjdfstest (the Rust rewrite) against a pktfs mount:
# mkfs an image on /dev/shm, mount it, run pjdfstest in a directory inside
# the mount, then unmount, remount and compare the tree with what it was.
#
#   scripts/pjdfstest.sh [PJDFSTEST_FILTER...]
#
# Env: PKTFS_BIN_DIR (prebuilt pktfs and mkfs-pktfs; default: cargo build
# --release), PKTFS_IMAGE (a formatted image to use instead of running
# mkfs), PJDFSTEST (the binary), IMAGE_SIZE (default 512M),
# MOUNT_OPTS (extra -o options), PJD_PRELOAD (a library to preload into
# pjdfstest alone, e.g. pktfs's direct-reading shim). Exit status: 0 when
# nothing failed.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

if [[ -z "${PKTFS_BIN_DIR:-}" ]]; then
    cargo build --release -q -p pktfs -p pktfs-mkfs
    PKTFS_BIN_DIR="${CARGO_TARGET_DIR:-$repo/target}/release"
fi
pktfs="$PKTFS_BIN_DIR/pktfs"
mkfs="$PKTFS_BIN_DIR/mkfs-pktfs"
pjd="${PJDFSTEST:-$(command -v pjdfstest || echo "$HOME/.cargo/bin/pjdfstest")}"
[[ -x "$pjd" ]] || { echo "pjdfstest not found: cargo install pjdfstest" >&2; exit 2; }
# pjdfstest itself, with PJD_PRELOAD preloaded when given.
run_pjd() {
    if [[ -n "${PJD_PRELOAD:-}" ]]; then
        LD_PRELOAD="$PJD_PRELOAD" "$pjd" "$@"
    else
        "$pjd" "$@"
    fi
}
[[ -e /dev/fuse ]] || { echo "skipped: no /dev/fuse"; exit 0; }
id tests >/dev/null 2>&1 || useradd -M tests
# pjdfstest switches to these users; the mount must let them in.
[[ "$(id -u)" == 0 ]] || { echo "pjdfstest needs root (it changes users)" >&2; exit 2; }

# The EROFS tests remount the file system read-only with `mount -o
# remount,ro`; mount(8) hands that to the mount.fuse.pktfs helper. Link the
# helpers into /sbin for the run if they are not installed.
made_links=()
for h in mount.pktfs mount.fuse.pktfs; do
    if [[ ! -e "/sbin/$h" ]]; then
        ln -s "$PKTFS_BIN_DIR/mount-pktfs" "/sbin/$h"
        made_links+=("/sbin/$h")
    fi
done

img="${PKTFS_IMAGE:-/dev/shm/pktfs-pjdfstest-$$.img}"
mnt="$(mktemp -d /tmp/pktfs-pjdfstest.XXXXXX)"
sec="$(mktemp -d /dev/shm/pktfs-pjdfstest-secondary.XXXXXX)"
log="${PJD_LOG:-/tmp/pktfs-pjdfstest.log}"
cleanup() {
    cd /
    if mountpoint -q "$mnt" 2>/dev/null; then umount "$mnt" || umount -l "$mnt" || true; fi
    sleep 0.2
    rm -rf "$mnt" "$sec" "$img"
    for l in "${made_links[@]}"; do rm -f "$l"; done
}
trap cleanup EXIT

# PKTFS_IMAGE: an image made by the caller (the cargo test makes one).
[[ -n "${PKTFS_IMAGE:-}" ]] || "$mkfs" --size "${IMAGE_SIZE:-512M}" --force -q "$img"
opts="allow_other${MOUNT_OPTS:+,$MOUNT_OPTS}"
"$pktfs" mount "$img" "$mnt" -o "$opts"
mountpoint -q "$mnt"
chmod 0755 "$mnt"

# Some content of our own, to compare across the remount.
cp -a "$repo/docs" "$mnt/docs"
mkdir "$mnt/pjd"
chmod 0755 "$mnt/pjd"

cd "$mnt/pjd"
set +e
if [[ $# -eq 0 ]]; then
    # Two passes: the EROFS tests first, alone (they remount read-only,
    # which the kernel refuses while any file on the mount is open for
    # writing, and pjdfstest's posix_fallocate::affected_only_create_flags
    # leaks such descriptors for the rest of its run); then everything
    # else, with remounts off (the EROFS tests show as skipped there).
    conf_ro="$(mktemp /tmp/pktfs-pjdfstest-conf.XXXXXX)"
    sed 's/^allow_remount = .*/allow_remount = true/' "$repo/scripts/pjdfstest.toml" > "$conf_ro"
    run_pjd -c "$conf_ro" -p "$mnt/pjd" -s "$sec" erofs 2>&1 | tee "$log.erofs"
    s1=${PIPESTATUS[0]}
    rm -f "$conf_ro"
    run_pjd -c "$repo/scripts/pjdfstest.toml" -p "$mnt/pjd" -s "$sec" 2>&1 | tee "$log"
    s2=${PIPESTATUS[0]}
    status=$(( s1 != 0 || s2 != 0 ))
else
    run_pjd -c "$repo/scripts/pjdfstest.toml" -p "$mnt/pjd" -s "$sec" "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    : > "$log.erofs"
fi
set -e
cd /

tree() {
    (cd "$1" && find . -printf '%p %y %m %U:%G %s %n %T@ %l\n' | sort
     cd "$1" && find . -type f -print0 | sort -z | xargs -0 -r md5sum)
}
tree "$mnt" > "$log.before"
umount "$mnt"
for _ in $(seq 50); do pgrep -f -- "--daemon-child" >/dev/null || break; sleep 0.1; done
state="$("$pktfs" stat "$img")"; echo "${state%%$'\n'*}"
"$pktfs" mount "$img" "$mnt" -o "$opts"
tree "$mnt" > "$log.after"
if diff -u "$log.before" "$log.after"; then
    echo "tree after unmount + remount: identical ($(wc -l < "$log.before") lines)"
else
    echo "the tree differs after unmount + remount" >&2
    status=1
fi
summary="$(grep '^Summary' "$log" || true)"
echo "pjdfstest: ${summary:-no summary}"
if [[ -s "$log.erofs" ]]; then
    echo "pjdfstest, EROFS pass: $(grep '^Summary' "$log.erofs" || echo 'no summary')"
    # One line for both passes: the EROFS tests count from their own pass.
    read -r f1 p1 < <(grep '^Summary' "$log.erofs" | sed -E 's/.* ([0-9]+) failed.* ([0-9]+) passed.*/\1 \2/')
    read -r f2 k2 p2 t2 < <(grep '^Summary' "$log" | sed -E 's/.* ([0-9]+) failed, ([0-9]+) skipped, ([0-9]+) passed.* ([0-9]+) total/\1 \2 \3 \4/')
    echo "pjdfstest, both passes: $((p1 + p2)) passed, $((f1 + f2)) failed, $((k2 - p1 - f1)) skipped, $t2 total"
fi
exit "$status"

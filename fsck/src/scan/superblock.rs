//! Both superblock copies: which one to use, and what to rewrite.

use super::*;

pub(super) fn superblocks(pm: &ExclusivePm<'_>, out: &mut ScanOut) -> Option<Geometry> {
    let len = pm.len();
    let p = Superblock::from_bytes(pm.slice(PRIMARY_OFFSET, 256), PRIMARY_OFFSET, len);
    let b = Superblock::from_bytes(pm.slice(BACKUP_OFFSET, 256), BACKUP_OFFSET, len);
    let add = |out: &mut ScanOut, f: Finding, fix: Option<PlannedFix>| {
        let mut f = f;
        if let Some(fx) = fix {
            f.repair = Some(fx.what.clone());
            f.fix = Some(out.fixes.len());
            out.fixes.push(fx);
        }
        out.findings.push(f);
    };
    let write = |offset: u64, sb: &Superblock, what: &str| PlannedFix {
        fix: Fix::Superblock {
            offset,
            bytes: Box::new(sb.to_bytes()),
        },
        safe: true,
        ino: None,
        path: None,
        what: what.to_string(),
    };
    let sb = match (&p, &b) {
        (Ok(p), Ok(b)) => {
            if p.geometry != b.geometry {
                // A writable mount rewrites both copies from the primary.
                let mut f = Finding::new(
                    Severity::Error,
                    "superblock.backup_geometry",
                    "backup superblock's geometry differs from the primary's",
                );
                f.mount_recovers = true;
                add(
                    out,
                    f,
                    Some(write(
                        BACKUP_OFFSET,
                        p,
                        "rewrite the backup superblock from the primary",
                    )),
                );
            } else if p.to_bytes() != b.to_bytes() {
                let mut f = Finding::new(
                    Severity::Info,
                    "superblock.backup_stale",
                    format!(
                        "backup superblock is older (mount count {} vs {}): a crash between the two superblock writes",
                        b.mount_count, p.mount_count
                    ),
                );
                f.mount_recovers = true;
                add(
                    out,
                    f,
                    Some(write(
                        BACKUP_OFFSET,
                        p,
                        "rewrite the backup superblock from the primary",
                    )),
                );
            }
            p.clone()
        }
        (Ok(p), Err(e)) => {
            // A crash while the backup was being rewritten; a writable mount
            // rewrites both copies.
            let mut f = Finding::new(
                Severity::Error,
                "superblock.backup",
                format!("backup superblock is bad: {e}"),
            );
            f.mount_recovers = true;
            add(
                out,
                f,
                Some(write(
                    BACKUP_OFFSET,
                    p,
                    "rewrite the backup superblock from the primary",
                )),
            );
            p.clone()
        }
        (Err(e), Ok(b)) => {
            if matches!(
                e,
                Corrupt::NewerVersion { .. } | Corrupt::UnknownIncompat { .. }
            ) {
                out.fatal = Some(Fatal {
                    operational: true,
                    message: format!("{e}"),
                });
                return None;
            }
            let mut f = Finding::new(
                Severity::Error,
                "superblock.primary",
                format!("primary superblock is bad ({e}); the backup is valid"),
            );
            f.mount_recovers = true;
            add(
                out,
                f,
                Some(write(
                    PRIMARY_OFFSET,
                    b,
                    "restore the primary superblock from the backup",
                )),
            );
            b.clone()
        }
        (Err(e), Err(eb)) => {
            let not_pktfs =
                matches!(e, Corrupt::NotPktfs { .. }) && matches!(eb, Corrupt::NotPktfs { .. });
            let newer = matches!(
                e,
                Corrupt::NewerVersion { .. } | Corrupt::UnknownIncompat { .. }
            );
            if not_pktfs || newer || matches!(e, Corrupt::Truncated { .. }) {
                let message = match e {
                    // fsck repairs what the image holds, not its length:
                    // say how to get to where it can.
                    Corrupt::Truncated { expected, .. } => format!(
                        "{e}: give the file its length back (truncate -s {expected} IMAGE; \
                         bytes past the cut are lost), then run fsck.pktfs -y again"
                    ),
                    _ => format!("{e}"),
                };
                out.fatal = Some(Fatal {
                    operational: true,
                    message,
                });
            } else {
                out.findings.push(Finding::new(
                    Severity::Error,
                    "superblock.none",
                    format!("no valid superblock: primary: {e}; backup: {eb}"),
                ));
                out.fatal = Some(Fatal {
                    operational: false,
                    message: "no valid superblock".into(),
                });
            }
            return None;
        }
    };
    match sb.state {
        STATE_CLEAN => {}
        STATE_MOUNTED => {
            let mut f = Finding::new(
                Severity::Info,
                "superblock.not_clean",
                "image was not unmounted cleanly (or is mounted)",
            );
            f.mount_recovers = true;
            out.findings.push(f);
        }
        s => out.findings.push(Finding::new(
            Severity::Warning,
            "superblock.state",
            format!("unknown mount state {s}"),
        )),
    }
    let label_end = sb
        .label
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(sb.label.len());
    out.superblock = Some(SuperblockSummary {
        image_len_bytes: sb.geometry.image_len_bytes,
        buffer_size_bytes: sb.geometry.buffer_size_bytes,
        inode_count: sb.geometry.inode_count,
        record_count: sb.geometry.record_count,
        buffer_count: sb.geometry.buffer_count,
        state: sb.state,
        mount_count: sb.mount_count,
        label: show(&sb.label[..label_end]),
    });
    let g = sb.geometry;
    out.sb = Some(sb);
    Some(g)
}

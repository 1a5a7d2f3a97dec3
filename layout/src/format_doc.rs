//! Keeps `docs/FORMAT.md` in step with the structs: every field table row in
//! the document must name a real field at the stated offset and size, and
//! every field of every on-media struct must appear in the document.

use std::mem::offset_of;

use crate::journal::{JournalEntryRaw, JournalHeaderRaw};
use crate::{AttrSlotRaw, InodeRaw, RecordRaw, SuperblockRaw};

const DOC: &str = include_str!("../../docs/FORMAT.md");

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! fields {
    ($out:ident, $ty:ident { $($f:ident),* $(,)? }) => {
        $( $out.push((stringify!($ty), stringify!($f), offset_of!($ty, $f), field_size(|s: &$ty| &s.$f))); )*
        $out.push((stringify!($ty), "(total)", 0, size_of::<$ty>()));
    };
}

fn actual() -> Vec<(&'static str, &'static str, usize, usize)> {
    let mut v = Vec::new();
    fields!(
        v,
        SuperblockRaw {
            magic,
            version,
            incompat,
            ro_compat,
            compat,
            image_len_bytes,
            buffer_size_bytes,
            inode_count,
            record_count,
            buffer_count,
            journal_offset,
            journal_slots,
            journal_slot_bytes,
            inode_offset,
            inode_size_bytes,
            record_size_bytes,
            record_offset,
            buffer_offset,
            uuid,
            created_ns,
            mount_count,
            state,
            flags,
            last_mount_ns,
            label,
            reserved,
            crc
        }
    );
    fields!(
        v,
        RecordRaw {
            next,
            buffer,
            buf_off,
            len,
            payload_crc,
            file_off,
            seq,
            timestamp_ns,
            aux,
            kind,
            flags,
            reserved,
            crc
        }
    );
    fields!(
        v,
        InodeRaw {
            selector,
            data_head,
            xattr_head,
            change,
            birth,
            reserved,
            slots
        }
    );
    fields!(
        v,
        AttrSlotRaw {
            mode,
            uid,
            gid,
            nlink,
            size,
            atime_ns,
            mtime_ns,
            ctime_ns,
            rdev,
            parent,
            generation,
            crc
        }
    );
    fields!(
        v,
        JournalHeaderRaw {
            commit,
            seq,
            count,
            reserved,
            crc
        }
    );
    fields!(v, JournalEntryRaw { addr, value });
    v
}

/// Rows of the form `| Struct | field | offset | size | ...`.
fn documented() -> Vec<(String, String, usize, usize)> {
    DOC.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            if cells.len() < 6 || !cells[1].ends_with("Raw") {
                return None;
            }
            let off = cells[3].parse().ok()?;
            let size = cells[4].parse().ok()?;
            Some((
                cells[1].to_string(),
                cells[2].trim_matches('`').to_string(),
                off,
                size,
            ))
        })
        .collect()
}

#[test]
fn format_doc_matches_structs() {
    let doc = documented();
    let act = actual();
    assert!(
        doc.len() > 40,
        "FORMAT.md field tables not found ({} rows)",
        doc.len()
    );
    for (s, f, off, size) in &doc {
        let hit = act
            .iter()
            .find(|a| a.0 == s && a.1 == f)
            .unwrap_or_else(|| panic!("FORMAT.md names {s}.{f}, which does not exist"));
        assert_eq!(
            (hit.2, hit.3),
            (*off, *size),
            "FORMAT.md says {s}.{f} is at {off} size {size}; the struct says {} size {}",
            hit.2,
            hit.3
        );
    }
    for (s, f, _, _) in &act {
        assert!(
            doc.iter().any(|d| d.0 == *s && d.1 == *f),
            "{s}.{f} is missing from docs/FORMAT.md"
        );
    }
}

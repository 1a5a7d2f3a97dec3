//! The tree as a direct reader sees it: after every operation the model
//! suite takes a copy of the image and checks that pktfs-direct, reading
//! it with every record verified, finds exactly the Volume's tree (every
//! path's kind, mode, owner, links, size, bytes or target, the listing of
//! every directory, and which paths are one inode). The Volume's DRAM state
//! and the image must never disagree in anything a direct reader reports.

use std::collections::{BTreeMap, BTreeSet};

use pktfs_direct::{Error, Image, OpenOptions, VerifyMode};
use pktfs_fs::FileType;

use super::Tree;

/// Check the direct reader's view of `image` against the Volume's `t`.
pub fn check(image: &[u8], t: &Tree) -> Result<(), String> {
    let opts = OpenOptions {
        verify: Some(VerifyMode::Always),
    };
    let img = Image::from_bytes(image, &opts).map_err(|e| format!("direct: {e}"))?;
    let mut children: BTreeMap<&str, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for p in t.0.keys().filter(|p| p.as_str() != "/") {
        let (dir, name) = p.rsplit_once('/').expect("absolute");
        let dir = if dir.is_empty() { "/" } else { dir };
        children
            .entry(dir)
            .or_default()
            .insert(name.as_bytes().to_vec());
    }
    let mut inos: BTreeMap<&str, u64> = BTreeMap::new();
    for (p, e) in &t.0 {
        let at = |what: &str, err: Error| format!("direct: {p}: {what}: {err}");
        let st = img.lstat_path(p).map_err(|e| at("lstat", e))?;
        let want = (e.kind, e.perm, e.uid, e.gid, e.rdev, e.nlink, e.size);
        let got = (st.kind, st.perm, st.uid, st.gid, st.rdev, st.nlink, st.size);
        if got != want {
            return Err(format!("direct: {p}: {got:?}, the Volume says {want:?}"));
        }
        match e.kind {
            FileType::Regular => {
                let f = img.open_file(p).map_err(|e| at("open", e))?;
                let mut b = vec![0u8; e.size as usize];
                match f.read_at(&mut b, 0) {
                    Ok(n) if n == b.len() && b == e.data => {}
                    Ok(n) => return Err(format!("direct: {p}: read {n} bytes, not the Volume's")),
                    // A tiered file's bytes are not in the image; only the
                    // holder (there is none here) could fetch them.
                    Err(Error::Remote { .. }) => {}
                    Err(err) => return Err(at("read", err)),
                }
            }
            FileType::Symlink => {
                let target = img.read_link(p).map_err(|e| at("readlink", e))?;
                if target != e.data {
                    return Err(format!("direct: {p}: the link's target differs"));
                }
            }
            FileType::Directory => {
                let listed: BTreeSet<Vec<u8>> = img
                    .read_dir(p)
                    .map_err(|e| at("read_dir", e))?
                    .into_iter()
                    .map(|d| d.name)
                    .collect();
                let want = children.get(p.as_str()).cloned().unwrap_or_default();
                if listed != want {
                    return Err(format!(
                        "direct: {p}: lists {listed:?}, the Volume {want:?}"
                    ));
                }
            }
            _ => {}
        }
        // Paths that are one inode in the Volume are one inode here.
        match inos.get(e.ident.as_str()) {
            Some(&i) if i != st.ino => {
                return Err(format!(
                    "direct: {p} is inode {}, {} is {i}",
                    st.ino, e.ident
                ))
            }
            _ => {
                inos.insert(&e.ident, st.ino);
            }
        }
    }
    Ok(())
}

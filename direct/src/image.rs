//! An image opened for direct reading: the file mapped read-only, its
//! superblock checked, and what every handle shares (the verified set, the
//! verify mode).

use std::fs::File as StdFile;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pktfs_layout::superblock::{
    RoCompatFeatures, Superblock, BACKUP_OFFSET, INCOMPAT_SUPPORTED, PRIMARY_OFFSET,
};
use pktfs_layout::{Geometry, ROOT_INO};

use crate::base::Base;
use crate::error::{Error, Result};
use crate::file::File;
use crate::map::Mapping;
use crate::shared::Shared;
use crate::stat::Stat;
use crate::verify::{Verified, VerifyMode};

/// How to open an image for direct reading.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Check records this way whatever the holder does (default: the
    /// holder's mode, `once` when no holder publishes one).
    pub verify: Option<VerifyMode>,
}

/// An image mapped for direct reading. Cheap to clone (one mapping).
#[derive(Clone, Debug)]
pub struct Image {
    pub(crate) shared: Arc<Shared>,
}

impl Image {
    /// Map the image at `path` read-only. Only a user who may read the
    /// image file may do so (its mode is the boundary: a direct reader
    /// sees every file of the image, whatever the files' own modes say).
    pub fn open(path: impl AsRef<Path>) -> Result<Image> {
        Self::open_with(path, &OpenOptions::default())
    }

    pub fn open_with(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<Image> {
        let path = path.as_ref();
        let open_err = |source| Error::Open {
            path: path.to_path_buf(),
            source,
        };
        let file = StdFile::open(path).map_err(open_err)?;
        let meta = file.metadata().map_err(open_err)?;
        use std::os::unix::fs::FileTypeExt;
        let ft = meta.file_type();
        if !ft.is_file() && !ft.is_char_device() {
            return Err(Error::NotAnImage {
                path: path.to_path_buf(),
                why: "not a regular file or a DAX device".into(),
            });
        }
        let map = Mapping::map_file(&file).map_err(open_err)?;
        Self::from_mapping(map, path.to_path_buf(), Some(file), opts)
    }

    /// An image from a copy of its bytes (tests, or a snapshot taken
    /// elsewhere): nothing changes under it.
    pub fn from_bytes(bytes: &[u8], opts: &OpenOptions) -> Result<Image> {
        Self::from_mapping(
            Mapping::from_bytes(bytes),
            PathBuf::from("(snapshot)"),
            None,
            opts,
        )
    }

    fn from_mapping(
        map: Mapping,
        path: PathBuf,
        file: Option<StdFile>,
        opts: &OpenOptions,
    ) -> Result<Image> {
        let sb = superblock(&map, &path)?;
        let g = sb.geometry;
        if sb.ro_compat & RoCompatFeatures::CHANGE_COUNTERS.bits() == 0 {
            return Err(Error::NoLiveWords { path });
        }
        let base = Base {
            verified: Verified::new(g.record_count),
            uuid: sb.uuid,
            map,
            g,
            verify: opts.verify,
        };
        Ok(Image {
            shared: Arc::new(Shared::new(base, path, file)),
        })
    }

    /// The image file's metadata (None for a snapshot).
    pub fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        match &self.shared.file {
            Some(f) => f.metadata(),
            None => Err(std::io::Error::from(std::io::ErrorKind::Unsupported)),
        }
    }

    /// The image's UUID (from the superblock).
    pub fn uuid(&self) -> [u8; 16] {
        self.shared.uuid
    }

    /// The geometry read from the superblock.
    pub fn geometry(&self) -> Geometry {
        self.shared.g
    }

    /// The image file's path as opened.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The verify mode reads follow now.
    pub fn verify_mode(&self) -> VerifyMode {
        self.shared.verify_mode()
    }

    /// The inode number `path` leads to (symlinks followed).
    pub fn lookup(&self, path: &str) -> Result<u64> {
        self.shared.resolve(path, true).map(|(ino, _)| ino as u64)
    }

    /// `stat` of `path` (symlinks followed).
    pub fn stat_path(&self, path: &str) -> Result<Stat> {
        let ino = self.shared.resolve(path, true)?.0;
        self.shared.stat(ino)
    }

    /// `lstat` of `path` (a final symlink not followed).
    pub fn lstat_path(&self, path: &str) -> Result<Stat> {
        let ino = self.shared.resolve(path, false)?.0;
        self.shared.stat(ino)
    }

    /// `stat` of inode `ino`.
    pub fn stat(&self, ino: u64) -> Result<Stat> {
        self.shared.stat(checked_ino(ino)?)
    }

    /// Open the regular file at `path` for reading.
    pub fn open_file(&self, path: &str) -> Result<File> {
        let (ino, birth) = self.shared.resolve(path, true)?;
        File::new(self.shared.clone(), ino, birth, Some(path.to_string()))
    }

    /// Open inode `ino` (a regular file) for reading, as the file it is
    /// now. Without a path it cannot be found again after the holder
    /// restarts: reads then fail with `Stale` until [`File::rebind`].
    pub fn open_ino(&self, ino: u64) -> Result<File> {
        let ino = checked_ino(ino)?;
        let birth = self
            .shared
            .consistent(ino, |_| Ok(self.shared.inode(ino)?.birth))?;
        File::new(self.shared.clone(), ino, birth, None)
    }

    /// The entries of the directory at `path` (without `.` and `..`).
    pub fn read_dir(&self, path: &str) -> Result<Vec<crate::DirEntry>> {
        let ino = self.shared.resolve(path, true)?.0;
        self.shared.read_dir(ino, path)
    }

    /// The target of the symlink at `path`.
    pub fn read_link(&self, path: &str) -> Result<Vec<u8>> {
        let ino = self.shared.resolve(path, false)?.0;
        self.shared.read_link(ino, path)
    }

    /// The root directory's inode number.
    pub fn root(&self) -> u64 {
        ROOT_INO as u64
    }
}

pub(crate) fn checked_ino(ino: u64) -> Result<u32> {
    u32::try_from(ino)
        .ok()
        .filter(|&i| i != 0)
        .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
}

/// The primary superblock, else the backup, checked against the mapping
/// and this build's features.
fn superblock(map: &Mapping, path: &Path) -> Result<Superblock> {
    let not = |why: String| Error::NotAnImage {
        path: path.to_path_buf(),
        why,
    };
    let mut why = String::new();
    for off in [PRIMARY_OFFSET, BACKUP_OFFSET] {
        let mut b = [0u8; 256];
        if !map.load_words(off, &mut b) {
            return Err(not(format!(
                "{} bytes is too short for an image",
                map.len()
            )));
        }
        match Superblock::from_bytes(&b, off, map.len()) {
            Ok(sb) => {
                let unknown = sb.incompat.bits() & !INCOMPAT_SUPPORTED.bits();
                if unknown != 0 {
                    return Err(not(format!(
                        "the image uses features this build does not know (incompat {unknown:#x})"
                    )));
                }
                if sb.geometry.buffer_offset + sb.geometry.buffer_region_bytes() > map.len() {
                    return Err(not("the image is shorter than its geometry".into()));
                }
                return Ok(sb);
            }
            Err(e) => {
                if why.is_empty() {
                    why = e.to_string();
                }
            }
        }
    }
    Err(not(why))
}

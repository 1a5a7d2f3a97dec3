//! `pktfs mount` (the FUSE issue fills this in).

#[derive(clap::Args, Debug)]
pub struct MountArgs {
    pub image: std::path::PathBuf,
    pub mountpoint: std::path::PathBuf,
}

pub fn run(_a: MountArgs) -> Result<(), String> {
    Err("mount is not built yet".into())
}

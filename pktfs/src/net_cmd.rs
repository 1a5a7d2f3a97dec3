//! `pktfs serve`, `send`, `up` (the netpath issue fills these in).

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    pub image: std::path::PathBuf,
}
#[derive(clap::Args, Debug)]
pub struct SendArgs {
    pub image: std::path::PathBuf,
}
#[derive(clap::Args, Debug)]
pub struct UpArgs {}

pub fn serve(_a: ServeArgs) -> Result<(), String> {
    Err("serve is not built yet".into())
}
pub fn send(_a: SendArgs) -> Result<(), String> {
    Err("send is not built yet".into())
}
pub fn up(_a: UpArgs) -> Result<(), String> {
    Err("up is not built yet".into())
}

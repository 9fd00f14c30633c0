//! `wasmop push`: a module published to an OCI registry as a wasm artifact.

use std::path::PathBuf;

use anyhow::{Context as _, bail};

use super::read_component;

/// `wasmop push`.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The component to publish.
    pub module: PathBuf,
    /// Where: `<registry>/<repository>:<tag>`.
    pub reference: String,
    /// Reach the registry over plain HTTP.
    #[arg(long)]
    pub insecure: bool,
    /// User name for the registry (the password is read from stdin).
    #[arg(long, requires = "password_stdin")]
    pub username: Option<String>,
    /// Read the password from stdin.
    #[arg(long, requires = "username")]
    pub password_stdin: bool,
}

pub(super) async fn push(args: PushArgs) -> anyhow::Result<()> {
    use crate::source::oci;
    let reference = oci::parse_reference(&args.reference).map_err(anyhow::Error::msg)?;
    if reference.digest().is_some() {
        bail!("push to a tag, not a digest: the digest is printed after the push");
    }
    let module = read_component(&args.module)?;
    let auth = match &args.username {
        Some(user) => {
            let mut password = String::new();
            std::io::stdin()
                .read_line(&mut password)
                .context("reading the password from stdin")?;
            oci_client::secrets::RegistryAuth::Basic(
                user.clone(),
                password.trim_end_matches(['\r', '\n']).to_owned(),
            )
        }
        None => oci_client::secrets::RegistryAuth::Anonymous,
    };
    let size = module.len();
    let registry = oci::Registry::new(&reference, args.insecure, auth);
    let digest = registry.push(&reference, module).await?;
    println!("pushed {} ({size} bytes) as {digest}", reference.whole());
    Ok(())
}

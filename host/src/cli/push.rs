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
    /// Sign what is pushed with this private key, as `cosign sign --key`
    /// does (a Sigstore bundle attached to the artifact, which `cosign
    /// verify --key` and the host's `verify` accept): cosign's encrypted
    /// key, its password in `COSIGN_PASSWORD`, or a PKCS#8 PEM key.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
}

pub(super) async fn push(args: PushArgs) -> anyhow::Result<()> {
    use crate::source::oci;
    let reference = oci::parse_reference(&args.reference).map_err(anyhow::Error::msg)?;
    if reference.digest().is_some() {
        bail!("push to a tag, not a digest: the digest is printed after the push");
    }
    let module = read_component(&args.module)?;
    // The key is read before anything is pushed: a wrong password pushes
    // nothing.
    let signer = args
        .sign_key
        .as_deref()
        .map(|path| {
            let password = std::env::var("COSIGN_PASSWORD").ok();
            crate::source::signature::signer(path, password.as_deref().map(str::as_bytes))
        })
        .transpose()
        .map_err(anyhow::Error::msg)?;
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
    if let Some((signer, public)) = signer {
        let signature = crate::source::signature::registry::sign(
            &registry, &reference, &digest, &signer, &public,
        )
        .await
        .context("signing the pushed module")?;
        println!(
            "signed {}/{}@{digest} as {signature}",
            reference.registry(),
            reference.repository()
        );
    }
    Ok(())
}

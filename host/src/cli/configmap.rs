//! `wasmop configmap`: the ConfigMap that holds a module for the guest
//! list's `configMap` source.

use std::path::PathBuf;

use super::read_component;

/// `wasmop configmap`.
#[derive(Debug, clap::Args)]
pub struct ConfigmapArgs {
    /// The component.
    pub module: PathBuf,
    /// The ConfigMap's name.
    #[arg(long)]
    pub name: String,
    /// Its namespace: the guest list's.
    #[arg(long, default_value = "wasmop-system")]
    pub namespace: String,
    /// The `binaryData` key holding the module.
    #[arg(long, default_value = "module.wasm")]
    pub key: String,
}

pub(super) fn configmap(args: &ConfigmapArgs) -> anyhow::Result<()> {
    let module = read_component(&args.module)?;
    let config_map = crate::source::fetch::module_config_map(
        &args.namespace,
        &args.name,
        &args.key,
        &args.module.display().to_string(),
        &module,
    )?;
    print!("{}", serde_saphyr::to_string(&config_map)?);
    eprintln!(
        "guest list entry: module: {{configMap: {{name: {}, key: {}}}}}  # sha256: {}",
        args.name,
        args.key,
        crate::runtime::cache::digest(&module)
    );
    Ok(())
}

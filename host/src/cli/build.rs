//! `wasmop build`: a guest's folder to a component.

use std::path::PathBuf;

/// `wasmop build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The guest's folder (default: the current one). Its `go.mod`,
    /// `Cargo.toml`, `package.json` or `build.py` says its language.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The component to write (default: `<folder name>.wasm` in the
    /// folder).
    #[arg(short = 'o', long = "out")]
    pub out: Option<PathBuf>,
    /// Import `wasi:http/outgoing-handler`, for a guest that sends
    /// requests (the host grants the origins its guest-list entry's
    /// `allowedOutboundHosts` names).
    #[arg(long)]
    pub http: bool,
    /// The WASI 0.2 WIT `--http` imports from: a folder of `wasi-http`,
    /// `wasi-io`, … each with its `package.wit`.
    #[arg(long, env = "WASMOP_WASI_WIT", value_name = "DIR")]
    pub wasi_wit: Option<PathBuf>,
    /// The folder of the contract's `operator.wit` (default: the guest's
    /// `wit/`, else the contract this `wasmop` was built with); a WIT of
    /// another contract version than the SDK's is refused.
    #[arg(long, value_name = "DIR")]
    pub wit: Option<PathBuf>,
}

pub(super) fn build(args: BuildArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let built = crate::build::build(&crate::build::Options {
        dir: args.dir,
        out: args.out,
        http: args.http,
        wasi_wit: args.wasi_wit,
        wit: args.wit,
    })?;
    let steps: Vec<String> = built
        .steps
        .iter()
        .map(|(step, took)| format!("{step} {:.1} s", took.as_secs_f64()))
        .collect();
    eprintln!(
        "--> {} ({} KiB, {:?}, {}) in {:.1} s ({})",
        built.out.display(),
        built.bytes.div_ceil(1024),
        built.lang,
        built.world,
        started.elapsed().as_secs_f64(),
        steps.join(", ")
    );
    Ok(())
}

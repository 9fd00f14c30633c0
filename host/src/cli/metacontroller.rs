//! `wasmop metacontroller build`: a Metacontroller controller's definition
//! and hooks, unchanged, as one guest module.

use std::path::PathBuf;

use crate::build::metacontroller::{self, Options, Read};

/// `wasmop metacontroller`.
#[derive(Debug, clap::Args)]
pub struct MetacontrollerArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: MetacontrollerCommand,
}

/// The subcommands of `wasmop metacontroller`.
#[derive(Debug, clap::Subcommand)]
pub enum MetacontrollerCommand {
    /// Build a CompositeController or DecoratorController and its hook
    /// files into one guest module, listed then like any other guest.
    Build(BuildArgs),
}

/// `wasmop metacontroller build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// A file holding the controller's definition
    /// (`metacontroller.k8s.io/v1alpha1` `CompositeController` or
    /// `DecoratorController`); its other documents (the hook server's
    /// Deployment, …) are ignored.
    pub definition: PathBuf,
    /// The folder of hook files the hook server would serve: the URL path
    /// `/sync` is `sync.js` or `sync.py` there.
    #[arg(long, value_name = "DIR")]
    pub hooks: PathBuf,
    /// The definition to build, where the file holds several.
    #[arg(long)]
    pub name: Option<String>,
    /// The module to write.
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
}

pub(super) fn metacontroller(args: MetacontrollerArgs) -> anyhow::Result<()> {
    let MetacontrollerCommand::Build(args) = args.command;
    let started = std::time::Instant::now();
    let options = Options {
        definition: args.definition,
        hooks: args.hooks,
        name: args.name,
        out: args.out,
    };
    let read = Read::from(&options)?;
    metacontroller::check_hooks(&options, &read)?;
    let kinds = metacontroller::resolve(&read.resources())?;
    let built = metacontroller::build(&options, &read, kinds)?;
    let language = match built.lang {
        crate::build::Lang::Python => "Python",
        _ => "JavaScript",
    };
    eprintln!(
        "--> {} ({} KiB, {language} hooks, {}) in {:.1} s",
        built.out.display(),
        built.bytes.div_ceil(1024),
        built.world,
        started.elapsed().as_secs_f64(),
    );
    Ok(())
}

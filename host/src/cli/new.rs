//! `wasmop new`: a guest project in Rust, TypeScript, Python or Go.

use std::path::PathBuf;

/// `wasmop new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The project's and the guest's name (a DNS label, e.g. `web-cache`).
    pub name: String,
    /// The language to write the guest in.
    #[arg(long, value_enum)]
    pub lang: crate::scaffold::Lang,
    /// The kind the guest reconciles (default: the name in CamelCase).
    #[arg(long)]
    pub kind: Option<String>,
    /// The kind's API group.
    #[arg(long, default_value = "example.com")]
    pub group: String,
    /// Where to create the project (default: `./<name>`); must be new or
    /// empty.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The Rust SDK's directory (`guests/sdk` of a wasmop checkout), which a
    /// Rust project depends on by path (default: the SDK of the source tree
    /// this binary was built from).
    #[arg(long)]
    pub sdk: Option<PathBuf>,
}

pub(super) fn new(args: NewArgs) -> anyhow::Result<()> {
    let project = crate::scaffold::Project {
        name: args.name,
        lang: args.lang,
        kind: args.kind,
        group: args.group,
        sdk: args.sdk,
    };
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&project.name));
    let files = crate::scaffold::generate(&project, &dir)?;
    for file in &files {
        println!("created {}", dir.join(file).display());
    }
    println!();
    println!("Next:");
    println!("  cd {}", dir.display());
    println!("  {}", project.build_command());
    println!("  {}", project.test_command());
    println!("  {}", project.cases_command());
    println!(
        "  wasmop render --guest {} --parent sample.yaml",
        project.wasm()
    );
    Ok(())
}

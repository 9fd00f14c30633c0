//! The `wasmop` command line (interface contract):
//!
//! - `wasmop run [--guest <name>=<path.wasm>]… [--settings <name>=<file.yaml>]… [--allow-outbound <name>=<url>]… [--guests-configmap <ns>/<name>] [--kubeconfig <path>]`
//! - `wasmop render --guest <path.wasm> --parent <object.yaml> [--observed <objects.yaml>]… [--related <objects.yaml>]… [--secret-values] [--settings <file.yaml>] [--allow-outbound <url>]… [-o yaml|json]`
//! - `wasmop rbac --guest [<name>=]<path.wasm> [--guest …] [--name wasmop] [--namespace wasmop-system] [--pull-secret <name>]… [--guest-identity host|impersonate]`
//! - `wasmop test --guest <path.wasm> [--settings <file.yaml>] [--update] <cases…>`
//! - `wasmop build [<dir>] [-o <out.wasm>] [--http [--wasi-wit <dir>]]`
//! - `wasmop push <file.wasm> <registry>/<repository>:<tag> [--insecure] [--username <user> --password-stdin]`
//!
//! Errors are printed as one line each: `error: ` and the chain of causes,
//! each cause once.

mod build;
mod configmap;
mod metacontroller;
mod new;
mod plan;
mod push;
mod rbac;
mod render;
mod run;
mod status;
mod test;

pub use build::BuildArgs;
pub use configmap::ConfigmapArgs;
pub use new::NewArgs;
pub use plan::PlanArgs;
pub use push::PushArgs;
pub use rbac::RbacArgs;
pub use render::RenderArgs;
pub use run::{IdentityMode, ProductionArgs, RunArgs};
pub use status::StatusArgs;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

use crate::runtime::{
    CompileLimits, Limits, ModuleBytes, Runtime, RuntimeConfig, limits::parse_duration,
};
use crate::source::list::{check_guest_name, parse_bytes};
use crate::telemetry::logs::LogFormat;

/// wasmop runs Kubernetes operators as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "wasmop", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the host against a cluster.
    Run(Box<RunArgs>),
    /// Run one reconcile offline and print the result.
    Render(RenderArgs),
    /// Print the least-privilege roles for a set of guests.
    Rbac(RbacArgs),
    /// Publish a module to an OCI registry as a wasm artifact; prints its
    /// digest.
    Push(PushArgs),
    /// Build a guest's folder into a component: Go with the bindings
    /// generated from the contract, Rust, TypeScript and Python with their
    /// own toolchains.
    Build(BuildArgs),
    /// Create a guest project: a kind and its CRD, a reconcile that owns
    /// one ConfigMap, a unit test, and a README with the commands that
    /// build, test, render and run it.
    New(NewArgs),
    /// Metacontroller's controllers on wasmop: `build` makes a
    /// CompositeController or DecoratorController and its hook files,
    /// unchanged, into one guest.
    Metacontroller(metacontroller::MetacontrollerArgs),
    /// Print the ConfigMap that holds a module for the guest list's
    /// `configMap` source (pipe it to `kubectl apply -f -`); refuses a
    /// module larger than a ConfigMap holds.
    Configmap(ConfigmapArgs),
    /// Run a new module version of a guest against the live cluster,
    /// read-only, and print what would change. Exits 0 when nothing would
    /// change, 2 when something would (or would fail), 1 on an error of
    /// its own.
    Plan(PlanArgs),
    /// Print each guest's version and rollout from the status ConfigMap
    /// beside the guest list.
    Status(StatusArgs),
    /// Run reconcile, admission and conversion cases (YAML files) against
    /// a guest offline; one line per case, exit 1 when one fails.
    Test(test::TestArgs),
    /// Compile a component read on stdin into wasmtime's artifact on
    /// stdout: the child process `wasmop run` compiles its guests in.
    #[command(name = "compile-worker", hide = true)]
    CompileWorker(CompileWorkerArgs),
}

/// `wasmop compile-worker`: the limits the host sets on it.
#[derive(Debug, clap::Args)]
pub struct CompileWorkerArgs {
    /// CPU seconds the compile may use.
    #[arg(long, default_value_t = CompileLimits::default().cpu_seconds)]
    pub cpu_seconds: u64,
    /// MiB of memory the compile may use.
    #[arg(long, default_value_t = CompileLimits::default().memory_mib)]
    pub memory_mib: u64,
}

/// Output of `plan` and `status`.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum Report {
    /// For people.
    #[default]
    Text,
    /// One JSON document.
    Json,
    /// YAML.
    Yaml,
}

/// Sandbox limit flags shared by `run` (for `--guest` files) and `render`.
#[derive(Debug, clap::Args)]
pub struct LimitArgs {
    /// Deadline of one guest call (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub timeout: std::time::Duration,
    /// Linear memory cap of a guest (e.g. 64Mi).
    #[arg(long, default_value = "64Mi", value_parser = parse_bytes)]
    pub memory_limit: usize,
    /// Largest response a guest may return (e.g. 4Mi).
    #[arg(long, default_value = "4Mi", value_parser = parse_bytes)]
    pub max_response_bytes: usize,
    /// Most children one response may hold.
    #[arg(long, default_value_t = 100)]
    pub max_children: usize,
    /// Most Events one response may hold.
    #[arg(long, default_value_t = 16)]
    pub max_events: usize,
    /// Most related objects one request may hold.
    #[arg(long, default_value_t = 256)]
    pub max_related_objects: usize,
    /// Most bytes of related objects one request may hold (e.g. 4Mi).
    #[arg(long, default_value = "4Mi", value_parser = parse_bytes)]
    pub max_related_bytes: usize,
    /// A kind that grants power the guest may declare, as `<Kind>.<group>`
    /// (`<Kind>` for the core group); repeatable (the guest list's
    /// `privilegedKinds`).
    #[arg(long = "privileged-kind", value_name = "KIND.GROUP")]
    pub privileged_kinds: Vec<String>,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            timeout: self.timeout,
            memory_bytes: self.memory_limit,
            max_response_bytes: self.max_response_bytes,
            max_children: self.max_children,
            max_events: self.max_events,
            max_related_objects: self.max_related_objects,
            max_related_bytes: self.max_related_bytes,
            outbound: std::sync::Arc::default(),
            privileged: std::sync::Arc::new(crate::validate::description::PrivilegedKinds::Named(
                self.privileged_kinds.iter().cloned().collect(),
            )),
        }
    }
}

/// Output format of `render`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    /// YAML.
    Yaml,
    /// One JSON object.
    Json,
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let traces = match &cli.command {
        Command::Run(args) => {
            // The exporter's HTTP client takes the process's provider.
            crate::client::install_crypto_provider();
            match crate::telemetry::traces::Traces::from_settings(
                args.production.otlp_endpoint.as_deref(),
            ) {
                Ok(traces) => traces,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::FAILURE;
                }
            }
        }
        _ => None,
    };
    crate::telemetry::logs::init(
        match &cli.command {
            Command::Run(args) => args.production.log_format,
            _ => LogFormat::Text,
        },
        traces.as_ref(),
    );
    let result = match cli.command {
        Command::CompileWorker(args) => {
            return crate::runtime::compile::worker(CompileLimits {
                cpu_seconds: args.cpu_seconds,
                memory_mib: args.memory_mib,
            });
        }
        Command::Run(args) => {
            crate::memory::limit_arenas();
            tokio::runtime::Runtime::new()
                .context("starting the async runtime")
                .and_then(|rt| rt.block_on(run::run(*args)))
        }
        Command::Render(args) => render::render(&args),
        Command::Rbac(args) => rbac::rbac(&args),
        Command::Push(args) => tokio::runtime::Runtime::new()
            .context("starting the async runtime")
            .and_then(|rt| rt.block_on(push::push(args))),
        Command::Build(args) => build::build(args),
        Command::New(args) => new::new(args),
        Command::Metacontroller(args) => metacontroller::metacontroller(args),
        Command::Configmap(args) => configmap::configmap(&args),
        Command::Plan(args) => return plan::plan(args),
        Command::Test(args) => return test::test(args),
        Command::Status(args) => tokio::runtime::Runtime::new()
            .context("starting the async runtime")
            .and_then(|rt| rt.block_on(status::status(args))),
    };
    if let Some(traces) = traces {
        traces.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, each cause once: many errors
/// repeat their source in their own message, and some spread a message over
/// lines.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if text.is_empty() || parts.iter().any(|p| p.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

pub(crate) async fn config(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::infer()
            .await
            .context("no cluster to talk to (set --kubeconfig or $KUBECONFIG, or run in a pod)")?,
    })
}

/// `NAME=VALUE`, with the name a guest name.
pub(crate) fn name_and_value<'a>(flag: &str, text: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    let Some((name, value)) = text.split_once('=') else {
        bail!("{flag} takes <name>=<value>, got {text:?}");
    };
    check_guest_name(name).map_err(anyhow::Error::msg)?;
    Ok((name, value))
}

/// A settings file as JSON text: any YAML value.
pub(crate) fn read_settings(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading settings {}", path.display()))?;
    let value: Value = serde_saphyr::from_str(&text)
        .with_context(|| format!("parsing settings {}", path.display()))?;
    crate::settings::settings_text(&value)
        .map_err(|e| anyhow::anyhow!("settings {}: {e}", path.display()))
}

/// `--allow-outbound` entries, checked.
fn outbound_hosts<S: AsRef<str>>(
    entries: &[S],
) -> anyhow::Result<std::sync::Arc<crate::runtime::capabilities::http::OutboundHosts>> {
    Ok(std::sync::Arc::new(
        crate::runtime::capabilities::http::OutboundHosts::parse(entries)
            .context("--allow-outbound")?,
    ))
}

pub(crate) fn load_one(
    path: &PathBuf,
    limits: Limits,
    settings: Option<String>,
    cache_dir: Option<&std::path::Path>,
) -> anyhow::Result<crate::runtime::Guest> {
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: cache_dir.map(std::path::Path::to_path_buf),
        ..RuntimeConfig::default()
    })?;
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let (guest, outcome) = runtime
        .load(&stem(path), &ModuleBytes::new(bytes), limits, settings)
        .with_context(|| format!("loading {}", path.display()))?;
    tracing::debug!(hit = ?outcome.hit, elapsed = ?outcome.elapsed, "module loaded");
    Ok(guest)
}

/// A guest's name from its file: the file stem.
fn stem(path: &std::path::Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("guest")
        .to_string()
}

/// The bytes of the component at `path`; refused if it is not one.
fn read_component(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let module = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if !crate::runtime::is_component(&module) {
        bail!(
            "{} is not a WebAssembly component (a guest is built as a component, e.g. `cargo xtask build-guests`)",
            path.display()
        );
    }
    Ok(module)
}

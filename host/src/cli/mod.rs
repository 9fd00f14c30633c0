//! The `wasmop` command line (interface contract):
//!
//! - `wasmop run [--guest <name>=<path.wasm>]… [--settings <name>=<file.yaml>]… [--allow-outbound <name>=<url>]… [--guests-configmap <ns>/<name>] [--kubeconfig <path>]`
//! - `wasmop render --guest <path.wasm> --parent <object.yaml> [--observed <objects.yaml>]… [--related <objects.yaml>]… [--secret-values] [--settings <file.yaml>] [--allow-outbound <url>]… [-o yaml|json]`
//! - `wasmop rbac --guest [<name>=]<path.wasm> [--guest …] [--name wasmop] [--namespace wasmop-system] [--pull-secret <name>]… [--guest-identity host|impersonate]`
//! - `wasmop test --guest <path.wasm> [--settings <file.yaml>] [--update] <cases…>`
//! - `wasmop push <file.wasm> <registry>/<repository>:<tag> [--insecure] [--username <user> --password-stdin]`
//!
//! Errors are printed as one line each: `error: ` and the chain of causes,
//! each cause once.

mod plan;
mod status;
mod test;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

use crate::client::Clients;
use crate::health::Health;
use crate::host::{GuestSpec, Host, Origin};
use crate::leader::{LeaderConfig, Leadership};
use crate::protected::{ProtectedObjects, ProtectedRef};
use crate::runtime::{
    CompileLimits, Compiler, Limits, ModuleBytes, Runtime, RuntimeConfig, limits::parse_duration,
};
use crate::settings::ControllerSettings;
use crate::source::list::{check_guest_name, parse_bytes};
use crate::source::watch;
use crate::telemetry::Metrics;
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
    /// Create a guest project: a kind and its CRD, a reconcile that owns
    /// one ConfigMap, a unit test, and a README with the commands that
    /// build, test, render and run it.
    New(NewArgs),
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

/// `wasmop plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The guest and its new module, as `<name>=<path.wasm>`.
    #[arg(long = "guest", value_name = "NAME=PATH")]
    pub guest: String,
    /// Settings for the new module, as `<name>=<file.yaml>` (default: the
    /// guest list entry's).
    #[arg(long = "settings", value_name = "NAME=FILE")]
    pub settings: Option<String>,
    /// Namespace to plan in; repeatable; default all.
    #[arg(long = "namespace", value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,
    /// Kubeconfig file; default: $KUBECONFIG, ~/.kube/config or in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The guest list whose entry gives the guest's settings, limits and
    /// Secret handling, `<namespace>/<name>`.
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = crate::source::watch::DEFAULT_LIST)]
    pub guests_configmap: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Report,
    /// Directory for compiled modules (the host's `--cache-dir`).
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// `wasmop status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The guest list, `<namespace>/<name>`; its status ConfigMap is
    /// `<name>-status` beside it.
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = crate::source::watch::DEFAULT_LIST)]
    pub guests_configmap: String,
    /// Kubeconfig file; default: $KUBECONFIG, ~/.kube/config or in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Report,
}

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

/// `wasmop run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A guest from a file, as `<name>=<path.wasm>`; repeatable. When given,
    /// the guest list ConfigMap is only used if `--guests-configmap` is set too.
    #[arg(long = "guest", value_name = "NAME=PATH")]
    pub guests: Vec<String>,
    /// Settings for a `--guest`, as `<name>=<file.yaml>` (any YAML value,
    /// as the guest list's `settings`); repeatable.
    #[arg(long = "settings", value_name = "NAME=FILE")]
    pub settings: Vec<String>,
    /// What a `--guest` may call over `wasi:http`, as `<name>=<url>`
    /// (`scheme://host[:port]`, as the guest list's `allowedOutboundHosts`);
    /// repeatable. Default: nothing.
    #[arg(long = "allow-outbound", value_name = "NAME=URL")]
    pub allow_outbound: Vec<String>,
    /// The guest list ConfigMap, `<namespace>/<name>` (default
    /// wasmop-system/wasmop-guests when no --guest is given).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub guests_configmap: Option<String>,
    /// Kubeconfig file; default: $KUBECONFIG, ~/.kube/config or in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Directory for compiled modules, so restarts skip compilation.
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Guest calls that may run at once across all guests: the size of the
    /// pool their instances and memories come from. Keep it above the sum
    /// of every guest's concurrency; a call beyond it fails and is retried.
    #[arg(long, env = "WASMOP_INSTANCE_POOL", default_value_t = crate::runtime::DEFAULT_INSTANCE_POOL)]
    pub instance_pool: u32,
    /// CPU seconds one module's compile may use (in its own process); past
    /// them that module fails to load.
    #[arg(long, env = "WASMOP_COMPILE_CPU_SECONDS", default_value_t = CompileLimits::default().cpu_seconds)]
    pub compile_cpu_seconds: u64,
    /// MiB of memory one module's compile may use (in its own process);
    /// past them that module fails to load.
    #[arg(long, env = "WASMOP_COMPILE_MEMORY_MIB", default_value_t = CompileLimits::default().memory_mib)]
    pub compile_memory_mib: u64,
    /// Reconciles per guest at once (for --guest files).
    #[arg(long, default_value_t = ControllerSettings::default().concurrency)]
    pub concurrency: u16,
    /// Namespace to watch (for --guest files); repeatable; default all.
    #[arg(long = "namespace", value_name = "NAMESPACE")]
    pub namespaces: Vec<String>,
    /// Resync period (for --guest files).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub resync: std::time::Duration,
    /// Sandbox limits (for --guest files).
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Leader election and the endpoints a cluster needs.
    #[command(flatten)]
    pub production: ProductionArgs,
}

/// Flags for running in a cluster (interface contract).
#[derive(Debug, clap::Args)]
pub struct ProductionArgs {
    /// Elect a leader on a Lease; only the leader writes.
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's name.
    #[arg(long, default_value = "wasmop")]
    pub leader_elect_lease_name: String,
    /// The Lease's namespace (default: the guest list's).
    #[arg(long)]
    pub leader_elect_namespace: Option<String>,
    /// How long a lease lasts after its last renewal.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: std::time::Duration,
    /// How long the leader may fail to renew before it stops writing.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: std::time::Duration,
    /// How often the leader renews and a standby retries.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: std::time::Duration,
    /// Where `/metrics` is served (`:8080`, `127.0.0.1:8080`; `0`: off).
    #[arg(long, default_value = ":8080")]
    pub metrics_bind_address: String,
    /// Where `/healthz` and `/readyz` are served (`0`: off).
    #[arg(long, default_value = ":8081")]
    pub health_probe_bind_address: String,
    /// Only the leader reports ready.
    #[arg(long)]
    pub readyz_requires_leader: bool,
    /// How long SIGTERM waits for running reconciles before it exits.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub graceful_shutdown_timeout: std::time::Duration,
    /// Where the admission and conversion webhooks are served (`:9443`,
    /// `127.0.0.1:9443`; `0`: off). Only with --webhook-host.
    #[arg(long, default_value = ":9443")]
    pub webhook_bind_address: String,
    /// The address the API server reaches this host's webhooks at, `host`
    /// or `host:port` (the bound port when none is given); in a cluster the
    /// webhook Service (`wasmop-webhook.wasmop-system.svc:443`); against a
    /// local control plane `127.0.0.1`. Without it no webhook is served or
    /// registered, and a guest that converts a kind whose CRD names a
    /// conversion webhook is refused.
    #[arg(long)]
    pub webhook_host: Option<String>,
    /// The `kubernetes.io/tls` Secret with the webhooks' certificate,
    /// `<namespace>/<name>` (`tls.crt`, `tls.key`, `ca.crt`); without it
    /// the host issues one at start (one replica only: each replica would
    /// issue its own).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub webhook_cert_secret: Option<String>,
    /// Log lines as text or JSON (with the reconcile span's fields).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Export a trace of every reconcile over OTLP/HTTP to this collector
    /// (a base URL, e.g. `http://otel-collector:4318`; `/v1/traces` is
    /// added). Without it, the standard `OTEL_EXPORTER_OTLP_ENDPOINT` and
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` turn traces on; sampling
    /// follows `OTEL_TRACES_SAMPLER`. Off by default.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Whose identity a guest's requests carry: `host` (this process's
    /// own) or `impersonate` (the guest's ServiceAccount
    /// `wasmop-guest-<guest>` in the guest list's namespace, or
    /// `--leader-elect-namespace` without a list; `wasmop rbac
    /// --guest-identity impersonate` prints its roles).
    #[arg(long, value_enum, default_value = "host")]
    pub guest_identity: IdentityMode,
}

/// `--guest-identity` (interface contract).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum IdentityMode {
    /// Every guest's requests go out under the host's own identity.
    #[default]
    Host,
    /// Each guest's requests impersonate its own ServiceAccount.
    Impersonate,
}

/// Output format of `render`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    /// YAML.
    Yaml,
    /// One JSON object.
    Json,
}

/// `wasmop render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The guest component.
    #[arg(long)]
    pub guest: PathBuf,
    /// The parent object (YAML or JSON).
    #[arg(long, required_unless_present_any = ["admission", "convert"])]
    pub parent: Option<PathBuf>,
    /// Instead of a reconcile: an `admission.k8s.io/v1` AdmissionReview
    /// (YAML or JSON) run through the guest's `admit` as the host's
    /// mutating and then validating webhook would.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["parent", "convert"])]
    pub admission: Option<PathBuf>,
    /// Instead of a reconcile: objects (YAML, several documents allowed)
    /// converted by the guest's `convert` to `--to`.
    #[arg(long, value_name = "FILE", requires = "to", conflicts_with = "parent")]
    pub convert: Option<PathBuf>,
    /// The apiVersion `--convert` converts to, e.g. apps.example.com/v1beta1.
    #[arg(long, value_name = "API_VERSION", requires = "convert")]
    pub to: Option<String>,
    /// Observed children (YAML, several documents allowed); repeatable.
    #[arg(long)]
    pub observed: Vec<PathBuf>,
    /// Objects of the guest's related kinds (YAML, several documents
    /// allowed); those that map to the parent reach the guest. Repeatable.
    #[arg(long)]
    pub related: Vec<PathBuf>,
    /// Hand the guest Secret values (the guest list's `secretValues`);
    /// without it each value is its SHA-256, as in the cluster.
    #[arg(long)]
    pub secret_values: bool,
    /// Render the deletion path (as if the parent had a deletionTimestamp).
    #[arg(long)]
    pub deleting: bool,
    /// The guest's settings (any YAML value, as the guest list's `settings`).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// What the guest may call over `wasi:http` (`scheme://host[:port]`, as
    /// the guest list's `allowedOutboundHosts`); repeatable. The calls are
    /// made. Default: nothing.
    #[arg(long = "allow-outbound", value_name = "URL")]
    pub allow_outbound: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "yaml")]
    pub output: Output,
    /// Directory for compiled modules (the host's `--cache-dir`), so the
    /// next render of the same module skips compilation.
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Sandbox limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// `wasmop rbac`.
#[derive(Debug, clap::Args)]
pub struct RbacArgs {
    /// A guest component, as `<name>=<path.wasm>` (the guest list's
    /// name) or a path (named by its file stem); repeatable. Modules given
    /// the same name are one guest's versions: its roles allow what any of
    /// them describes.
    #[arg(long = "guest", required = true, value_name = "[NAME=]PATH")]
    pub guests: Vec<PathBuf>,
    /// Name of the ClusterRole and the Role.
    #[arg(long, default_value = "wasmop")]
    pub name: String,
    /// The guest list's namespace, where the Role goes.
    #[arg(long, default_value = "wasmop-system")]
    pub namespace: String,
    /// The leader-election Lease's name.
    #[arg(long, default_value = "wasmop")]
    pub lease_name: String,
    /// The guest list's name (in `--namespace`): the host writes the
    /// rollout status ConfigMap `<name>-status` beside it.
    #[arg(long, default_value = "wasmop-guests")]
    pub guest_list: String,
    /// A guest's settings, as `<file stem>=<file.yaml>` (they may change
    /// what it describes); repeatable.
    #[arg(long = "settings", value_name = "NAME=FILE")]
    pub settings: Vec<String>,
    /// The host's `--webhook-cert-secret` name (in the guest list's
    /// namespace), which it reads or creates.
    #[arg(long, value_name = "NAME")]
    pub webhook_cert_secret: Option<String>,
    /// A `pullSecret` of the guest list, which the host reads; repeatable.
    #[arg(long = "pull-secret", value_name = "NAME")]
    pub pull_secrets: Vec<String>,
    /// The host's `--guest-identity`: with `impersonate`, each guest gets a
    /// ServiceAccount with its own ClusterRole and binding, and the host's
    /// roles keep what it does itself and `impersonate` on exactly those
    /// ServiceAccounts.
    #[arg(long, value_enum, default_value = "host")]
    pub guest_identity: IdentityMode,
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
                .and_then(|rt| rt.block_on(run(*args)))
        }
        Command::Render(args) => render(&args),
        Command::Rbac(args) => rbac(&args),
        Command::Push(args) => tokio::runtime::Runtime::new()
            .context("starting the async runtime")
            .and_then(|rt| rt.block_on(push(args))),
        Command::New(args) => new(args),
        Command::Configmap(args) => configmap(&args),
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
) -> anyhow::Result<std::sync::Arc<crate::runtime::http::OutboundHosts>> {
    Ok(std::sync::Arc::new(
        crate::runtime::http::OutboundHosts::parse(entries).context("--allow-outbound")?,
    ))
}

/// The `<name>=<value>` pairs of `flag`, each naming one of the `--guest`s.
fn for_guests<'a>(
    args: &RunArgs,
    flag: &str,
    values: &'a [String],
) -> anyhow::Result<Vec<(&'a str, &'a str)>> {
    values
        .iter()
        .map(|v| {
            let (name, value) = name_and_value(flag, v)?;
            if !args
                .guests
                .iter()
                .any(|g| g.split_once('=').map(|(n, _)| n) == Some(name))
            {
                bail!("{flag} {name}=…: no --guest is named {name:?}");
            }
            Ok((name, value))
        })
        .collect()
}

/// The `--guest` files, checked and read before anything talks to the
/// cluster.
fn file_guests(args: &RunArgs) -> anyhow::Result<Vec<GuestSpec>> {
    let controller = ControllerSettings {
        concurrency: args.concurrency.max(1),
        resync: args.resync,
        namespaces: args.namespaces.clone(),
        ..ControllerSettings::default()
    };
    let mut settings = std::collections::HashMap::new();
    for (name, path) in for_guests(args, "--settings", &args.settings)? {
        settings.insert(name.to_owned(), read_settings(std::path::Path::new(path))?);
    }
    let mut outbound: std::collections::HashMap<&str, Vec<&str>> = Default::default();
    for (name, url) in for_guests(args, "--allow-outbound", &args.allow_outbound)? {
        outbound.entry(name).or_default().push(url);
    }
    let mut specs = Vec::new();
    for g in &args.guests {
        let (name, path) = name_and_value("--guest", g)?;
        if specs.iter().any(|s: &GuestSpec| s.name == name) {
            bail!("--guest {name} is given twice");
        }
        let module =
            std::fs::read(path).with_context(|| format!("reading guest {name:?} from {path}"))?;
        specs.push(GuestSpec {
            name: name.to_string(),
            module: ModuleBytes::new(module),
            limits: Limits {
                outbound: outbound_hosts(outbound.get(name).map_or(&[][..], Vec::as_slice))?,
                ..args.limits.limits()
            },
            controller: controller.clone(),
            settings: settings.remove(name),
            origin: Origin::Flag,
            rollout: crate::rollout::RolloutSettings::default(),
            source: None,
            resume: None,
        });
    }
    Ok(specs)
}

/// This host's identity in the Lease: the pod (or machine) name and a
/// random suffix, so two processes on one machine never share one.
fn identity() -> String {
    let host = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .unwrap_or_else(|| "wasmop".into());
    let mut bytes = [0u8; 4];
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    bytes.copy_from_slice(&(nanos ^ std::process::id().rotate_left(16)).to_le_bytes());
    format!("{}_{}", host.trim(), hex::encode(bytes))
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let specs = file_guests(&args)?;
    let list = match (&args.guests_configmap, args.guests.is_empty()) {
        (Some(list), _) => Some(list.clone()),
        (None, true) => Some(watch::DEFAULT_LIST.to_string()),
        (None, false) => None,
    };
    let list = list
        .map(|list| {
            watch::parse_list_ref(&list).with_context(|| {
                format!("--guests-configmap takes <namespace>/<name>, got {list:?}")
            })
        })
        .transpose()?;
    let prod = &args.production;
    let metrics_addr = crate::server::parse_bind(&prod.metrics_bind_address)?;
    let probe_addr = crate::server::parse_bind(&prod.health_probe_bind_address)?;
    let webhook = webhook_config(prod)?;
    let lease_namespace = match (&prod.leader_elect_namespace, &list) {
        (Some(ns), _) => ns.clone(),
        (None, Some((ns, _))) => ns.clone(),
        (None, None) if prod.leader_elect => {
            bail!("--leader-elect without a guest list needs --leader-elect-namespace")
        }
        (None, None) => String::new(),
    };
    let guest_identity = match prod.guest_identity {
        IdentityMode::Host => crate::client::GuestIdentity::Host,
        IdentityMode::Impersonate if lease_namespace.is_empty() => bail!(
            "--guest-identity impersonate without a guest list needs --leader-elect-namespace (where the guests' ServiceAccounts are)"
        ),
        IdentityMode::Impersonate => crate::client::GuestIdentity::Impersonate {
            namespace: match &list {
                Some((ns, _)) => ns.clone(),
                None => lease_namespace.clone(),
            },
        },
    };
    if prod.leader_elect && prod.leader_elect_renew_deadline >= prod.leader_elect_lease_duration {
        bail!("--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration");
    }

    let config = config(args.kubeconfig.as_ref()).await?;
    let trimmer = tokio::spawn(crate::memory::trim_periodically());
    let metrics = Metrics::new();
    let protected = ProtectedObjects::new();
    let api_health = crate::client::ApiHealth::default();
    let (leadership, elector) = if prod.leader_elect {
        let client = crate::client::for_leader_election(&config, &metrics, &api_health)?;
        protected.set(
            "lease",
            [ProtectedRef::namespaced(
                "coordination.k8s.io",
                "Lease",
                &lease_namespace,
                &prod.leader_elect_lease_name,
            )],
        );
        let (leadership, elector) = crate::leader::start(
            client,
            LeaderConfig {
                lease_name: prod.leader_elect_lease_name.clone(),
                namespace: lease_namespace.clone(),
                identity: identity(),
                lease_duration: prod.leader_elect_lease_duration,
                renew_deadline: prod.leader_elect_renew_deadline,
                retry_period: prod.leader_elect_retry_period,
            },
            metrics.clone(),
        );
        (leadership, Some(elector))
    } else {
        (Leadership::always(), None)
    };
    let clients = Clients::new(config, metrics.clone(), leadership.clone(), api_health)?
        .with_guest_identity(guest_identity);
    let prober = clients.health().probe(clients.host());
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: args.cache_dir.clone(),
        instance_pool: args.instance_pool,
        metrics: metrics.clone(),
        // Compiling in a child process leaves Cranelift's code and memory
        // out of the host's, and bounds what one module's compile may use.
        compiler: match std::env::current_exe() {
            Ok(exe) => Compiler::Worker {
                exe,
                limits: CompileLimits {
                    cpu_seconds: args.compile_cpu_seconds,
                    memory_mib: args.compile_memory_mib,
                },
            },
            Err(e) => {
                tracing::warn!("compiling guests in this process: cannot find its executable: {e}");
                Compiler::InProcess
            }
        },
    })?;
    let health = Health::new();
    if let Some(addr) = metrics_addr {
        let mut registry = metrics.registry();
        registry.register_collector(Box::new(health.gauges()));
        let bound = crate::server::serve(addr, crate::server::metrics_router(registry)).await?;
        tracing::info!(%bound, "serving metrics on /metrics");
    }
    if let Some(addr) = probe_addr {
        let probes = crate::server::probes::Probes {
            health: health.clone(),
            leadership: leadership.clone(),
            requires_leader: prod.readyz_requires_leader,
            runtime: runtime.clone(),
        };
        let bound = crate::server::serve(addr, crate::server::probes::router(probes)).await?;
        tracing::info!(%bound, "serving probes on /healthz and /readyz");
    }
    let host_namespace = match &list {
        Some((ns, _)) => Some(ns.clone()),
        None => Some(lease_namespace.clone()),
    };
    let mut host =
        Host::new(clients.clone(), runtime, protected, health).with_host_namespace(host_namespace);
    if let Some((ns, name)) = &list {
        host = host.with_board(crate::rollout::Board::new(
            clients.host(),
            ns,
            name,
            leadership.clone(),
        ));
    }
    if let Some(config) = webhook {
        let webhooks = crate::webhook::Webhooks::start(
            config,
            clients.host(),
            leadership.clone(),
            metrics.clone(),
            host.protected().clone(),
        )
        .await?;
        host = host.with_webhooks(webhooks);
    }
    for spec in specs {
        let name = spec.name.clone();
        host.upsert(spec)
            .await
            .with_context(|| format!("loading guest {name:?}"))?;
    }
    tracing::info!(
        pid = std::process::id(),
        leader_elect = prod.leader_elect,
        "wasmop host running"
    );
    let shutdown = shutdown_signal();
    match list {
        Some((ns, name)) => {
            tracing::info!(list = %format!("{ns}/{name}"), "following the guest list");
            tokio::select! {
                () = watch::follow(clients.host(), &mut host, &ns, &name) => {}
                () = shutdown => {}
            }
        }
        None => shutdown.await,
    }
    // Graceful shutdown: no new reconciles, the running ones finish (within
    // the timeout), then the lease goes so a standby takes over at once.
    let deadline = std::time::Instant::now() + prod.graceful_shutdown_timeout;
    host.shutdown(prod.graceful_shutdown_timeout).await;
    if let Some(elector) = elector {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        elector
            .release(left.max(std::time::Duration::from_secs(1)))
            .await;
    }
    prober.abort();
    trimmer.abort();
    tracing::info!("wasmop host stopped");
    Ok(())
}

/// The webhooks' settings, or none when they are off.
fn webhook_config(prod: &ProductionArgs) -> anyhow::Result<Option<crate::webhook::Config>> {
    let Some(host) = &prod.webhook_host else {
        return Ok(None);
    };
    let Some(bind) = crate::server::parse_bind(&prod.webhook_bind_address)? else {
        return Ok(None);
    };
    let cert_secret = prod
        .webhook_cert_secret
        .as_deref()
        .map(|text| {
            text.split_once('/')
                .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
                .map(|(ns, name)| (ns.to_owned(), name.to_owned()))
                .with_context(|| {
                    format!("--webhook-cert-secret takes <namespace>/<name>, got {text:?}")
                })
        })
        .transpose()?;
    if prod.leader_elect && cert_secret.is_none() {
        bail!(
            "--leader-elect with --webhook-host needs --webhook-cert-secret: every replica would issue its own certificate, and the API server trusts one"
        );
    }
    Ok(Some(crate::webhook::Config {
        bind,
        host: host.clone(),
        cert_secret,
    }))
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
    tracing::info!("shutdown requested");
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

fn read_objects(path: &PathBuf) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {}", path.display()))?;
    let mut out = Vec::new();
    for doc in docs {
        match doc {
            Value::Null => {}
            // A `kind: List` (as `kubectl get -o yaml` prints) is flattened.
            Value::Object(ref m) if m.get("kind").and_then(Value::as_str) == Some("List") => {
                out.extend(
                    m.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            Value::Object(_) => out.push(doc),
            _ => bail!(
                "{}: every document must be a Kubernetes object",
                path.display()
            ),
        }
    }
    Ok(out)
}

fn render(args: &RenderArgs) -> anyhow::Result<()> {
    let settings = args.settings.as_deref().map(read_settings).transpose()?;
    let limits = Limits {
        outbound: outbound_hosts(&args.allow_outbound)?,
        ..args.limits.limits()
    };
    let guest = load_one(&args.guest, limits, settings, args.cache_dir.as_deref())?;
    if let Some(path) = &args.admission {
        let mut reviews = read_objects(path)?;
        if reviews.len() != 1 {
            bail!(
                "{}: expected exactly one AdmissionReview, found {}",
                path.display(),
                reviews.len()
            );
        }
        let admitted = crate::webhook::offline::admit(&guest, reviews.remove(0))
            .with_context(|| format!("admitting {}", path.display()))?;
        match args.output {
            Output::Json => println!("{}", serde_json::to_string_pretty(&admitted)?),
            Output::Yaml => print!("{}", serde_saphyr::to_string(&admitted)?),
        }
        return Ok(());
    }
    if let (Some(path), Some(to)) = (&args.convert, &args.to) {
        let objects = read_objects(path)?;
        let converted = crate::webhook::offline::convert(&guest, &objects, to)
            .with_context(|| format!("converting {}", path.display()))?;
        return match args.output {
            Output::Json => {
                println!("{}", serde_json::to_string_pretty(&converted)?);
                Ok(())
            }
            Output::Yaml => {
                for object in &converted {
                    print!("---\n{}", serde_saphyr::to_string(object)?);
                }
                Ok(())
            }
        };
    }
    let parent = args.parent.as_ref().context("--parent is required")?;
    let mut parents = read_objects(parent)?;
    if parents.len() != 1 {
        bail!(
            "{}: expected exactly one parent object, found {}",
            parent.display(),
            parents.len()
        );
    }
    let mut inputs = crate::render::Inputs {
        deleting: args.deleting,
        secret_values: args.secret_values,
        ..Default::default()
    };
    for path in &args.observed {
        inputs.observed.extend(read_objects(path)?);
    }
    for path in &args.related {
        inputs.related.extend(read_objects(path)?);
    }
    let rendered =
        crate::render::render(&guest, parents.remove(0), inputs).inspect_err(print_stack)?;
    for refused in &rendered.refused {
        eprintln!(
            "wasmop render: the host refused {refused} (allow a host with --allow-outbound <scheme://host[:port]>)"
        );
    }
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&rendered)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&rendered)?),
    }
    Ok(())
}

/// A trapping guest's own stack, innermost first, on stderr.
fn print_stack(error: &crate::render::Error) {
    if let crate::render::Error::Call { source, .. } = error {
        let frames = source.frames();
        if !frames.is_empty() {
            eprintln!("guest stack (innermost first):");
            for (i, frame) in frames.iter().enumerate() {
                eprintln!("  {i}: {frame}");
            }
        }
    }
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

fn configmap(args: &ConfigmapArgs) -> anyhow::Result<()> {
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

fn new(args: NewArgs) -> anyhow::Result<()> {
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

fn rbac(args: &RbacArgs) -> anyhow::Result<()> {
    let mut settings = std::collections::HashMap::new();
    for s in &args.settings {
        let (name, path) = name_and_value("--settings", s)?;
        settings.insert(name.to_owned(), read_settings(std::path::Path::new(path))?);
    }
    let mut guests = Vec::new();
    let mut used = std::collections::HashSet::new();
    for arg in &args.guests {
        // `<name>=<path>` names the guest as the guest list does; a bare
        // path is named by its file stem.
        let (name, path) = match arg.to_str().and_then(|a| a.split_once('=')) {
            Some((name, path)) => {
                check_guest_name(name).map_err(|why| anyhow::anyhow!("--guest {arg:?}: {why}"))?;
                (name.to_owned(), PathBuf::from(path))
            }
            None => (stem(arg), arg.clone()),
        };
        // The roles show what a module asks for, powerful kinds under a
        // comment; whether a guest may have them is the guest list's word.
        let limits = Limits {
            privileged: std::sync::Arc::new(crate::validate::description::PrivilegedKinds::Any),
            ..Limits::default()
        };
        let guest = load_one(&path, limits, settings.get(&name).cloned(), None)?;
        used.insert(name.clone());
        guests.push(crate::rbac::GuestRbac {
            name,
            description: guest.description().clone(),
            admits: guest.admits(),
            converts: guest.converts(),
        });
    }
    if let Some(name) = settings.keys().find(|name| !used.contains(*name)) {
        bail!("--settings {name}=…: no --guest is named {name}");
    }
    for secret in &args.pull_secrets {
        crate::validate::names::dns_subdomain(secret).map_err(|why| {
            anyhow::anyhow!("--pull-secret {secret:?} is not a Secret name: {why}")
        })?;
    }
    if let Some(secret) = &args.webhook_cert_secret {
        crate::validate::names::dns_subdomain(secret).map_err(|why| {
            anyhow::anyhow!(
                "--webhook-cert-secret {secret:?} is not a Secret name (the Role's namespace is --namespace): {why}"
            )
        })?;
    }
    let host = crate::rbac::HostObjects {
        namespace: &args.namespace,
        lease: &args.lease_name,
        list: &args.guest_list,
        pull_secrets: &args.pull_secrets,
        webhook_cert_secret: args.webhook_cert_secret.as_deref(),
    };
    let text = match args.guest_identity {
        IdentityMode::Host => crate::rbac::roles(&args.name, host, &guests)?,
        IdentityMode::Impersonate => crate::rbac::impersonating_roles(&args.name, host, &guests)?,
    };
    print!("{text}");
    Ok(())
}

async fn push(args: PushArgs) -> anyhow::Result<()> {
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

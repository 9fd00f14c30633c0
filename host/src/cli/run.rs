//! `wasmop run`: the host against a cluster. Its flags (`RunArgs`, the
//! production flags) become the app's [`Config`], checked, and the app
//! ([`crate::app`]) starts from it.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::ValueEnum;

use super::{LimitArgs, config, name_and_value, outbound_hosts, read_settings};
use crate::app::{App, Config};
use crate::host::{GuestSpec, Origin};
use crate::leader::LeaderConfig;
use crate::runtime::{CompileLimits, Limits, ModuleBytes, limits::parse_duration};
use crate::settings::ControllerSettings;
use crate::source::watch;
use crate::telemetry::logs::LogFormat;

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
    /// Run only modules signed by a trusted key: every guest-list entry
    /// needs `verify`, or the keys of --trusted-keys apply to it. A module
    /// without a valid signature is refused (`SignatureInvalid`) and the
    /// running version keeps running. Not with --guest, whose files carry
    /// no signature.
    #[arg(long)]
    pub require_signed_modules: bool,
    /// A PEM file of public keys (cosign.pub, one or more) the host trusts
    /// for every entry: an entry without `verify.keys` is checked with
    /// them, and an entry's own keys count only where they are among them.
    #[arg(long, value_name = "FILE")]
    pub trusted_keys: Option<PathBuf>,
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
    /// Elect, on Leases, which replica works on each guest (and each shard
    /// of one) and which does the host's own duties: one writer for each.
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
    /// `wasmop-guest-<guest>` in `--guest-namespace`; `wasmop rbac
    /// --guest-identity impersonate` prints its roles).
    #[arg(long, value_enum, default_value = "host")]
    pub guest_identity: IdentityMode,
    /// Where the guests' ServiceAccounts are under `--guest-identity
    /// impersonate`; default: the guest list's namespace, else the
    /// kubeconfig context's (in a cluster, the host's own).
    #[arg(long, value_name = "NAMESPACE")]
    pub guest_namespace: Option<String>,
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

pub(super) async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = app_config(&args).await?;
    App::start(config).await?.run().await;
    Ok(())
}

/// The app's configuration from the flags, checked before anything talks
/// to the cluster (the kubeconfig aside).
async fn app_config(args: &RunArgs) -> anyhow::Result<Config> {
    let guests = file_guests(args)?;
    let trust = trust(args)?;
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
    let metrics = crate::server::parse_bind(&prod.metrics_bind_address)?;
    let probes = crate::server::parse_bind(&prod.health_probe_bind_address)?;
    let webhooks = webhook_config(prod)?;
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
        // Where the guests' ServiceAccounts live: --guest-namespace, the
        // guest list's namespace, the leader election's, else (empty) the
        // kubeconfig context's.
        IdentityMode::Impersonate => crate::client::GuestIdentity::Impersonate {
            namespace: prod
                .guest_namespace
                .clone()
                .or_else(|| list.as_ref().map(|(ns, _)| ns.clone()))
                .unwrap_or_else(|| lease_namespace.clone()),
        },
    };
    if prod.leader_elect && prod.leader_elect_renew_deadline >= prod.leader_elect_lease_duration {
        bail!("--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration");
    }
    let election = prod.leader_elect.then(|| LeaderConfig {
        lease_name: prod.leader_elect_lease_name.clone(),
        namespace: lease_namespace.clone(),
        identity: identity(),
        lease_duration: prod.leader_elect_lease_duration,
        renew_deadline: prod.leader_elect_renew_deadline,
        retry_period: prod.leader_elect_retry_period,
        announce: true,
    });
    let host_namespace = Some(match &list {
        Some((ns, _)) => ns.clone(),
        None => lease_namespace,
    });
    Ok(Config {
        kube: config(args.kubeconfig.as_ref()).await?,
        guests,
        list,
        trust,
        metrics,
        probes,
        readyz_requires_leader: prod.readyz_requires_leader,
        webhooks,
        election,
        host_namespace,
        guest_identity,
        cache_dir: args.cache_dir.clone(),
        instance_pool: args.instance_pool,
        compile_limits: CompileLimits {
            cpu_seconds: args.compile_cpu_seconds,
            memory_mib: args.compile_memory_mib,
        },
        graceful_shutdown_timeout: prod.graceful_shutdown_timeout,
    })
}

/// What signatures the guest list's modules need.
fn trust(args: &RunArgs) -> anyhow::Result<crate::source::signature::Trust> {
    if args.require_signed_modules && !args.guests.is_empty() {
        bail!(
            "--require-signed-modules refuses --guest: a file given on the command line carries no signature (list it in the guest list with verify)"
        );
    }
    let keys = args
        .trusted_keys
        .as_deref()
        .map(crate::source::signature::Keys::read)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--trusted-keys: {e}"))?;
    Ok(crate::source::signature::Trust {
        require: args.require_signed_modules,
        keys,
    })
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

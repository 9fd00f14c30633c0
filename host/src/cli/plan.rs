//! `wasmop plan --guest <name>=<new.wasm> [--settings <name>=<file>]
//! [--namespace <ns>]… [--kubeconfig <path>] [-o text|json|yaml]`
//! (interface contract): see [`crate::plan`]. Exits 0 when nothing would
//! change, 2 when something would change or fail, 1 on an error of its own.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::{reflector, watcher};

use super::{Report, config, load_one, name_and_value, one_line, read_settings};
use crate::protected::{ProtectedObjects, ProtectedRef};
use crate::rollout::record::{records, status_name};
use crate::runtime::{Limits, ModuleBytes, Runtime, RuntimeConfig};
use crate::source::fetch::Sources;
use crate::source::list::{GuestEntry, GuestList, LIST_KEY, stable_entry};

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
    /// The host's `--guest-identity`: with `impersonate`, the plan's
    /// requests impersonate the guest's ServiceAccount as the host's would,
    /// so a write its roles forbid plans as a failure.
    #[arg(long, value_enum, default_value = "host")]
    pub guest_identity: super::IdentityMode,
    /// The host's `--guest-namespace` (default: the guest list's namespace).
    #[arg(long, value_name = "NAMESPACE")]
    pub guest_namespace: Option<String>,
}

/// Runs `wasmop plan`.
pub fn plan(args: PlanArgs) -> ExitCode {
    let result = tokio::runtime::Runtime::new()
        .context("starting the async runtime")
        .and_then(|rt| rt.block_on(run(args)));
    match result {
        Ok(plan) if plan.summary.change + plan.summary.fail == 0 => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(2),
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

async fn run(args: PlanArgs) -> anyhow::Result<crate::plan::Plan> {
    let (name, path) = name_and_value("--guest", &args.guest)?;
    let settings = match &args.settings {
        Some(s) => {
            let (for_guest, file) = name_and_value("--settings", s)?;
            anyhow::ensure!(
                for_guest == name,
                "--settings {for_guest}=…: the plan is for guest {name:?}"
            );
            Some(read_settings(std::path::Path::new(file))?)
        }
        None => None,
    };
    let (list_ns, list_name) = crate::source::watch::parse_list_ref(&args.guests_configmap)
        .with_context(|| {
            format!(
                "--guests-configmap takes <namespace>/<name>, got {:?}",
                args.guests_configmap
            )
        })?;
    let kubeconfig = config(args.kubeconfig.as_ref()).await?;
    let client = kube::Client::try_from(kubeconfig.clone())?;
    let entry = list_entry(&client, &list_ns, &list_name, name).await?;
    let (limits, entry_settings, controller) = match &entry {
        Some(entry) => (
            entry.limits().map_err(anyhow::Error::msg)?,
            entry.settings_json().map_err(anyhow::Error::msg)?,
            entry.controller().map_err(anyhow::Error::msg)?,
        ),
        None => (Limits::default(), None, Default::default()),
    };
    let secret_values = controller.secret_values;
    // The parents the host reconciles: the entry's namespaces by default.
    let namespaces = if args.namespaces.is_empty() {
        controller.namespaces
    } else {
        args.namespaces.clone()
    };
    let settings = settings.or(entry_settings);
    // The plan reaches nothing outside.
    let limits = Limits {
        outbound: std::sync::Arc::default(),
        ..limits
    };
    let path = std::path::PathBuf::from(path);
    let guest = {
        let (limits, settings, cache) = (limits.clone(), settings.clone(), args.cache_dir.clone());
        tokio::task::spawn_blocking(move || load_one(&path, limits, settings, cache.as_deref()))
            .await??
    };
    // The running version's kinds: its children of kinds the new version
    // no longer declares would be deleted.
    let running = match &entry {
        Some(entry) => {
            running_description(
                &client,
                (&list_ns, &list_name),
                entry,
                &guest,
                limits,
                settings,
                &args,
            )
                .await
                .unwrap_or_else(|e| {
                    eprintln!(
                        "wasmop plan: the running module's kinds are not known ({}); only the new module's kinds are looked at",
                        one_line(&e)
                    );
                    None
                })
        }
        None => None,
    };
    let protected = ProtectedObjects::new();
    protected.set(
        "guest-list",
        [
            ProtectedRef::config_map(&list_ns, &list_name),
            ProtectedRef::config_map(&list_ns, &crate::rollout::record::status_name(&list_name)),
        ],
    );
    // The guest's requests as the host would make them.
    let identity = match args.guest_identity {
        super::IdentityMode::Host => crate::client::GuestIdentity::Host,
        super::IdentityMode::Impersonate => crate::client::GuestIdentity::Impersonate {
            namespace: args
                .guest_namespace
                .clone()
                .unwrap_or_else(|| list_ns.clone()),
        },
    };
    let guest_client = crate::client::planning_client(&kubeconfig, name, &identity)?;
    let plan = crate::plan::plan(
        &guest_client,
        crate::plan::Inputs {
            host_namespace: Some(&list_ns),
            name,
            guest: &guest,
            running: running.as_ref(),
            namespaces: &namespaces,
            secret_values,
            protected: &protected,
        },
    )
    .await?;
    match args.output {
        Report::Text => print!("{}", plan.text()),
        Report::Json => println!("{}", serde_json::to_string_pretty(&plan)?),
        Report::Yaml => print!("{}", serde_saphyr::to_string(&plan)?),
    }
    Ok(plan)
}

/// The guest list's entry for `guest`, if the list exists and has one.
async fn list_entry(
    client: &kube::Client,
    namespace: &str,
    list: &str,
    guest: &str,
) -> anyhow::Result<Option<GuestEntry>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(cm) = api
        .get_opt(list)
        .await
        .with_context(|| format!("reading the guest list {namespace}/{list}"))?
    else {
        return Ok(None);
    };
    let Some(text) = cm.data.as_ref().and_then(|d| d.get(LIST_KEY)) else {
        return Ok(None);
    };
    let list = GuestList::parse(text)?;
    Ok(list.guests.into_iter().find(|g| g.name == guest))
}

/// What the module the list names for the guest describes, unless it is
/// the new module itself.
async fn running_description(
    client: &kube::Client,
    (namespace, list_name): (&str, &str),
    entry: &GuestEntry,
    new: &crate::runtime::Guest,
    limits: Limits,
    settings: Option<String>,
    args: &PlanArgs,
) -> anyhow::Result<Option<crate::model::Description>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let list = api.list(&Default::default()).await?.items;
    // During a rollout the running version is the record's stable one.
    let record = list
        .iter()
        .find(|cm| cm.metadata.name.as_deref() == Some(status_name(list_name).as_str()))
        .and_then(|cm| records(cm).remove(&entry.name));
    let (store, mut writer) = reflector::store();
    for cm in list {
        writer.apply_watcher_event(&watcher::Event::Apply(cm));
    }
    // The running version was checked by the host that runs it.
    let mut sources = Sources::new(store, namespace, client.clone(), None);
    let running = match record.filter(|r| r.stable_source.is_some()) {
        Some(record) => stable_entry(entry, &record).map_err(anyhow::Error::msg)?,
        None => entry.clone(),
    };
    let module: ModuleBytes = sources.fetch(&running).await?;
    if module.digest() == new.digest() {
        return Ok(None);
    }
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: args.cache_dir.clone(),
        ..RuntimeConfig::default()
    })?;
    let name = entry.name.clone();
    let (running, _) =
        tokio::task::spawn_blocking(move || runtime.load(&name, &module, limits, settings))
            .await??;
    Ok(Some(running.description().clone()))
}

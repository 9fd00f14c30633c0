//! `wasmop rbac`: the least-privilege roles for a set of guests.

use std::path::PathBuf;

use anyhow::bail;

use super::{IdentityMode, load_one, name_and_value, read_settings, stem};
use crate::runtime::Limits;
use crate::source::list::check_guest_name;

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
    /// ServiceAccount with its own roles and bindings, and the host's roles
    /// keep what it does itself and `impersonate` on exactly those
    /// ServiceAccounts.
    #[arg(long, value_enum, default_value = "host")]
    pub guest_identity: IdentityMode,
    /// The namespaces a guest's entry in the guest list confines it to, as
    /// `<name>=<namespace>[,<namespace>…]`; repeatable. Under
    /// `--guest-identity impersonate` such a guest gets a Role and a
    /// RoleBinding in each of them, so that the API server, not only the
    /// host, keeps it there.
    #[arg(long = "namespaces", value_name = "NAME=NAMESPACES")]
    pub namespaces: Vec<String>,
    /// The host's own ServiceAccount (in `--namespace`), bound to its roles.
    #[arg(long, default_value = "wasmop")]
    pub service_account: String,
}

pub(super) fn rbac(args: &RbacArgs) -> anyhow::Result<()> {
    let mut settings = std::collections::HashMap::new();
    for s in &args.settings {
        let (name, path) = name_and_value("--settings", s)?;
        settings.insert(name.to_owned(), read_settings(std::path::Path::new(path))?);
    }
    let mut confined: std::collections::HashMap<String, Vec<String>> =
        std::collections::HashMap::new();
    for n in &args.namespaces {
        let (name, list) = name_and_value("--namespaces", n)?;
        for namespace in list.split(',').map(str::trim).filter(|ns| !ns.is_empty()) {
            crate::validate::names::dns_label(namespace).map_err(|why| {
                anyhow::anyhow!(
                    "--namespaces {name}={list}: {namespace:?} is not a namespace name: {why}"
                )
            })?;
            confined
                .entry(name.to_owned())
                .or_default()
                .push(namespace.to_owned());
        }
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
            namespaces: confined.get(&name).cloned().unwrap_or_default(),
            name,
            description: guest.description().clone(),
            admits: guest.admits(),
            converts: guest.converts(),
            decorates: guest.decorates(),
        });
    }
    if let Some(name) = settings.keys().find(|name| !used.contains(*name)) {
        bail!("--settings {name}=…: no --guest is named {name}");
    }
    if let Some(name) = confined.keys().find(|name| !used.contains(*name)) {
        bail!("--namespaces {name}=…: no --guest is named {name}");
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
    crate::validate::names::dns_subdomain(&args.service_account).map_err(|why| {
        anyhow::anyhow!(
            "--service-account {:?} is not a ServiceAccount name: {why}",
            args.service_account
        )
    })?;
    let host = crate::rbac::HostObjects {
        account: &args.service_account,
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

//! The webhook configurations and CRD conversions of the served guests,
//! written while this process leads.
//!
//! Per guest whose module exports `admit`: a `MutatingWebhookConfiguration`
//! and a `ValidatingWebhookConfiguration` named `wasmop-<guest>`, for
//! create and update of its primary kind in the version it declares
//! (`matchPolicy: Equivalent`: a request in another version reaches the
//! guest converted), in the namespaces it watches, with `timeoutSeconds`
//! one second past its deadline and its `admissionFailurePolicy`. They go
//! when the guest goes or its module stops exporting `admit` (those this
//! process wrote: one left by a guest removed while no host ran stays).
//! Per guest
//! that exports `convert`: its CRD's `spec.conversion` set to `Webhook`
//! (left so when the guest goes: objects stored in one version stay
//! readable in the others only through it).
//!
//! Nothing is written when what is there already matches: each
//! configuration carries the hash of what the host wants
//! (`wasmop.dev/desired-hash`), and a CRD's conversion is compared field by
//! field.

use std::collections::BTreeSet;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wasmop_contract::names::{DESIRED_HASH_ANNOTATION, GUEST_LABEL};

use super::{Served, Webhooks};
use crate::leader::Leadership;

/// The field manager of everything written here.
const MANAGER: &str = "wasmop-webhooks";
/// How long a failed write waits before the next try.
const RETRY: Duration = Duration::from_secs(5);
/// How often everything is checked again, changes or not (a configuration
/// deleted by hand comes back).
const RESYNC: Duration = Duration::from_secs(300);

/// Writes the configurations whenever the served guests or leadership
/// change, retrying failures, until the process ends.
pub(super) async fn keep_written(webhooks: Webhooks, client: Client, leadership: Leadership) {
    let mut changed = webhooks.inner.changed.subscribe();
    let mut leading = leadership.subscribe();
    let mut written = BTreeSet::new();
    loop {
        let mut retry = false;
        if leadership.is_leader()
            && let Err(e) = sync(&webhooks, &client, &mut written).await
        {
            tracing::warn!("writing webhook configurations failed (retried in {RETRY:?}): {e:#}");
            retry = true;
        }
        let wait = tokio::time::sleep(if retry { RETRY } else { RESYNC });
        tokio::select! {
            r = changed.changed() => if r.is_err() { return },
            r = leading.changed() => if r.is_err() { return },
            () = wait => {}
        }
    }
}

/// One pass: every served guest's configurations as its module says,
/// those of guests no longer served (by this process) removed.
async fn sync(
    webhooks: &Webhooks,
    client: &Client,
    written: &mut BTreeSet<String>,
) -> anyhow::Result<()> {
    let served = webhooks.snapshot();
    let ca = base64::engine::general_purpose::STANDARD.encode(webhooks.ca_pem());
    // One guest's failure does not hold up the others: each is tried, and
    // the first error is reported (and the pass retried).
    let mut first_error: Option<anyhow::Error> = None;
    let mut note = |name: &str, result: anyhow::Result<()>| {
        if let Err(e) = result {
            let e = e.context(format!("guest {name:?}"));
            if first_error.is_none() {
                first_error = Some(e);
            } else {
                tracing::warn!("webhooks: {e:#}");
            }
        }
    };
    for (name, guest) in &served {
        let current = guest.slot.current();
        if current.admits() {
            let timeout = current.limits().timeout;
            let mut result = Ok(());
            for mutating in [true, false] {
                let desired = configuration(webhooks, name, guest, mutating, timeout, &ca);
                if let Err(e) = apply(client, &desired, mutating).await {
                    result = Err(e.into());
                    break;
                }
            }
            if result.is_ok() {
                written.insert(name.clone());
            }
            note(name, result);
        } else if written.contains(name) {
            let result = remove(client, name).await;
            if result.is_ok() {
                written.remove(name);
            }
            note(name, result.map_err(Into::into));
        }
        if current.converts() {
            let url = webhooks.url(&format!("/convert/{name}"));
            note(
                name,
                set_conversion(client, &guest.primary, &url, &ca).await,
            );
        }
    }
    let gone: Vec<String> = written
        .iter()
        .filter(|n| !served.contains_key(*n))
        .cloned()
        .collect();
    for name in gone {
        let result = remove(client, &name).await;
        if result.is_ok() {
            written.remove(&name);
        }
        note(&name, result.map_err(Into::into));
    }
    first_error.map_or(Ok(()), Err)
}

/// The configuration object for guest `name`.
fn configuration(
    webhooks: &Webhooks,
    name: &str,
    guest: &Served,
    mutating: bool,
    timeout: Duration,
    ca: &str,
) -> Value {
    let (kind, verb) = if mutating {
        ("MutatingWebhookConfiguration", "mutate")
    } else {
        ("ValidatingWebhookConfiguration", "validate")
    };
    let mut webhook = json!({
        "name": format!("{verb}.{name}.wasmop.dev"),
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": guest.failure_policy.as_str(),
        "matchPolicy": "Equivalent",
        "timeoutSeconds": timeout_seconds(timeout),
        "clientConfig": {"url": webhooks.url(&format!("/{verb}/{name}")), "caBundle": ca},
        "rules": [{
            "apiGroups": [guest.primary.group],
            "apiVersions": [guest.primary.version],
            "resources": [guest.primary.plural],
            "operations": ["CREATE", "UPDATE"],
            "scope": "*",
        }],
    });
    if mutating {
        webhook["reinvocationPolicy"] = json!("IfNeeded");
    }
    if !guest.namespaces.is_empty() {
        webhook["namespaceSelector"] = json!({"matchExpressions": [{
            "key": "kubernetes.io/metadata.name",
            "operator": "In",
            "values": guest.namespaces,
        }]});
    }
    let webhooks = json!([webhook]);
    let hash = hex::encode(Sha256::digest(webhooks.to_string().as_bytes()));
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {
            "name": config_name(name),
            "labels": {GUEST_LABEL: name, "app.kubernetes.io/managed-by": "wasmop"},
            "annotations": {DESIRED_HASH_ANNOTATION: hash},
        },
        "webhooks": webhooks,
    })
}

/// `timeoutSeconds`: one second past the guest's deadline, so the host
/// answers (per the failure policy) before the API server gives up; 1 to
/// 30, the range the API server accepts.
pub fn timeout_seconds(deadline: Duration) -> u64 {
    (deadline.as_secs_f64().ceil() as u64 + 1).clamp(1, 30)
}

/// `wasmop-<guest>`.
pub fn config_name(guest: &str) -> String {
    format!("wasmop-{guest}")
}

async fn apply(client: &Client, desired: &Value, mutating: bool) -> kube::Result<()> {
    if mutating {
        apply_to(
            Api::<MutatingWebhookConfiguration>::all(client.clone()),
            desired,
        )
        .await
    } else {
        apply_to(
            Api::<ValidatingWebhookConfiguration>::all(client.clone()),
            desired,
        )
        .await
    }
}

/// Applies `desired` with `api` unless the object there carries its hash.
async fn apply_to<K>(api: Api<K>, desired: &Value) -> kube::Result<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    let hash = desired["metadata"]["annotations"][DESIRED_HASH_ANNOTATION].as_str();
    let have = api.get_opt(name).await?;
    if have.is_some_and(|o| {
        o.annotations()
            .get(DESIRED_HASH_ANNOTATION)
            .map(String::as_str)
            == hash
    }) {
        return Ok(());
    }
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(desired),
    )
    .await?;
    tracing::info!(name, kind = %desired["kind"], "wrote webhook configuration");
    Ok(())
}

/// Deletes guest `name`'s configurations, if there are any.
async fn remove(client: &Client, name: &str) -> kube::Result<()> {
    let name = config_name(name);
    // 404: already gone; 403: not this host's to delete (`wasmop rbac`
    // grants delete only on the configurations of guests that admit).
    let gone = |r: kube::Result<_>| match r {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => Ok(false),
        Err(e) => Err(e),
    };
    let dp = DeleteParams::default();
    let m = gone(
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(&name, &dp)
            .await
            .map(|_| ()),
    )?;
    let v = gone(
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete(&name, &dp)
            .await
            .map(|_| ()),
    )?;
    if m || v {
        tracing::info!(%name, "deleted webhook configurations");
    }
    Ok(())
}

/// Sets the CRD of `primary` to convert through `url`, unless it does.
async fn set_conversion(
    client: &Client,
    primary: &kube::core::ApiResource,
    url: &str,
    ca: &str,
) -> anyhow::Result<()> {
    let name = format!("{}.{}", primary.plural, primary.group);
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let crd = api.get(&name).await?;
    let conversion = crd.spec.conversion.as_ref();
    let webhook = conversion.and_then(|c| c.webhook.as_ref());
    let config = webhook.and_then(|w| w.client_config.as_ref());
    let current = (
        conversion.map(|c| c.strategy.as_str()),
        config.and_then(|c| c.url.as_deref()),
        config
            .and_then(|c| c.ca_bundle.as_ref())
            .map(|b| base64::engine::general_purpose::STANDARD.encode(&b.0)),
        webhook.map(|w| w.conversion_review_versions.clone()),
    );
    if current
        == (
            Some("Webhook"),
            Some(url),
            Some(ca.to_owned()),
            Some(vec!["v1".to_owned()]),
        )
    {
        return Ok(());
    }
    let patch = json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": url, "caBundle": ca, "service": null},
    }}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    tracing::info!(crd = %name, %url, "set the CRD's conversion to the guest's webhook");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_servers_timeout_follows_the_deadline() {
        assert_eq!(timeout_seconds(Duration::from_millis(500)), 2);
        assert_eq!(timeout_seconds(Duration::from_secs(2)), 3);
        assert_eq!(timeout_seconds(Duration::from_secs(300)), 30);
        assert_eq!(timeout_seconds(Duration::ZERO), 1);
        assert_eq!(config_name("cache"), "wasmop-cache");
    }
}

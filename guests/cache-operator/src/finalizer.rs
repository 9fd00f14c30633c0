//! The deletion path: scale the Deployment to zero and wait for its pods to
//! go before letting the host remove the finalizer.
//!
//! The seeds' point about finalizers is that cleanup must be real and
//! finished before the finalizer goes. Here the cleanup is visible: Events on
//! the Cache, the Deployment scaling down, and the Cache staying in
//! Terminating until the last pod has stopped.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use wasmop_guest::{Event, ObjectRef, Request, Response, Result};

use crate::api::{Cache, CacheSettings};
use crate::children::Children;
use crate::flavor::Flavor;
use crate::observed::ObservedDeployment;
use crate::registry::{DEREGISTERED, Deregistration, Registry};

/// The finalizer the operator declares; the host adds it to every Cache.
pub const FINALIZER: &str = "apps.example.com/cache-cleanup";

/// How often to look again while pods are stopping: a backstop. The
/// Deployment is a watched child and its `status.replicas` changes as its
/// pods stop, each change waking the host, so the Cache is finalized when
/// the last pod goes, not at the next poll. A shorter poll only adds
/// reconciles while the control plane stops the pods (docs/benchmarks.md,
/// `scale`).
pub const POLL_SECONDS: u32 = 30;

/// The answer for a Cache with a deletionTimestamp: every observed child
/// kept as it is, except the Deployment, desired with zero replicas;
/// `finalized` once the Deployment reports no pods (or there is none) and
/// the Cache is out of its registry (`registryUrl`), if it was in one.
pub fn reconcile_deletion(
    request: &Request,
    cache: &Cache,
    flavor: Flavor,
    settings: &CacheSettings,
    now: &Time,
) -> Result<Response> {
    let answer = stop(request, cache, flavor)?;
    if !answer.finalized {
        return Ok(answer);
    }
    let Some(registry) = Registry::of(settings.registry_url.as_deref(), cache) else {
        return Ok(answer);
    };
    match registry.deregister(cache.status.as_ref(), now) {
        Deregistration::NotRegistered => Ok(answer),
        Deregistration::Removed(status) => answer
            .event(Event::normal(
                DEREGISTERED,
                format!("removed Cache {} from its registry", cache.name()),
            ))
            .status(&status),
        Deregistration::Blocked {
            status,
            event,
            retry_after,
        } => {
            let mut blocked = Response::new();
            blocked.keep_observed(request, |_| false);
            if let Some(event) = event {
                blocked = blocked.event(event);
            }
            blocked.requeue_after(retry_after).status(&status)
        }
    }
}

/// Scales the Deployment down and answers `finalized` once no pod is left.
fn stop(request: &Request, cache: &Cache, flavor: Flavor) -> Result<Response> {
    let name = cache.name();
    let is_deployment = |child: &ObjectRef| {
        child.api_version == "apps/v1" && child.kind == "Deployment" && child.name == name
    };
    let mut response = Response::new();
    response.keep_observed(request, is_deployment);

    let Some(deployment) = request.observed_named_as::<Deployment, ObservedDeployment>(name) else {
        return Ok(response.finalize().event(Event::normal(
            "CleanupComplete",
            format!("no Deployment {name} left; the Cache can go"),
        )));
    };
    let pods = deployment.pods();
    if pods == 0 {
        response.keep(ObjectRef::new("apps/v1", "Deployment", name));
        return Ok(response.finalize().event(Event::normal(
            "CleanupComplete",
            format!("all pods of Deployment {name} have stopped; the Cache can go"),
        )));
    }
    // A spec the operator cannot turn into a Deployment (it was made
    // invalid while paused, say): leave the Deployment to the garbage
    // collector rather than hold the Cache forever.
    if let Err(e) = cache.spec.validate() {
        response.keep(ObjectRef::new("apps/v1", "Deployment", name));
        return Ok(response.finalize().event(Event::warning(
            "CleanupSkipped",
            format!(
                "cannot scale Deployment {name} down ({}); the garbage collector removes it with the Cache",
                e.message
            ),
        )));
    }
    let password = crate::auth::password(request, &cache.spec);
    // The image the Deployment runs: after a rollback, not the spec's.
    let held = crate::upgrade::held_image(&cache.spec.image, cache.status.as_ref()).map(|image| {
        crate::api::CacheSpec {
            image: image.to_owned(),
            ..cache.spec.clone()
        }
    });
    let spec = held.as_ref().unwrap_or(&cache.spec);
    let mut stopped = Children::desired(name, spec, &password, flavor).deployment;
    if let Some(spec) = stopped.spec.as_mut() {
        spec.replicas = Some(0);
    }
    response.push_child(&stopped)?;
    let wanted = deployment.fingerprint().replicas.unwrap_or(0);
    let event = if wanted == 0 {
        Event::normal(
            "CleanupWaiting",
            format!("waiting for {pods} pod(s) of Deployment {name} to stop"),
        )
    } else {
        Event::normal(
            "CleanupStarted",
            format!("scaling Deployment {name} from {wanted} to 0 replicas before deletion"),
        )
    };
    Ok(response.requeue_after(POLL_SECONDS).event(event))
}

//! The paused path: `spec.paused: true` leaves every child exactly as it is
//! and reports phase `Paused`.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use wasmop_guest::{Request, Response, Result};

use crate::api::{Cache, Phase};
use crate::observed::ObservedDeployment;
use crate::reconcile::phase_event;
use crate::status;

/// The answer for a paused Cache: every observed child kept as it is (the
/// host neither writes nor prunes it, and nothing of it becomes the
/// operator's) and the status with phase `Paused`.
pub fn reconcile_paused(request: &Request, cache: &Cache, now: &Time) -> Result<Response> {
    let mut response = Response::new();
    response.keep_observed(request, |_| false);
    let ready = request
        .observed_named_as::<Deployment, ObservedDeployment>(cache.name())
        .map_or(0, |d| d.ready_replicas());
    let previous = cache.status.as_ref();
    let new_status = status::status(
        previous,
        Phase::Paused,
        ready,
        cache.spec.replicas(),
        cache.metadata.generation,
        now,
    );
    if let Some(event) = phase_event(previous, Phase::Paused) {
        response = response.event(event);
    }
    response.status(&new_status)
}

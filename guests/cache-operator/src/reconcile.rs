//! One reconcile of a Cache: deletion, pause, or the desired children and
//! status, with an upgrade of `spec.image` followed and rolled back when it
//! fails (`crate::upgrade`).
//!
//! Everything here is a pure function of the request and `now`, and `now`
//! only reaches the output when a condition flips. A converged Cache thus
//! gets byte-identical children and status on every resync, and no events:
//! the host writes nothing.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use wasmop_guest::{Error, Event, Request, Response, Result};

use crate::api::{Cache, CacheSettings, CacheSpec, CacheStatus, Phase};
use crate::auth::{Password, password};
use crate::children::Children;
use crate::conversion::V1ALPHA1;
use crate::finalizer::reconcile_deletion;
use crate::flavor::Flavor;
use crate::observed::{Fingerprint, ObservedDeployment};
use crate::pause::reconcile_paused;
use crate::registry::Registry;
use crate::status;
use crate::upgrade::Upgrade;

/// Reconciles one Cache as the build `flavor`, at time `now`.
pub fn reconcile(request: &Request, now: &Time, flavor: Flavor) -> Result<Response> {
    let settings = CacheSettings::parse(request.settings()).map_err(Error::permanent)?;
    let mut cache: Cache = if settings.version() == V1ALPHA1 {
        request.parent_as()?
    } else {
        // The stored version, read in the shape the logic is written for.
        let parent = request.parent().clone();
        let group = parent["apiVersion"]
            .as_str()
            .and_then(|v| v.split_once('/'))
            .map_or("", |(group, _)| group)
            .to_owned();
        let alpha = crate::conversion::convert(parent, &format!("{group}/{V1ALPHA1}"))
            .map_err(Error::permanent)?;
        serde_json::from_value(alpha)
            .map_err(|e| Error::permanent(format!("cannot read the parent: {e}")))?
    };
    cache.spec = std::mem::take(&mut cache.spec).with_defaults(&settings);
    let name = cache.name();
    if name.is_empty() {
        return Err(Error::permanent("the Cache has no metadata.name"));
    }
    // Deletion first: a paused or invalid Cache must still be deletable.
    if request.deleting {
        return reconcile_deletion(request, &cache, flavor, &settings, now);
    }
    if cache.spec.paused {
        return reconcile_paused(request, &cache, now);
    }
    cache.spec.validate()?;
    if flavor.is_broken()
        && cache
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(crate::flavor::BREAK_LABEL))
    {
        return Err(Error::retryable(format!(
            "this build cannot reconcile a Cache labelled {}",
            crate::flavor::BREAK_LABEL
        )));
    }
    let password = password(request, &cache.spec);
    if let Password::Missing(message) = &password {
        return reconcile_secret_missing(request, &cache, message, now);
    }

    let observed = request.observed_named_as::<Deployment, ObservedDeployment>(name);
    let observed = observed.as_ref();
    let previous = cache.status.as_ref();
    let mut desired = Children::desired(name, &cache.spec, &password, flavor);
    let upgrade = Upgrade::decide(
        &cache.spec.image,
        previous,
        observed,
        &desired.fingerprint(&cache.spec),
    );
    // After a rollback the Deployment runs the last good image, not the
    // spec's: the spec is the user's and stays as it is.
    let held;
    let running = match upgrade.held_at() {
        Some(image) => {
            held = CacheSpec {
                image: image.to_owned(),
                ..cache.spec.clone()
            };
            desired = Children::desired(name, &held, &password, flavor);
            &held
        }
        None => &cache.spec,
    };
    let wanted = desired.fingerprint(running);
    let rollout = status::phase(observed, &wanted);
    let ready = observed.map_or(0, ObservedDeployment::ready_replicas);
    let mut new_status = status::status(
        previous,
        rollout,
        ready,
        cache.spec.replicas(),
        cache.metadata.generation,
        now,
    );
    let upgrade_event = upgrade.report(
        &mut new_status,
        &cache.spec.image,
        rollout,
        cache.metadata.generation,
        cache.spec.upgrade_timeout_seconds(),
        now,
    );
    let phase = upgrade.phase(rollout, ready, cache.spec.replicas());
    new_status.phase = Some(phase.as_str().to_owned());

    let mut response = Response::new();
    if phase == Phase::Ready
        && let Some(registry) = Registry::of(settings.registry_url.as_deref(), &cache)
    {
        let (event, retry) = registry.register(&mut new_status, now);
        if let Some(event) = event {
            response = response.event(event);
        }
        if let Some(seconds) = retry {
            response = response.requeue_after(seconds);
        }
    }
    for event in change_events(name, observed, &wanted)
        .into_iter()
        .chain(upgrade_event)
        .chain(phase_event(previous, phase))
    {
        wasmop_guest::info!("cache {name}: {}: {}", event.reason, event.message);
        response = response.event(event);
    }
    response.push_child(&desired.config_map)?;
    response.push_child(&desired.deployment)?;
    response.push_child(&desired.service)?;
    if let Some(budget) = &desired.disruption_budget {
        response.push_child(budget)?;
    }
    response.status(&new_status)
}

/// Events for what this reconcile changes in the Deployment: created,
/// scaled, new image, new config. Nothing when it already matches.
fn change_events(
    name: &str,
    observed: Option<&ObservedDeployment>,
    will: &Fingerprint<'_>,
) -> Vec<Event> {
    let Some(observed) = observed else {
        return vec![Event::normal(
            "Created",
            format!("creating Deployment {name}, Service {name} and ConfigMap {name}-config"),
        )];
    };
    let was = observed.fingerprint();
    let mut events = Vec::new();
    if was.replicas != will.replicas {
        events.push(Event::normal(
            "Scaled",
            format!(
                "scaling Deployment {name} from {} to {} replicas",
                was.replicas.unwrap_or(0),
                will.replicas.unwrap_or(0)
            ),
        ));
    }
    if was.image != will.image {
        events.push(Event::normal(
            "ImageChanged",
            format!(
                "updating Deployment {name} from image {} to {}",
                was.image.unwrap_or("(none)"),
                will.image.unwrap_or("(none)")
            ),
        ));
    }
    if was.config_hash != will.config_hash {
        events.push(Event::normal(
            "ConfigChanged",
            format!("the config changed; rolling the pods of Deployment {name}"),
        ));
    }
    if was.secret_hash != will.secret_hash {
        events.push(Event::normal(
            "SecretChanged",
            format!("the password Secret changed; rolling the pods of Deployment {name}"),
        ));
    }
    events
}

/// The answer while the Secret or key `spec.auth.secretRef` names is
/// missing: every observed child kept exactly as it is (no Deployment is
/// created or changed), phase `Pending` with `SecretMissing`, and a Warning
/// event when the Cache did not report it already. The host reconciles the
/// Cache again when the Secret appears.
fn reconcile_secret_missing(
    request: &Request,
    cache: &Cache,
    message: &str,
    now: &Time,
) -> Result<Response> {
    let mut response = Response::new();
    response.keep_observed(request, |_| false);
    let ready = request
        .observed_named_as::<Deployment, ObservedDeployment>(cache.name())
        .map_or(0, |d| d.ready_replicas());
    let previous = cache.status.as_ref();
    let new_status =
        status::secret_missing(previous, ready, cache.metadata.generation, message, now);
    if !status::reports_secret_missing(previous) {
        wasmop_guest::info!("cache {}: {message}", cache.name());
        response = response.event(Event::warning(status::SECRET_MISSING, message));
    }
    if let Some(event) = phase_event(previous, Phase::Pending) {
        response = response.event(event);
    }
    response.status(&new_status)
}

/// A `PhaseChanged` event when `phase` differs from the phase the parent
/// shows; nothing when it is the same.
pub(crate) fn phase_event(previous: Option<&CacheStatus>, phase: Phase) -> Option<Event> {
    let before = previous.and_then(|s| s.phase.as_deref());
    (before != Some(phase.as_str())).then(|| {
        Event::normal(
            "PhaseChanged",
            match before {
                Some(before) => format!("phase changed from {before} to {}", phase.as_str()),
                None => format!("phase is {}", phase.as_str()),
            },
        )
    })
}

#[cfg(test)]
mod tests;

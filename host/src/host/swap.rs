//! Loading a module version and putting it in place: a guest started, or
//! its stable version replaced at once (a hot swap), each loaded before the
//! running version is touched; versions no guest runs leave the in-memory
//! cache.

use super::kinds::crd_of;
use super::{Change, Error, GuestSpec, Host, ResumeSpec, Running};
use crate::controller::{GuestSlot, RunningController, discovery};
use crate::rollout::candidacy::{Resumption, check_same_kind, is_stable, resumption, union};
use crate::rollout::{Candidate, Resume, Rollout, Tracker};
use crate::runtime::{CacheOutcome, Guest, ModuleBytes};

impl Host {
    /// Loads `spec`'s module on a blocking thread.
    pub(super) async fn load(
        &self,
        spec: &GuestSpec,
        module: &ModuleBytes,
    ) -> Result<(Guest, CacheOutcome), Error> {
        let runtime = self.runtime.clone();
        let (name, module, limits, settings) = (
            spec.name.clone(),
            module.clone(),
            spec.limits.clone(),
            spec.settings.clone(),
        );
        Ok(
            tokio::task::spawn_blocking(move || runtime.load(&name, &module, limits, settings))
                .await??,
        )
    }

    /// Starts a guest that does not run yet: its module, or, when an
    /// earlier host left a rollout whose stable version is not the entry's
    /// module (and the entry rolls out progressively), that stable version
    /// with the entry's module as its candidate: resumed where the record
    /// says, kept rolled back if it was, or as a new rollout if the entry
    /// changed meanwhile.
    pub(super) async fn start(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        let resume = spec.resume.clone();
        let mut stable_module = None;
        let mut stable_settings = spec.settings.clone();
        let mut candidate_mode = None;
        let mut propose_after = false;
        if let Some(ResumeSpec {
            record,
            stable: Some(stable),
        }) = &resume
            && spec.rollout.is_progressive()
            && !is_stable(record, spec.module.digest(), spec.settings.as_deref())
        {
            stable_module = Some(stable.clone().map_err(|why| Error::StableUnavailable {
                digest: record.stable.clone(),
                why,
            })?);
            if record.candidate.is_some() {
                stable_settings = record.stable_settings.clone();
            }
            match resumption(record, spec.module.digest(), spec.settings.as_deref()) {
                Resumption::Candidate(mode) => candidate_mode = Some(mode),
                Resumption::RolledBack => {}
                Resumption::Propose => propose_after = true,
            }
        }
        let (guest, outcome) = self.load(&spec, &spec.module).await?;
        let resuming = candidate_mode.is_some();
        let (stable, candidate) = match &stable_module {
            Some(module) => {
                let stable_spec = GuestSpec {
                    settings: stable_settings,
                    ..spec.clone()
                };
                let (stable, _) = self.load(&stable_spec, module).await?;
                check_same_kind(stable.description(), guest.description())?;
                (stable, candidate_mode.map(|mode| (guest, mode)))
            }
            None => (guest, None),
        };
        self.check_kind_free(&spec.name, &stable)?;
        let watched = match &candidate {
            Some((candidate, _)) => union(stable.description(), candidate.description()),
            None => stable.description().clone(),
        };
        let client = self
            .clients
            .for_guest(&spec.name, spec.controller.api_budget)
            .map_err(Error::Client)?;
        let kinds = discovery::resolve(&client, &watched).await?;
        self.check_webhooks(&spec.name, &stable, &kinds)?;
        self.claim_kind(&spec, &kinds).await?;
        let slot = GuestSlot::new(stable);
        // The candidate is in place before the first reconcile.
        if let Some((candidate, mode)) = candidate {
            slot.set_candidate(Some(Candidate {
                guest: candidate,
                mode,
                tracker: std::sync::Arc::new(Tracker::new(spec.rollout.ready_condition.clone())),
            }));
        }
        let primary = kinds.primary.resource.clone();
        let converted_by_webhook = kinds.converted_by_webhook;
        let controller = RunningController::start(
            self.environment(client, &spec.name, &spec.controller)?,
            slot.clone(),
            kinds,
            &spec.controller,
        );
        let stable_source = match &resume {
            Some(ResumeSpec { record, .. }) if stable_module.is_some() => {
                record.stable_source.clone()
            }
            _ => spec.source.clone(),
        };
        let rollout = Rollout::start(
            self.rollout_parts(&spec.name, &slot, spec.origin, spec.controller.shards),
            spec.rollout.clone(),
            stable_source,
            resume.filter(|_| !propose_after).map(|r| Resume {
                record: r.record,
                candidate_source: spec.source.clone(),
            }),
        );
        rollout.set_parents(controller.parents());
        self.health.running(&spec.name, controller.synced());
        self.guests.insert(
            spec.name.clone(),
            Running {
                slot,
                primary,
                controller,
                watched,
                converted_by_webhook,
                limits: spec.limits.clone(),
                controller_settings: spec.controller.clone(),
                origin: spec.origin,
                rollout,
            },
        );
        self.evict_unused();
        self.publish(&spec.name);
        if propose_after {
            tracing::info!(guest = %spec.name, "started the stable version an earlier host left; the entry's module rolls out beside it");
            return self.propose(spec).await;
        }
        if resuming {
            tracing::info!(guest = %spec.name, "resumed the rollout an earlier host left");
            Ok(Change::Resumed(outcome))
        } else {
            tracing::info!(guest = %spec.name, digest = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), "started guest");
            Ok(Change::Started(outcome))
        }
    }

    /// Replaces the stable version at once (today's hot swap).
    pub(super) async fn replace(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        let (guest, outcome) = self.load(&spec, &spec.module).await?;
        self.check_kind_free(&spec.name, &guest)?;
        if let Some(running) = self.guests.get(&spec.name)
            && self.webhooks.is_none()
            && guest.converts()
            && running.converted_by_webhook
        {
            return Err(Error::WebhookNeeded {
                guest: spec.name.clone(),
                kind: guest.description().primary.to_string(),
            });
        }
        if let Some(running) = self.guests.get_mut(&spec.name)
            && running.watched == *guest.description()
            && running.controller_settings == spec.controller
        {
            // Same kinds, same settings: the watches stay, only the module
            // changes (the kinds were resolved when the watches started).
            let old = running
                .rollout
                .swap_stable(guest, spec.source.clone(), spec.rollout.clone());
            running.limits = spec.limits;
            running.controller.requeue_all();
            let name = spec.name.clone();
            self.publish(&name);
            tracing::info!(guest = %spec.name, from = %short(old.digest()), to = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), "swapped guest module");
            self.evict_unused();
            return Ok(Change::Swapped(outcome));
        }
        // New kinds to watch: resolved before anything stops, so that a kind
        // discovery refuses leaves the running version as it is.
        let client = self
            .clients
            .for_guest(&spec.name, spec.controller.api_budget)
            .map_err(Error::Client)?;
        let kinds = discovery::resolve(&client, guest.description()).await?;
        self.check_webhooks(&spec.name, &guest, &kinds)?;
        self.claim_kind(&spec, &kinds).await?;
        let old_crd = self.guests.get(&spec.name).map(|r| crd_of(&r.primary));
        // The kinds or namespaces changed: only this guest's watches restart,
        // gracefully (running reconciles finish on the old version).
        let env = self.environment(client, &spec.name, &spec.controller)?;
        let running = self.guests.get_mut(&spec.name).expect("a running guest");
        running
            .rollout
            .swap_stable(guest.clone(), spec.source.clone(), spec.rollout.clone());
        let controller =
            RunningController::start(env, running.slot.clone(), kinds.clone(), &spec.controller);
        let old = std::mem::replace(&mut running.controller, controller);
        drop(old.stop());
        running.primary = kinds.primary.resource.clone();
        if let Some(old) = old_crd.filter(|old| *old != crd_of(&running.primary)) {
            self.release_claim(&spec.name, old);
        }
        let running = self.guests.get_mut(&spec.name).expect("a running guest");
        running.converted_by_webhook = kinds.converted_by_webhook;
        running.watched = guest.description().clone();
        running.limits = spec.limits;
        let before = running.controller_settings.shards;
        let shards = spec.controller.shards;
        running.controller_settings = spec.controller;
        running.rollout.set_parents(running.controller.parents());
        self.health.running(&spec.name, running.controller.synced());
        self.follow_shards(&spec.name, before, shards);
        self.evict_unused();
        self.publish(&spec.name);
        tracing::info!(guest = %spec.name, to = %short(&outcome.digest), cache = ?outcome.hit, elapsed_us = micros(&outcome), watches_restarted = true, "swapped guest module");
        Ok(Change::Restarted(outcome))
    }

    /// Drops compiled versions no guest runs from the in-memory cache (the
    /// disk cache keeps them).
    pub(super) fn evict_unused(&self) {
        let in_use: Vec<String> = self
            .guests
            .values()
            .flat_map(|r| {
                std::iter::once(r.slot.current().digest().to_owned())
                    .chain(r.slot.candidate().map(|c| c.guest.digest().to_owned()))
            })
            .collect();
        let dropped = self
            .runtime
            .cache()
            .retain(|digest| in_use.iter().any(|d| d == digest));
        if dropped > 0 {
            tracing::debug!(dropped, "dropped compiled module versions no guest runs");
        }
    }
}

pub(super) fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

fn micros(outcome: &CacheOutcome) -> u64 {
    u64::try_from(outcome.elapsed.as_micros()).unwrap_or(u64::MAX)
}

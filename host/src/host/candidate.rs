//! A new module as a candidate beside the running version: proposed, its
//! limits and settings updated, its rollout driven where the guest is
//! reconciled. What decides candidacy is [`crate::rollout::candidacy`].

use super::{Change, Error, GuestSpec, Host, Origin};
use crate::controller::{GuestSlot, RunningController, discovery};
use crate::rollout::Parts;
use crate::rollout::candidacy::{check_same_kind, union};
use crate::runtime::Guest;

impl Host {
    /// Starts rolling out `spec`'s module beside the running version.
    pub(super) async fn propose(&mut self, spec: GuestSpec) -> Result<Change, Error> {
        let running = self.guests.get(&spec.name).expect("a running guest");
        if let Some(source) = spec.source.as_ref().filter(|s| {
            Some(*s) == running.rollout.stable_source().as_ref()
                && spec.module.digest() != running.slot.current().digest()
        }) {
            // A restarted host or a standby must fetch the stable version
            // again from where it came from: it must still be there.
            return Err(Error::StableNotPinned {
                location: source.to_string(),
            });
        }
        let (guest, outcome) = self.load(&spec, &spec.module).await?;
        let running = self.guests.get(&spec.name).expect("a running guest");
        check_same_kind(running.slot.current().description(), guest.description())?;
        let watched = union(&running.watched, guest.description());
        if watched != running.watched {
            // The candidate brings kinds of its own: the watches restart
            // with both versions' kinds, resolved before anything stops.
            let budget = running.controller_settings.api_budget;
            let client = self
                .clients
                .for_guest(&spec.name, budget)
                .map_err(Error::Client)?;
            let kinds = discovery::resolve(&client, &watched).await?;
            let settings = running.controller_settings.clone();
            // What the candidate adds must be watchable by the guest's
            // identity before the watches restart: a watch that fails
            // would hold up the stable version's reconciles.
            let new_children = kinds.children.iter().filter(|k| {
                !running
                    .watched
                    .children
                    .iter()
                    .any(|c| c.kind.same_resource(&k.kind))
            });
            let new_related = kinds
                .related
                .iter()
                .filter(|(_, r)| !running.watched.related.contains(r))
                .map(|(k, _)| k);
            discovery::check_watchable(
                &client,
                new_children.chain(new_related),
                &settings.namespaces,
            )
            .await?;
            let env = self.environment(client, &spec.name, &settings)?;
            let running = self.guests.get_mut(&spec.name).expect("a running guest");
            let controller = RunningController::start(
                env,
                running.slot.clone(),
                kinds,
                &running.controller_settings,
            );
            let old = std::mem::replace(&mut running.controller, controller);
            drop(old.stop());
            running.watched = watched;
            running.rollout.set_parents(running.controller.parents());
            self.health.running(&spec.name, running.controller.synced());
        }
        let running = self.guests.get(&spec.name).expect("a running guest");
        running
            .rollout
            .propose(guest, spec.source.clone(), spec.rollout.clone());
        self.evict_unused();
        Ok(Change::RolloutStarted(outcome))
    }

    /// The entry names the candidate, with other limits or controller
    /// settings: the candidate is loaded again under the new limits (the
    /// stable version keeps its own until the rollout ends), and new
    /// controller settings restart the watches.
    pub(super) async fn update_candidate(
        &mut self,
        spec: GuestSpec,
        candidate: &Guest,
    ) -> Result<Change, Error> {
        if candidate.limits() != &spec.limits {
            let (guest, _) = self.load(&spec, &spec.module).await?;
            let running = self.guests.get(&spec.name).expect("a running guest");
            running.rollout.reload_candidate(guest);
        }
        let running = self.guests.get(&spec.name).expect("a running guest");
        if running.controller_settings == spec.controller {
            return Ok(Change::Unchanged);
        }
        let client = self
            .clients
            .for_guest(&spec.name, spec.controller.api_budget)
            .map_err(Error::Client)?;
        let kinds = discovery::resolve(&client, &running.watched).await?;
        let env = self.environment(client, &spec.name, &spec.controller)?;
        let running = self.guests.get_mut(&spec.name).expect("a running guest");
        let controller =
            RunningController::start(env, running.slot.clone(), kinds, &spec.controller);
        let old = std::mem::replace(&mut running.controller, controller);
        drop(old.stop());
        let before = running.controller_settings.shards;
        let shards = spec.controller.shards;
        running.controller_settings = spec.controller;
        running.rollout.set_parents(running.controller.parents());
        self.health.running(&spec.name, running.controller.synced());
        self.follow_shards(&spec.name, before, shards);
        tracing::info!(guest = %spec.name, "controller settings changed during a rollout: the watches restarted");
        Ok(Change::Unchanged)
    }

    /// What a guest's rollout needs from the host.
    pub(super) fn rollout_parts(
        &self,
        name: &str,
        slot: &GuestSlot,
        origin: Origin,
        shards: u16,
    ) -> Parts {
        let webhooks = self.webhooks.clone();
        // Driven where the guest is reconciled: by the holder of its unit
        // (of shard 0 for a guest with several).
        let unit = self.units.hold(name, (shards > 1).then_some(0));
        let board = self.board.clone().filter(|_| origin == Origin::List);
        if let Some(board) = &board {
            board.lead(name, unit.leadership.clone());
        }
        Parts {
            leadership: unit.leadership.clone(),
            unit: Some(unit),
            guest: name.to_owned(),
            slot: slot.clone(),
            // Guests given with --guest are not the list's.
            board,
            telemetry: self.runtime.metrics().clone(),
            on_promote: Box::new(move || {
                if let Some(webhooks) = &webhooks {
                    webhooks.changed();
                }
            }),
        }
    }
}

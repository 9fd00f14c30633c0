//! The units of work a guest's controller runs under: one per shard, each
//! on a Lease of its own, spread over the replicas.

use super::{Error, Host};
use crate::controller::{Environment, UnitEnv};
use crate::settings::ControllerSettings;

impl Host {
    /// The environment a guest's controller runs in: its units of work
    /// (one per shard) registered for the balance.
    pub(super) fn environment(
        &self,
        client: kube::Client,
        guest: &str,
        settings: &ControllerSettings,
    ) -> Result<Environment, Error> {
        let budget = crate::client::Budget::new(settings.api_budget);
        let units = crate::controller::shards::Shard::all(settings.shards)
            .into_iter()
            .map(|shard| {
                let held = self.units.hold(guest, shard.map(|s| s.index));
                Ok(UnitEnv {
                    client: self
                        .clients
                        .for_guest_unit(guest, &budget, &held.leadership)?,
                    labeller: shard
                        .map(|_| {
                            self.clients.for_guest_doing(
                                guest,
                                &budget,
                                &held.leadership,
                                Some(crate::controller::shards::LABELLER),
                            )
                        })
                        .transpose()?,
                    leadership: held.leadership.clone(),
                    held: std::sync::Arc::new(held),
                })
            })
            .collect::<kube::Result<Vec<_>>>()
            .map_err(Error::Client)?;
        Ok(Environment {
            units,
            client,
            protected: self.protected.clone(),
            leadership: self.clients.leadership().clone(),
            api_health: self.clients.health().clone(),
            telemetry: self.runtime.metrics().clone(),
            host_namespace: self.host_namespace.clone(),
        })
    }

    /// Moves `name`'s rollout to the unit of shard 0 of `shards` shards
    /// when its shards changed from `before` (the unit's Lease is another).
    pub(super) fn follow_shards(&mut self, name: &str, before: u16, shards: u16) {
        if (before > 1) == (shards > 1) {
            return;
        }
        let unit = self.units.hold(name, (shards > 1).then_some(0));
        if let Some(running) = self.guests.get(name) {
            running
                .rollout
                .set_unit(unit.leadership.clone(), Some(unit));
        }
    }
}

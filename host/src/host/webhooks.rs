//! What the webhooks serve of each guest: its current version's admission
//! and conversion, from its slot.

use super::Host;
use crate::webhook::Served;

impl Host {
    /// Tells the webhooks what `name` now serves, or says why a guest's
    /// exports go unserved.
    pub(super) fn publish(&self, name: &str) {
        let Some(running) = self.guests.get(name) else {
            return;
        };
        let current = running.slot.current();
        match &self.webhooks {
            Some(webhooks) => webhooks.set(
                name,
                Served {
                    slot: running.slot.clone(),
                    primary: running.primary.clone(),
                    namespaces: running.controller_settings.namespaces.clone(),
                    failure_policy: running.controller_settings.admission_failure_policy,
                    permits: std::sync::Arc::new(tokio::sync::Semaphore::new(usize::from(
                        running.controller_settings.concurrency.max(1),
                    ))),
                },
            ),
            None if current.admits() || current.converts() => tracing::info!(
                guest = %name,
                admits = current.admits(),
                converts = current.converts(),
                "the guest's module has webhook exports, which are not served without --webhook-host"
            ),
            None => {}
        }
    }
}

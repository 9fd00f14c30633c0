//! What a guest's controller needs from the host besides the guest: the
//! client, the fence and the units of work its scopes run under.

use std::sync::Arc;

use kube::Client;

use super::discovery::ResolvedKinds;
use super::labeller::Relabeller;
use super::shards::Shard;
use crate::leader::Leadership;
use crate::protected::ProtectedObjects;
use crate::telemetry::Metrics as Telemetry;

/// What a controller needs from the host besides the guest.
#[derive(Clone)]
pub struct Environment {
    /// The client the guest's requests are made with.
    pub client: Client,
    /// The host's own objects.
    pub protected: ProtectedObjects,
    /// Whether this host may write (it reconciles only while it leads).
    pub leadership: Leadership,
    /// Whether the API server answers: every parent is queued again when it
    /// answers after an outage.
    pub api_health: crate::client::ApiHealth,
    /// The host's metrics.
    pub telemetry: Arc<Telemetry>,
    /// The namespace of the host's own objects: related kinds are never
    /// watched there, nor parents and children by a guest of every
    /// namespace.
    pub host_namespace: Option<String>,
    /// The guest's units of work, by shard (one for a guest of one shard):
    /// each scope of a shard reconciles while its unit's leadership says so,
    /// and writes through its client, fenced by it. Empty: the guest's
    /// `client` and `leadership` for every scope.
    pub units: Vec<UnitEnv>,
}

/// One unit of a guest's work as its scopes run it.
#[derive(Clone)]
pub struct UnitEnv {
    /// Whether this host may work on the unit.
    pub leadership: Leadership,
    /// The guest's client, its writes fenced by that leadership.
    pub client: Client,
    /// For a shard of a guest with several: the client that moves parents
    /// to their shards (the same, named apart in the audit log).
    pub labeller: Option<Client>,
    /// The unit's registration, kept while a scope runs.
    pub held: Arc<crate::leader::units::Held>,
}

impl Environment {
    /// The environment of the scopes of `shard`.
    pub(super) fn for_shard(&self, shard: Option<Shard>) -> Environment {
        let mut env = self.clone();
        if let Some(unit) = self.unit(shard) {
            env.leadership = unit.leadership.clone();
            env.client = unit.client.clone();
        }
        env
    }

    /// The unit of `shard` (the guest's only one for `None`).
    pub(super) fn unit(&self, shard: Option<Shard>) -> Option<&UnitEnv> {
        self.units.get(shard.map_or(0, |s| usize::from(s.index)))
    }

    /// What moves the parents of the guest to their shards, writing for
    /// `shard`'s unit.
    pub(super) fn relabeller(
        &self,
        shard: Shard,
        kinds: &ResolvedKinds,
        guest: &str,
    ) -> Relabeller {
        let unit = self.unit(Some(shard));
        Relabeller {
            client: unit
                .and_then(|u| u.labeller.clone())
                .or_else(|| unit.map(|u| u.client.clone()))
                .unwrap_or_else(|| self.client.clone()),
            kinds: kinds.clone(),
            guest: guest.to_owned(),
            count: shard.count,
        }
    }
}

/// The namespace a scope of `namespace` leaves out: the host's own, when
/// the scope is every namespace. A guest of every namespace does not act in
/// the host's: a parent there would have the guest write beside the host's
/// own ServiceAccount and Secrets. An entry that names it explicitly does.
pub(super) fn left_out(namespace: Option<&str>, env: &Environment) -> Option<String> {
    namespace
        .is_none()
        .then(|| env.host_namespace.clone())
        .flatten()
}

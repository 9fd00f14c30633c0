//! What each scope of a guest's controller reports about itself: the
//! objects it caches (`wasmop_cached_objects{guest,kind}`, summed over the
//! guest's scopes) and whether it reconciles its shard
//! (`wasmop_shard_held{guest,shard}`).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;

use crate::leader::Leadership;
use crate::telemetry::Metrics as Telemetry;
use crate::telemetry::metrics::{CachedLabels, ShardLabels};

/// How often a scope reports.
const PERIOD: Duration = Duration::from_secs(2);

/// One scope's share of its guest's gauges; dropping it takes the share
/// back.
pub(super) struct Report {
    /// The guest's gauge of each kind: the primary kind first, then each
    /// child kind.
    gauges: Vec<Gauge>,
    /// What this scope added to each.
    added: Vec<i64>,
    held: Gauge,
}

impl Report {
    /// The report of a scope of `guest` whose kinds are `kinds` (the primary
    /// kind first) and whose shard is `shard`.
    pub(super) fn new(
        telemetry: &Arc<Telemetry>,
        guest: &str,
        kinds: &[String],
        shard: u16,
    ) -> Self {
        let gauges = kinds
            .iter()
            .map(|kind| {
                telemetry
                    .cached_objects
                    .get_or_create(&CachedLabels {
                        guest: guest.to_owned(),
                        kind: kind.clone(),
                    })
                    .clone()
            })
            .collect::<Vec<_>>();
        let held = telemetry
            .shard_held
            .get_or_create(&ShardLabels {
                guest: guest.to_owned(),
                shard: shard.to_string(),
            })
            .clone();
        Self {
            added: vec![0; gauges.len()],
            gauges,
            held,
        }
    }

    /// Reports `counts` (one per kind, in the order given to [`Self::new`])
    /// and whether the scope reconciles now.
    pub(super) fn set(&mut self, counts: &[usize], held: bool) {
        for ((gauge, added), count) in self.gauges.iter().zip(&mut self.added).zip(counts) {
            let count = i64::try_from(*count).unwrap_or(i64::MAX);
            gauge.inc_by(count - *added);
            *added = count;
        }
        self.held.set(i64::from(held));
    }

    /// Reports what `counts` say every [`PERIOD`] and whether `leadership`
    /// lets the scope work whenever that changes, until the task is
    /// dropped.
    pub(super) async fn follow(mut self, counts: impl Fn() -> Vec<usize>, leadership: Leadership) {
        let mut changes = leadership.subscribe();
        loop {
            self.set(&counts(), leadership.may_start());
            tokio::select! {
                () = tokio::time::sleep(PERIOD) => {}
                changed = changes.changed() => if changed.is_err() {
                    tokio::time::sleep(PERIOD).await;
                },
            }
        }
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        for (gauge, added) in self.gauges.iter().zip(&self.added) {
            gauge.dec_by(*added);
        }
        self.held.set(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_add_up_and_a_dropped_scope_takes_its_share_back() {
        let telemetry = Telemetry::new();
        let kinds = ["Cache".to_owned(), "Deployment".to_owned()];
        let gauge = |kind: &str| {
            telemetry
                .cached_objects
                .get_or_create(&CachedLabels {
                    guest: "g".into(),
                    kind: kind.into(),
                })
                .get()
        };
        let mut a = Report::new(&telemetry, "g", &kinds, 0);
        let mut b = Report::new(&telemetry, "g", &kinds, 1);
        a.set(&[3, 6], true);
        b.set(&[2, 4], false);
        assert_eq!((gauge("Cache"), gauge("Deployment")), (5, 10));
        a.set(&[1, 2], true);
        assert_eq!((gauge("Cache"), gauge("Deployment")), (3, 6));
        drop(b);
        assert_eq!((gauge("Cache"), gauge("Deployment")), (1, 2));
        let held = |shard: &str| {
            telemetry
                .shard_held
                .get_or_create(&ShardLabels {
                    guest: "g".into(),
                    shard: shard.into(),
                })
                .get()
        };
        assert_eq!((held("0"), held("1")), (1, 0));
        drop(a);
        assert_eq!((gauge("Cache"), held("0")), (0, 0));
    }
}

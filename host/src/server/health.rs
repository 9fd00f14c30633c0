//! What `/healthz` and `/readyz` report.
//!
//! Healthy: the process runs and the epoch ticker, which enforces every
//! guest's deadline, still ticks. Ready: the guest list was read (when the
//! host follows one), every listed guest is loaded (a guest whose module
//! fails to load makes the host not ready), and every running guest's
//! caches have their first lists; with `--readyz-requires-leader`, only the
//! leader is ready.
//!
//! The same state is exported per listed guest (`HealthGauges`):
//! `wasmop_guest_running` (1 when a version of it runs) and
//! `wasmop_module_fetch_failing` (1 while its module cannot be fetched),
//! what the `WasmopGuestNotLoaded` and `WasmopModuleFetchFailing` alerts
//! of `deploy/monitoring/` watch.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

/// The shared health state. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Health {
    inner: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// `Some(read)` when the host follows a guest list.
    list: Option<bool>,
    guests: BTreeMap<String, Guest>,
}

#[derive(Debug, Default)]
struct Guest {
    /// Why the last load failed, if it did.
    failed: Option<String>,
    /// One flag per namespace scope of its controller: first lists done.
    synced: Vec<Arc<AtomicBool>>,
    running: bool,
    /// The last fetch of its module failed.
    fetch_failing: bool,
}

impl Health {
    /// An empty state: ready, since nothing is expected yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The host follows a guest list, not read yet.
    pub fn follow_list(&self) {
        self.inner.lock().expect("health lock").list = Some(false);
    }

    /// The guest list was read (and its entries tried).
    pub fn list_read(&self) {
        self.inner.lock().expect("health lock").list = Some(true);
    }

    /// Guest `name` runs, its controller's scopes reporting their caches in
    /// `synced`.
    pub fn running(&self, name: &str, synced: Vec<Arc<AtomicBool>>) {
        let mut state = self.inner.lock().expect("health lock");
        let guest = state.guests.entry(name.to_owned()).or_default();
        guest.running = true;
        guest.failed = None;
        guest.synced = synced;
    }

    /// Loading guest `name` failed (it may still run an older version).
    pub fn failed(&self, name: &str, why: String) {
        let why = crate::sink::cut(&why, crate::sink::LOG_MESSAGE_BYTES).into_owned();
        let mut state = self.inner.lock().expect("health lock");
        state.guests.entry(name.to_owned()).or_default().failed = Some(why);
    }

    /// Fetching the module of guest `name` failed (it may still run an
    /// older version).
    pub fn fetch_failed(&self, name: &str, why: String) {
        let why = crate::sink::cut(&why, crate::sink::LOG_MESSAGE_BYTES).into_owned();
        let mut state = self.inner.lock().expect("health lock");
        let guest = state.guests.entry(name.to_owned()).or_default();
        guest.failed = Some(why);
        guest.fetch_failing = true;
    }

    /// The module of guest `name` was fetched (a fetch failure before is
    /// over; loading it may still fail).
    pub fn fetched(&self, name: &str) {
        if let Some(guest) = self.inner.lock().expect("health lock").guests.get_mut(name) {
            guest.fetch_failing = false;
        }
    }

    /// A version of guest `name` loaded (a failure before is over).
    pub fn loaded(&self, name: &str) {
        if let Some(guest) = self.inner.lock().expect("health lock").guests.get_mut(name) {
            guest.failed = None;
        }
    }

    /// Guest `name` is no longer expected.
    pub fn removed(&self, name: &str) {
        self.inner.lock().expect("health lock").guests.remove(name);
    }

    /// Ready, or what is missing.
    pub fn ready(&self) -> Result<(), String> {
        let state = self.inner.lock().expect("health lock");
        if state.list == Some(false) {
            return Err("the guest list has not been read yet".into());
        }
        for (name, guest) in &state.guests {
            if let Some(why) = &guest.failed {
                return Err(format!("guest {name:?} did not load: {why}"));
            }
        }
        for (name, guest) in &state.guests {
            if !guest.running {
                return Err(format!("guest {name:?} is not running"));
            }
            if !guest.synced.iter().all(|s| s.load(Ordering::Acquire)) {
                return Err(format!("guest {name:?}: caches not synced yet"));
            }
        }
        Ok(())
    }

    /// The per-guest gauges, computed from this state on each scrape.
    pub fn gauges(&self) -> HealthGauges {
        HealthGauges(self.clone())
    }
}

/// `wasmop_guest_running{guest}` and `wasmop_module_fetch_failing{guest}`
/// for every guest the host was asked to run.
#[derive(Debug)]
pub struct HealthGauges(Health);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GuestLabels {
    guest: String,
}

impl Collector for HealthGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let running: Family<GuestLabels, Gauge> = Family::default();
        let fetch_failing: Family<GuestLabels, Gauge> = Family::default();
        for (name, guest) in &self.0.inner.lock().expect("health lock").guests {
            let labels = GuestLabels {
                guest: name.clone(),
            };
            running.get_or_create(&labels).set(i64::from(guest.running));
            fetch_failing
                .get_or_create(&labels)
                .set(i64::from(guest.fetch_failing));
        }
        running.encode(encoder.encode_descriptor(
            "wasmop_guest_running",
            "1 when a version of the listed guest runs, 0 when none does (its last load failed).",
            None,
            running.metric_type(),
        )?)?;
        fetch_failing.encode(encoder.encode_descriptor(
            "wasmop_module_fetch_failing",
            "1 while the last fetch of the listed guest's module failed.",
            None,
            fetch_failing.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_the_list_every_guest_loaded_and_its_caches_synced() {
        let health = Health::new();
        assert_eq!(health.ready(), Ok(()));
        health.follow_list();
        assert!(health.ready().is_err());
        health.list_read();
        let synced = Arc::new(AtomicBool::new(false));
        health.running("a", vec![synced.clone()]);
        assert!(health.ready().unwrap_err().contains("caches not synced"));
        synced.store(true, Ordering::Release);
        assert_eq!(health.ready(), Ok(()));
        health.failed("b", "not a component".into());
        assert!(health.ready().unwrap_err().contains("did not load"));
        health.removed("b");
        health.failed("a", "bad settings".into());
        assert!(
            health.ready().is_err(),
            "a failed update is not ready either"
        );
        health.loaded("a");
        assert_eq!(health.ready(), Ok(()));
    }

    #[test]
    fn the_gauges_say_which_listed_guests_run_and_whose_fetch_fails() {
        let health = Health::new();
        health.running("a", Vec::new());
        health.fetch_failed("b", "registry unreachable".into());
        health.fetch_failed("a", "registry unreachable".into());
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(health.gauges()));
        let text = |registry: &prometheus_client::registry::Registry| {
            let mut out = String::new();
            prometheus_client::encoding::prometheus_text::encode(&mut out, registry).unwrap();
            out
        };
        let scraped = text(&registry);
        for line in [
            "wasmop_guest_running{guest=\"a\"} 1",
            "wasmop_guest_running{guest=\"b\"} 0",
            "wasmop_module_fetch_failing{guest=\"a\"} 1",
            "wasmop_module_fetch_failing{guest=\"b\"} 1",
        ] {
            assert!(scraped.contains(line), "{line} missing in:\n{scraped}");
        }
        health.fetched("a");
        health.removed("b");
        let scraped = text(&registry);
        assert!(scraped.contains("wasmop_module_fetch_failing{guest=\"a\"} 0"));
        assert!(!scraped.contains("guest=\"b\""), "{scraped}");
    }
}

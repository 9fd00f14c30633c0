//! What `/healthz` and `/readyz` report.
//!
//! Healthy: the process runs and the epoch ticker, which enforces every
//! guest's deadline, still ticks. Ready: the guest list was read (when the
//! host follows one), every listed guest is loaded (a guest whose module
//! fails to load makes the host not ready), and every running guest's
//! caches have their first lists; with `--readyz-requires-leader`, only the
//! leader is ready.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
        let mut state = self.inner.lock().expect("health lock");
        state.guests.entry(name.to_owned()).or_default().failed = Some(why);
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
}

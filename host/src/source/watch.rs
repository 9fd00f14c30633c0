//! Keeping the running guests in step with the guest list ConfigMap.
//!
//! The host watches the ConfigMaps of the list's namespace (the list and
//! the module ConfigMaps it references live there) into a local store.
//! Whenever one of them changes, the list is read again from the store (no
//! API round trip) and every entry is brought up to date: new entries
//! start, removed ones stop, changed modules are fetched, verified,
//! compiled, described and swapped in. An entry whose input did not change
//! (the entry itself and its source's version: the module ConfigMap's
//! resourceVersion, the file's size and time, the pinned URL) is neither
//! fetched nor hashed again. A failure — broken YAML, missing key, digest
//! mismatch, not a component, a trapping describe, refused settings —
//! leaves the running version alone, is logged and is recorded as a Warning
//! Event on the list ConfigMap; the same failing input is not retried until
//! something changes. An `oci` entry is polled besides: every
//! `ociPollInterval` its tag is resolved again, and a new digest is fetched
//! and swapped in like any other change; an unreachable registry or a
//! missing tag keeps the running version and is recorded once
//! (`ModuleFetchFailed`) until it resolves again; an entry whose last
//! attempt failed is retried at each poll. Guests given with `--guest` are
//! never touched here.
//! The list, its module ConfigMaps and its pull Secrets are protected
//! objects: no guest may write them.

use std::collections::{HashMap, HashSet};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::api::Api;
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};

use super::fetch::Sources;
use super::list::{GuestEntry, GuestList, LIST_KEY, ModuleSource};
use crate::events::Events;
use crate::host::{Change, GuestSpec, Host, Origin, ResumeSpec};
use crate::model::EventType;
use crate::protected::ProtectedRef;
use crate::rollout::Record;
use wasmop_contract::Reason;

/// The default guest list (interface contract).
pub const DEFAULT_LIST: &str = "wasmop-system/wasmop-guests";

/// Parses `namespace/name`.
pub fn parse_list_ref(text: &str) -> Option<(String, String)> {
    let (ns, name) = text.split_once('/')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .then(|| (ns.to_string(), name.to_string()))
}

/// Follows the guest list until the watch ends (it does not end on its own).
pub async fn follow(
    client: Client,
    host: &mut Host,
    namespace: &str,
    name: &str,
    trust: super::signature::Trust,
) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let leadership = host.clients().leadership().clone();
    let events = Events::new(client.clone(), "guest-list").fenced_by(leadership.clone());
    let status = crate::rollout::record::status_name(name);
    host.protected()
        .set("guest-list", [ProtectedRef::config_map(namespace, name)]);
    host.protected().set(
        "rollout-status",
        [ProtectedRef::config_map(namespace, &status)],
    );
    host.health().follow_list();
    let (store, writer) = reflector::store();
    let mut syncer = Syncer {
        sources: Sources::new(store, namespace, client.clone(), Some(trust)),
        namespace: namespace.to_string(),
        name: name.to_string(),
        status,
        client: client.clone(),
        leadership,
        events,
        guest_events: HashMap::new(),
        attempted: HashMap::new(),
        last_list_error: None,
        referenced: Vec::new(),
        listed: None,
        next_poll: HashMap::new(),
        retry: HashSet::new(),
        poll_failing: HashSet::new(),
    };
    let mut stream = watcher(api, watcher::Config::default())
        .backoff(crate::retry::watch_backoff())
        .reflect(writer)
        .boxed();
    loop {
        let next_poll = syncer.next_poll.values().min().copied();
        let event = tokio::select! {
            event = stream.next() => event,
            () = sleep_until(next_poll) => {
                syncer.poll(host).await;
                continue;
            }
        };
        let Some(event) = event else { break };
        match event {
            // The store holds every ConfigMap of the namespace: bring the
            // guests in step with it (at start and after every re-list).
            Ok(watcher::Event::InitDone) => syncer.sync(host).await,
            Ok(watcher::Event::Apply(cm) | watcher::Event::Delete(cm))
                if cm.metadata.name.as_deref() == Some(syncer.status.as_str()) =>
            {
                syncer.status_changed(host);
            }
            Ok(watcher::Event::Apply(cm) | watcher::Event::Delete(cm))
                if syncer.is_relevant(&cm) =>
            {
                syncer.sync(host).await;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("watching the guest list failed, retrying: {e}"),
        }
    }
}

/// The Event a change of guest `name` is reported with, if any.
fn describe_change(host: &Host, name: &str, change: &Change) -> Option<(Reason, String)> {
    let short = |d: &str| d[..d.len().min(12)].to_owned();
    let stable = host
        .current(name)
        .map(|g| short(g.digest()))
        .unwrap_or_default();
    let record = host.record(name).unwrap_or_default();
    let candidate = record.candidate.as_deref().map(short).unwrap_or_default();
    let strategy = record.strategy.map_or("", |s| s.as_str());
    let (reason, verb, outcome) = match change {
        Change::Unchanged => return None,
        Change::RolloutCancelled => {
            return Some((
                Reason::RolloutCancelled,
                format!(
                    "guest {name:?}: rollout cancelled, the list names the running version sha256 {stable}… again"
                ),
            ));
        }
        Change::RolloutStarted(o) => {
            return Some((
                Reason::RolloutStarted,
                format!(
                    "guest {name:?}: rolling out module sha256 {candidate}… beside sha256 {stable}… ({strategy}; {})",
                    o.summary()
                ),
            ));
        }
        Change::Resumed(o) => {
            return Some((
                Reason::RolloutStarted,
                format!(
                    "guest {name:?}: resumed the rollout of sha256 {candidate}… beside sha256 {stable}… ({strategy}, {} at step {}; {})",
                    record.phase.as_str(),
                    record.step,
                    o.summary()
                ),
            ));
        }
        Change::Started(o) => (Reason::GuestStarted, "started", o),
        Change::Swapped(o) => (Reason::GuestSwapped, "swapped to a new module version", o),
        Change::Restarted(o) => (
            Reason::GuestSwapped,
            "swapped to a new module version with new kinds or settings (its watches restarted)",
            o,
        ),
    };
    Some((
        reason,
        format!(
            "guest {name:?} {verb} (sha256 {stable}…, {})",
            outcome.summary()
        ),
    ))
}

/// What a failed update of guest `name` adds to its message: that the
/// version it runs, if any, keeps running.
fn keeps(host: &Host, name: &str) -> &'static str {
    if host.current(name).is_some() {
        "; the previous version keeps running"
    } else {
        ""
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

struct Syncer {
    /// Every ConfigMap of the list's namespace as last seen by the watch,
    /// and the other module sources.
    sources: Sources,
    namespace: String,
    name: String,
    /// The rollout status ConfigMap beside the list.
    status: String,
    client: Client,
    leadership: crate::leader::Leadership,
    /// Events about the list itself.
    events: Events,
    /// Events about each guest's entry: one reporting instance per guest,
    /// so that two guests' failures with the same reason are two Events,
    /// not one folded series.
    guest_events: HashMap<String, Events>,
    /// Per guest: the input last attempted (the entry and its source's
    /// version) and, when it failed, why, so an unchanged input is neither
    /// fetched again nor, when it failed the same way, reported again (an
    /// `oci` entry that failed is tried at each poll: its signatures may
    /// change beside an unchanged digest).
    attempted: HashMap<String, (String, Option<String>)>,
    last_list_error: Option<String>,
    /// Module ConfigMaps the current list references.
    referenced: Vec<String>,
    /// The list last read, and the reference of its ConfigMap.
    listed: Option<(GuestList, ObjectReference)>,
    /// Per `oci` guest: when its reference is resolved again.
    next_poll: HashMap<String, tokio::time::Instant>,
    /// Guests whose failed input is tried again at the next sync.
    retry: HashSet<String>,
    /// `oci` guests whose reference did not resolve at the last poll.
    poll_failing: HashSet<String>,
}

impl Syncer {
    fn is_relevant(&self, cm: &ConfigMap) -> bool {
        let name = cm.metadata.name.as_deref().unwrap_or_default();
        name == self.name || self.referenced.iter().any(|r| r == name)
    }

    /// The rollout records in the status ConfigMap, as the watch last saw
    /// them.
    fn records(&self) -> std::collections::BTreeMap<String, Record> {
        let key = reflector::ObjectRef::new(&self.status).within(&self.namespace);
        self.sources
            .configmaps()
            .get(&key)
            .map(|cm| crate::rollout::record::records(&cm))
            .unwrap_or_default()
    }

    /// The status ConfigMap changed (the leader wrote it): the board learns
    /// what the cluster holds, and a standby follows the leader's rollouts.
    fn status_changed(&self, host: &Host) {
        let key = reflector::ObjectRef::new(&self.status).within(&self.namespace);
        let cm = self.sources.configmaps().get(&key);
        if let Some(board) = host.board() {
            board.observe(cm.as_deref());
        }
        host.follow_records(&self.records());
    }

    /// The stable module a rollout `record` left, fetched again from its
    /// recorded source and checked against its digest.
    async fn fetch_stable(
        &mut self,
        entry: &GuestEntry,
        record: &Record,
    ) -> Result<crate::runtime::ModuleBytes, String> {
        let stable = super::list::stable_entry(entry, record)?;
        self.sources.fetch(&stable).await.map_err(|e| e.to_string())
    }

    async fn sync(&mut self, host: &mut Host) {
        self.status_changed(host);
        let key = reflector::ObjectRef::new(&self.name).within(&self.namespace);
        let Some(list_cm) = self.sources.configmaps().get(&key) else {
            self.list_error(
                None,
                format!(
                    "guest list ConfigMap {}/{} does not exist yet",
                    self.namespace, self.name
                ),
            );
            return;
        };
        let text = list_cm.data.as_ref().and_then(|d| d.get(LIST_KEY)).cloned();
        let list = match text.as_deref().map(GuestList::parse) {
            Some(Ok(list)) => list,
            Some(Err(e)) => {
                self.list_error(
                    Some(&list_cm),
                    format!("{e}; running guests are kept as they are"),
                );
                return;
            }
            None => {
                self.list_error(
                    Some(&list_cm),
                    format!("key {LIST_KEY} is missing; running guests are kept as they are"),
                );
                return;
            }
        };
        self.last_list_error = None;
        // Module and signature-bundle ConfigMaps.
        self.referenced = list
            .guests
            .iter()
            .flat_map(|g| {
                let bundle = g.verify.as_ref().and_then(|v| v.bundle.as_ref());
                std::iter::once(&g.module).chain(bundle)
            })
            .filter_map(|source| match source {
                ModuleSource::ConfigMap { name, .. } => Some(name.clone()),
                _ => None,
            })
            .collect();
        // The list, its module and bundle ConfigMaps and its pull Secrets.
        let pull_secrets = list.guests.iter().filter_map(|g| g.pull_secret.as_deref());
        host.protected().set(
            "guest-list",
            std::iter::once(&self.name)
                .chain(&self.referenced)
                .map(|name| ProtectedRef::config_map(&self.namespace, name))
                .chain(
                    pull_secrets
                        .map(|name| ProtectedRef::namespaced("", "Secret", &self.namespace, name)),
                ),
        );
        let reference = list_cm.object_ref(&());
        let records = self.records();
        let listed: Vec<&str> = list.guests.iter().map(|g| g.name.as_str()).collect();
        if let Some(board) = host.board() {
            board.set_list(reference.clone());
            board.retain(&listed);
        }
        // Module ConfigMaps a rollout's stable version is fetched from again
        // are the list's too.
        let stable_sources: Vec<String> = list
            .guests
            .iter()
            .filter_map(|g| records.get(&g.name)?.stable_source.clone())
            .filter_map(|s| match serde_json::from_value(s) {
                Ok(ModuleSource::ConfigMap { name, .. }) => Some(name),
                _ => None,
            })
            .collect();
        if !stable_sources.is_empty() {
            self.referenced.extend(stable_sources.iter().cloned());
            host.protected().set(
                "rollout-stable",
                stable_sources
                    .iter()
                    .map(|name| ProtectedRef::config_map(&self.namespace, name)),
            );
        }

        // Each guest's share of the instance pool, reckoned with the whole
        // list whichever entry loads first.
        host.expect(
            list.guests.iter().filter_map(|entry| {
                Some((entry.name.as_str(), entry.controller().ok()?.concurrency))
            }),
        );
        for entry in &list.guests {
            self.schedule_poll(entry);
            let input = format!("{entry:?}|{}", self.sources.version(entry).await);
            let running = host.current(&entry.name).is_some();
            let retry = self.retry.remove(&entry.name);
            match self.attempted.get(&entry.name) {
                Some((i, Some(_))) if *i == input && !retry => continue,
                Some((i, None)) if *i == input && running => continue,
                _ => {}
            }
            let module = match self.sources.fetch(entry).await {
                Ok(m) => {
                    host.health().fetched(&entry.name);
                    m
                }
                Err(e) => {
                    host.health().fetch_failed(&entry.name, e.to_string());
                    self.fail(
                        &reference,
                        &entry.name,
                        input,
                        e.reason(),
                        format!("guest {:?}: {e}{}", entry.name, keeps(host, &entry.name)),
                    );
                    continue;
                }
            };
            let rollout = entry.rollout_settings().expect("checked by parse");
            // A guest this host does not run yet may have a rollout an
            // earlier host left: its stable version is fetched again.
            let resume = match records.get(&entry.name) {
                Some(record) if !running => {
                    let stable = if !rollout.is_progressive() {
                        None
                    } else if record.stable != module.digest() {
                        Some(self.fetch_stable(entry, record).await)
                    } else if record.candidate.is_some() {
                        // The same module with other settings.
                        Some(Ok(module.clone()))
                    } else {
                        None
                    };
                    Some(ResumeSpec {
                        record: record.clone(),
                        stable,
                    })
                }
                _ => None,
            };
            let spec = GuestSpec {
                name: entry.name.clone(),
                module,
                limits: entry.limits().expect("checked by parse"),
                controller: entry.controller().expect("checked by parse"),
                settings: entry.settings_json().expect("checked by parse"),
                origin: Origin::List,
                rollout,
                source: self.sources.pinned(entry),
                resume,
            };
            match host.upsert(spec).await {
                Ok(change) => {
                    let refused_before = self
                        .attempted
                        .get(&entry.name)
                        .is_some_and(|(_, failed)| failed.is_some());
                    if let Some((reason, message)) = describe_change(host, &entry.name, &change) {
                        self.guest_event(
                            &entry.name,
                            &reference,
                            EventType::Normal,
                            reason,
                            message,
                        );
                    } else if refused_before {
                        // The list names the running version again (a tag
                        // moved back, an entry reverted): the refusal is
                        // over, and `wasmop status` stops showing it.
                        let digest = host
                            .current(&entry.name)
                            .map(|g| g.digest()[..12].to_owned())
                            .unwrap_or_default();
                        self.guest_event(
                            &entry.name,
                            &reference,
                            EventType::Normal,
                            Reason::GuestRestored,
                            format!(
                                "guest {:?}: the list names the running version sha256 {digest}… again; the refused update is over",
                                entry.name
                            ),
                        );
                    }
                    if let (false, Some((asked, granted))) = (
                        matches!(change, Change::Unchanged),
                        host.clamped(&entry.name),
                    ) {
                        self.guest_event(
                            &entry.name,
                            &reference,
                            EventType::Warning,
                            Reason::GuestPoolShare,
                            format!(
                                "guest {:?} runs {granted} reconciles at once, not the {asked} its entry asks: its share of the instance pool beside the other guests' holds no more (raise --instance-pool)",
                                entry.name
                            ),
                        );
                    }
                    self.attempted.insert(entry.name.clone(), (input, None));
                }
                Err(e) => {
                    self.fail(
                        &reference,
                        &entry.name,
                        input,
                        e.reason(),
                        format!(
                            "guest {:?} not loaded: {e}{}",
                            entry.name,
                            keeps(host, &entry.name)
                        ),
                    );
                }
            }
        }
        for name in host.names_from(Origin::List) {
            if !listed.contains(&name.as_str()) && host.remove(&name) {
                self.attempted.remove(&name);
                self.guest_event(&name, &reference, EventType::Normal, Reason::GuestStopped, format!("guest {name:?} removed from the list and stopped; its objects are left untouched"));
            }
        }
        for name in self.attempted.keys() {
            if !listed.contains(&name.as_str()) {
                // A listed guest that never loaded is no longer expected.
                host.health().removed(name);
                host.unexpect(name);
            }
        }
        self.attempted
            .retain(|name, _| listed.contains(&name.as_str()));
        self.guest_events
            .retain(|name, _| listed.contains(&name.as_str()));
        self.sources.retain(&listed);
        let oci: Vec<&str> = list
            .guests
            .iter()
            .filter(|g| matches!(g.module, ModuleSource::Oci(_)))
            .map(|g| g.name.as_str())
            .collect();
        self.next_poll
            .retain(|name, _| oci.contains(&name.as_str()));
        self.poll_failing
            .retain(|name| oci.contains(&name.as_str()));
        self.listed = Some((list, reference));
        host.health().list_read();
    }

    /// Schedules the first poll of an `oci` entry.
    fn schedule_poll(&mut self, entry: &GuestEntry) {
        if let Ok(Some(oci)) = entry.oci() {
            self.next_poll
                .entry(entry.name.clone())
                .or_insert_with(|| tokio::time::Instant::now() + oci.poll_interval);
        }
    }

    /// Resolves every `oci` entry that is due again; syncs when one names a
    /// new manifest or its last attempt failed.
    async fn poll(&mut self, host: &mut Host) {
        let Some((list, reference)) = self.listed.clone() else {
            self.next_poll.clear();
            return;
        };
        let now = tokio::time::Instant::now();
        let mut changed = false;
        for entry in &list.guests {
            let Ok(Some(oci)) = entry.oci() else { continue };
            if self
                .next_poll
                .get(&entry.name)
                .is_some_and(|due| *due > now)
            {
                continue;
            }
            self.next_poll
                .insert(entry.name.clone(), now + oci.poll_interval);
            let failed = self
                .attempted
                .get(&entry.name)
                .is_some_and(|(_, failed)| failed.is_some());
            match self.sources.poll(entry).await {
                Ok(moved) => {
                    if self.poll_failing.remove(&entry.name) {
                        tracing::info!(guest = %entry.name, "oci {} resolves again", oci.reference);
                    }
                    if moved || failed {
                        self.retry.insert(entry.name.clone());
                        changed = true;
                    }
                }
                Err(e) => {
                    if failed || !self.poll_failing.insert(entry.name.clone()) {
                        continue;
                    }
                    let keeps = if host.current(&entry.name).is_some() {
                        "; the running version is kept"
                    } else {
                        ""
                    };
                    let message = format!("guest {:?}: {e}{keeps}", entry.name);
                    tracing::error!(guest = %entry.name, "{message}");
                    self.guest_event(
                        &entry.name,
                        &reference,
                        EventType::Warning,
                        e.reason(),
                        message,
                    );
                }
            }
        }
        if changed {
            self.sync(host).await;
        }
    }

    fn fail(
        &mut self,
        reference: &ObjectReference,
        guest: &str,
        input: String,
        reason: Reason,
        message: String,
    ) {
        if self
            .attempted
            .get(guest)
            .is_some_and(|(i, failed)| *i == input && failed.as_ref() == Some(&message))
        {
            return;
        }
        tracing::error!(
            guest,
            "{}",
            crate::sink::cut(&message, crate::sink::LOG_MESSAGE_BYTES)
        );
        self.guest_event(
            guest,
            reference,
            EventType::Warning,
            reason,
            message.clone(),
        );
        self.attempted
            .insert(guest.to_string(), (input, Some(message)));
    }

    fn list_error(&mut self, cm: Option<&ConfigMap>, message: String) {
        if self.last_list_error.as_deref() == Some(message.as_str()) {
            return;
        }
        tracing::error!(
            "{}",
            crate::sink::cut(&message, crate::sink::LOG_MESSAGE_BYTES)
        );
        if let Some(cm) = cm {
            self.event(
                &cm.object_ref(&()),
                EventType::Warning,
                Reason::InvalidGuestList,
                message.clone(),
            );
        }
        self.last_list_error = Some(message);
    }

    fn event(
        &self,
        reference: &ObjectReference,
        event_type: EventType,
        reason: Reason,
        message: String,
    ) {
        self.events
            .host(reference, event_type, reason, message, "LoadGuest");
    }

    fn guest_event(
        &mut self,
        guest: &str,
        reference: &ObjectReference,
        event_type: EventType,
        reason: Reason,
        message: String,
    ) {
        let (client, leadership) = (&self.client, &self.leadership);
        self.guest_events
            .entry(guest.to_owned())
            .or_insert_with(|| Events::new(client.clone(), guest).fenced_by(leadership.clone()))
            .host(reference, event_type, reason, message, "LoadGuest");
    }
}

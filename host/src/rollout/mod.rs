//! Rollouts of operator logic: a new module version of a guest beside the
//! running one, compared (shadow) or serving a growing share of the
//! parents (canary), promoted when every step held and rolled back by
//! itself when one failed.
//!
//! The pieces: the entry's `rollout` ([`settings`]); which parent is on
//! which side ([`side`]); the versions a reconcile is assigned to
//! ([`GuestSlot`]); what is seen of the candidate ([`tracker`]); the
//! comparison of two answers ([`compare`], over [`diff`]); the record in
//! the status ConfigMap beside the guest list, where a rollout lives
//! between hosts ([`record`]); and [`Rollout`], one per running guest,
//! which moves the rollout on. `wasmop plan` ([`plan`]) runs a new version
//! against the live cluster without writing anything.
//!
//! Only the leader moves a rollout on (steps, promotion, rollback) and
//! writes its record; every replica follows the record, so a standby that
//! takes over, or a restarted host, resumes at the same step with the same
//! parents on each side.

pub mod candidacy;
pub mod compare;
pub mod diff;

pub mod record;
pub mod settings;
pub mod side;
mod slot;
pub mod tracker;

use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmop_contract::Reason;

pub use record::{Board, Phase, Record};
pub use settings::{RolloutEntry, RolloutSettings, Strategy};
pub use slot::{Assignment, Candidate, GuestSlot, Mode};
pub use tracker::Tracker;

use crate::leader::Leadership;
use crate::model::EventType;
use crate::runtime::Guest;
use crate::telemetry::Metrics;
use crate::telemetry::metrics::{GuestInfoLabels, RolloutParentsLabels, RolloutPhaseLabels};

/// How often a rollout is looked at (steps, deadlines, counts) when
/// nothing wakes it sooner.
const TICK: Duration = Duration::from_millis(500);

/// The parents of a guest, as its controller caches them.
pub trait ParentSet: Send + Sync {
    /// The uid and position ([`side::position`]) of every cached parent.
    fn positions(&self) -> Vec<(String, u64)>;
    /// How many parents are cached.
    fn count(&self) -> usize;
    /// Queues at once, ahead of background work, every cached parent whose
    /// position is in `range`.
    fn requeue_at_once(&self, range: RangeInclusive<u64>);
    /// Queues every parent again, paced as background work.
    fn requeue_all(&self);
    /// Whether the parents were listed once (a step's share is taken of
    /// all of them).
    fn listed(&self) -> bool;
}

/// A guest without parents yet (before its controller starts).
struct NoParents;

impl ParentSet for NoParents {
    fn positions(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    fn count(&self) -> usize {
        0
    }
    fn requeue_at_once(&self, _: RangeInclusive<u64>) {}
    fn requeue_all(&self) {}
    fn listed(&self) -> bool {
        false
    }
}

/// What a rollout needs from the host.
pub struct Parts {
    /// The guest's name.
    pub guest: String,
    /// Its versions.
    pub slot: GuestSlot,
    /// Where records are written (none without a guest list).
    pub board: Option<Board>,
    /// The host's metrics.
    pub telemetry: Arc<Metrics>,
    /// Whether this host moves the rollout on: it holds the guest's unit
    /// of work (of shard 0), or leads, without units (at first; see
    /// [`Rollout::set_unit`]).
    pub leadership: Leadership,
    /// The guest's unit registration, kept while the rollout runs on it.
    pub unit: Option<crate::leader::units::Held>,
    /// Called after a promotion (the webhooks serve the new stable
    /// version's exports).
    pub on_promote: Box<dyn Fn() + Send + Sync>,
}

struct Shared {
    parts: Parts,
    /// The unit whose holder moves the rollout on, and its registration:
    /// the parts' at first, another when the guest's shards change.
    unit: Mutex<(Leadership, Option<crate::leader::units::Held>)>,
    /// Told when [`Shared::unit`] changes.
    unit_changed: tokio::sync::Notify,
    parents: Mutex<Arc<dyn ParentSet>>,
    state: Mutex<State>,
    wake: tokio::sync::Notify,
}

struct State {
    settings: RolloutSettings,
    record: Record,
    /// Where the stable version's module can be fetched again.
    stable_source: Option<Value>,
    /// Where the candidate's module comes from.
    candidate_source: Option<Value>,
    step_started: Instant,
    /// Versions shown in `wasmop_guest_info`: digest and contract.
    shown: Vec<(String, &'static str)>,
}

/// One guest's rollout state and the task that moves it on. Dropping it
/// stops the task.
pub struct Rollout {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Rollout {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where a rollout resumes: the record a host before this one left.
#[derive(Clone, Debug)]
pub struct Resume {
    /// The recorded state.
    pub record: Record,
    /// Where the candidate in the slot (the entry's module) comes from.
    pub candidate_source: Option<Value>,
}

impl Rollout {
    /// The rollout of a guest that runs `slot`'s stable version, fetched
    /// from `stable_source`, under `settings`; `record` is where an earlier
    /// host left it (a candidate already in the slot resumes there).
    pub fn start(
        parts: Parts,
        settings: RolloutSettings,
        stable_source: Option<Value>,
        resume: Option<Resume>,
    ) -> Self {
        let stable = parts.slot.current();
        let candidate = parts.slot.candidate();
        let candidate_source = resume.as_ref().and_then(|r| r.candidate_source.clone());
        let record = match (resume, &candidate) {
            (Some(resume), Some(_)) => resume.record,
            // Rolled back, promoted or stable before: kept as it was.
            (Some(resume), None)
                if resume.record.stable == stable.digest()
                    && (resume.record.candidate.is_none()
                        || resume.record.phase == Phase::Aborted) =>
            {
                resume.record
            }
            _ => Record::stable(stable.digest()),
        };
        if let Some(candidate) = &candidate {
            // Resumed after a restart or a takeover: what the parents on
            // the candidate showed before they moved is not known here, and
            // the step's failures so far count.
            candidate.tracker.assume_ready_up_to(record.cut());
            candidate.tracker.seed_failed(record.failed_reconciles);
        }
        let before = record.strategy;
        let mut parts = parts;
        let unit = Mutex::new((parts.leadership.clone(), parts.unit.take()));
        let shared = Arc::new(Shared {
            parts,
            unit,
            unit_changed: tokio::sync::Notify::new(),
            parents: Mutex::new(Arc::new(NoParents)),
            state: Mutex::new(State {
                settings,
                record,
                stable_source,
                candidate_source,
                step_started: Instant::now(),
                shown: Vec::new(),
            }),
            wake: tokio::sync::Notify::new(),
        });
        {
            let mut state = shared.state.lock().expect("rollout lock");
            // The entry's strategy may have changed while no host ran.
            shared.apply_strategy(&mut state, before);
            shared.publish(&mut state);
        }
        let task = tokio::spawn(run(shared.clone()));
        Self { shared, task }
    }

    /// The guest's controller caches these parents (a new controller
    /// started).
    pub fn set_parents(&self, parents: Arc<dyn ParentSet>) {
        *self.shared.parents.lock().expect("rollout lock") = parents;
    }

    /// The guest's unit of work (of shard 0) is another now, its shards
    /// having changed: its holder moves the rollout on and writes the
    /// guest's record, and the former unit's registration ends.
    pub fn set_unit(&self, leadership: Leadership, unit: Option<crate::leader::units::Held>) {
        let shared = &self.shared;
        if let Some(board) = &shared.parts.board {
            board.lead(&shared.parts.guest, leadership.clone());
        }
        *shared.unit.lock().expect("rollout lock") = (leadership, unit);
        shared.unit_changed.notify_one();
    }

    /// The current record.
    pub fn record(&self) -> Record {
        self.shared
            .state
            .lock()
            .expect("rollout lock")
            .record
            .clone()
    }

    /// Whether the version with module `digest` and `settings` was rolled
    /// back: it is not tried again until the entry changes.
    pub fn aborted(&self, digest: &str, settings: Option<&str>) -> bool {
        let state = self.shared.state.lock().expect("rollout lock");
        state.record.phase == Phase::Aborted
            && state.record.candidate.as_deref() == Some(digest)
            && state.record.candidate_settings == record::settings_hash(settings)
    }

    /// Whether a candidate was rolled back (and is remembered).
    pub fn has_aborted(&self) -> bool {
        self.shared.state.lock().expect("rollout lock").record.phase == Phase::Aborted
    }

    /// Where the stable version's module came from.
    pub fn stable_source(&self) -> Option<Value> {
        self.shared
            .state
            .lock()
            .expect("rollout lock")
            .stable_source
            .clone()
    }

    /// Replaces the stable version at once (an `Immediate` change, or a
    /// change of limits or settings of the stable version): the candidate,
    /// if any, is dropped and its parents reconciled by `guest`, fetched
    /// from `source`. Returns the stable version it replaced.
    pub fn swap_stable(
        &self,
        guest: Guest,
        source: Option<Value>,
        settings: RolloutSettings,
    ) -> Guest {
        let shared = &self.shared;
        let mut state = shared.state.lock().expect("rollout lock");
        let dropped = shared.parts.slot.set_candidate(None);
        let old = shared.parts.slot.swap(guest);
        if let Some(Mode::Canary { cut }) = dropped.map(|c| c.mode) {
            shared.parents().requeue_at_once(0..=cut);
        }
        state.settings = settings;
        state.stable_source = source;
        state.candidate_source = None;
        state.record = Record::stable(shared.parts.slot.current().digest());
        shared.publish(&mut state);
        old
    }

    /// The candidate is loaded again (with other limits): the same module,
    /// serving as before.
    pub fn reload_candidate(&self, guest: Guest) {
        let shared = &self.shared;
        let _state = shared.state.lock().expect("rollout lock");
        if let Some(candidate) = shared.parts.slot.candidate()
            && candidate.guest.digest() == guest.digest()
        {
            shared
                .parts
                .slot
                .set_candidate(Some(Candidate { guest, ..candidate }));
        }
    }

    /// The entry's rollout settings changed (same module): a switch of
    /// strategy takes effect at once.
    pub fn set_settings(&self, settings: RolloutSettings) {
        let shared = &self.shared;
        let mut state = shared.state.lock().expect("rollout lock");
        state.settings = settings;
        let before = state.record.strategy;
        if let Some(candidate) = shared.parts.slot.candidate() {
            candidate
                .tracker
                .set_ready_condition(state.settings.ready_condition.clone());
        }
        shared.apply_strategy(&mut state, before);
        shared.publish(&mut state);
    }

    /// Starts rolling out `candidate` (fetched from `source`), replacing
    /// any candidate before it.
    pub fn propose(&self, candidate: Guest, source: Option<Value>, settings: RolloutSettings) {
        let shared = &self.shared;
        let mut state = shared.state.lock().expect("rollout lock");
        state.settings = settings;
        state.candidate_source = source;
        let tracker = Arc::new(Tracker::new(state.settings.ready_condition.clone()));
        let old = shared.parts.slot.set_candidate(Some(Candidate {
            guest: candidate.clone(),
            mode: Mode::Waiting,
            tracker,
        }));
        // Parents the candidate before served go back, unless the new one
        // takes them at once.
        let old_cut = old.and_then(|c| match c.mode {
            Mode::Canary { cut } => Some(cut),
            Mode::Shadow | Mode::Waiting => None,
        });
        state.record = Record {
            candidate: Some(candidate.digest().to_owned()),
            candidate_settings: record::settings_hash(candidate.settings()),
            ..Record::stable(shared.parts.slot.current().digest())
        };
        shared.apply_strategy(&mut state, None);
        shared.publish(&mut state);
        if let Some(cut) = old_cut {
            shared.parents().requeue_at_once(0..=cut);
        }
        tracing::info!(guest = %shared.parts.guest, candidate = %short(candidate.digest()), strategy = state.settings.strategy.as_str(), "rollout started");
    }

    /// Drops the candidate: the entry names the stable version again.
    pub fn cancel(&self, reason: &str) {
        let shared = &self.shared;
        let mut state = shared.state.lock().expect("rollout lock");
        if let Some(candidate) = shared.parts.slot.set_candidate(None)
            && let Mode::Canary { cut } = candidate.mode
        {
            shared.parents().requeue_at_once(0..=cut);
        }
        state.candidate_source = None;
        state.record = Record {
            reason: Some(reason.to_owned()),
            ..Record::stable(shared.parts.slot.current().digest())
        };
        shared.publish(&mut state);
    }

    /// Follows a record the leader wrote (this host does not lead).
    pub fn follow(&self, record: &Record) {
        let shared = &self.shared;
        if shared.leadership().is_leader() {
            return;
        }
        let mut state = shared.state.lock().expect("rollout lock");
        let Some(candidate) = shared.parts.slot.candidate() else {
            return;
        };
        if record.candidate.as_deref() != Some(candidate.guest.digest()) {
            if record.phase == Phase::Promoted && record.stable == candidate.guest.digest() {
                shared.parts.slot.promote();
                state.stable_source = state.candidate_source.take();
                state.record = record.clone();
                shared.publish(&mut state);
                (shared.parts.on_promote)();
            }
            return;
        }
        match record.phase {
            Phase::Aborted => {
                shared.parts.slot.set_candidate(None);
                state.record = record.clone();
            }
            Phase::Progressing => {
                if let Some(cut) = record.cut() {
                    shared.parts.slot.set_mode(Mode::Canary { cut });
                }
                if record.step != state.record.step {
                    state.step_started = Instant::now();
                }
                state.record = record.clone();
            }
            Phase::Shadowing => {
                shared.parts.slot.set_mode(Mode::Shadow);
                state.record = record.clone();
            }
            Phase::Stable | Phase::Promoted => {}
        }
        shared.publish(&mut state);
    }

    /// Stops the rollout's task and forgets the guest's metrics and record.
    pub fn remove(self) {
        let shared = &self.shared;
        if let Some(board) = &shared.parts.board {
            board.remove(&shared.parts.guest);
        }
        let metrics = &shared.parts.telemetry;
        let shown = std::mem::take(&mut shared.state.lock().expect("rollout lock").shown);
        for (sha256, contract) in shown {
            metrics.guest_info.remove(&GuestInfoLabels {
                guest: shared.parts.guest.clone(),
                sha256,
                contract,
            });
        }
        for result in ["same", "different", "failed"] {
            metrics
                .shadow_reconciles
                .remove(&crate::telemetry::metrics::SwapLabels {
                    guest: shared.parts.guest.clone(),
                    result,
                });
        }
        metrics
            .shadow_skipped
            .remove(&crate::telemetry::metrics::GuestLabels {
                guest: shared.parts.guest.clone(),
            });
        for phase in Phase::ALL {
            metrics.rollout_phase.remove(&RolloutPhaseLabels {
                guest: shared.parts.guest.clone(),
                phase: phase.as_str(),
            });
        }
        for version in ["stable", "candidate"] {
            metrics.rollout_parents.remove(&RolloutParentsLabels {
                guest: shared.parts.guest.clone(),
                version,
            });
        }
    }
}

impl Shared {
    /// Whether this host moves the rollout on now.
    fn leadership(&self) -> Leadership {
        self.unit.lock().expect("rollout lock").0.clone()
    }

    fn parents(&self) -> Arc<dyn ParentSet> {
        self.parents.lock().expect("rollout lock").clone()
    }

    /// Brings the candidate's mode in line with the entry's strategy,
    /// `before` being the strategy the record was made under: a switch to
    /// Shadow moves every parent back to the stable version and shadows
    /// them all, to Canary starts at step 1, to Immediate promotes.
    fn apply_strategy(&self, state: &mut State, before: Option<Strategy>) {
        let Some(candidate) = self.parts.slot.candidate() else {
            return;
        };
        let now = state.settings.strategy;
        if before == Some(now) {
            return;
        }
        match now {
            Strategy::Immediate => {
                self.promote(state, "the entry's strategy is Immediate".into());
            }
            Strategy::Shadow => {
                self.parts.slot.set_mode(Mode::Shadow);
                if let Mode::Canary { cut } = candidate.mode {
                    self.parents().requeue_at_once(0..=cut);
                }
                candidate.tracker.reset();
                state.record.phase = Phase::Shadowing;
                state.record.step = 0;
                state.record.weight = 0;
                state.record.failed_reconciles = 0;
                state.record.parents_on_candidate = 0;
                state.record.set_cut(None);
                state.record.strategy = Some(Strategy::Shadow);
                state.record.reason = Some(
                    "shadowing: the candidate answers beside the stable version, nothing of it is applied"
                        .into(),
                );
                self.parents().requeue_all();
            }
            Strategy::Canary => self.begin_canary(state),
        }
    }

    /// Step 1 of a canary: the candidate serves nobody until the step
    /// starts.
    fn begin_canary(&self, state: &mut State) {
        if let Some(candidate) = self.parts.slot.candidate() {
            candidate.tracker.reset();
        }
        self.parts.slot.set_mode(Mode::Waiting);
        state.record.phase = Phase::Progressing;
        state.record.strategy = Some(Strategy::Canary);
        state.record.step = 0;
        state.record.set_cut(None);
        state.record.reason = Some("waiting for the parents to be listed".into());
        self.next_step(state);
        self.publish(state);
    }

    /// Moves to the next step: its share of the parents on the candidate,
    /// the new ones reconciled at once. Waits (for a later tick) until the
    /// parents are listed, so that a share is taken of all of them.
    fn next_step(&self, state: &mut State) {
        let Some(candidate) = self.parts.slot.candidate() else {
            return;
        };
        if !self.parents().listed() {
            return;
        }
        let index = state.record.step as usize;
        let Some(&weight) = state.settings.steps.get(index) else {
            return;
        };
        let floor = state.record.cut();
        let mut positions: Vec<u64> = self
            .parents()
            .positions()
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        let cut = side::cut(&mut positions, weight, floor);
        self.parts.slot.set_mode(Mode::Canary { cut });
        candidate.tracker.new_step();
        state.record.step += 1;
        state.record.weight = weight;
        state.record.set_cut(Some(cut));
        state.record.failed_reconciles = 0;
        state.record.reason = Some(format!(
            "step {} of {}: {weight}% of parents on the candidate",
            state.record.step,
            state.settings.steps.len()
        ));
        state.step_started = Instant::now();
        let from = floor.map_or(0, |f| f.saturating_add(1));
        if floor != Some(u64::MAX) {
            self.parents().requeue_at_once(from..=cut);
        }
        tracing::info!(guest = %self.parts.guest, step = state.record.step, weight, "rollout step");
        self.publish(state);
    }

    fn promote(&self, state: &mut State, why: String) {
        let Some(candidate) = self.parts.slot.candidate() else {
            return;
        };
        let cut = match candidate.mode {
            Mode::Canary { cut } => Some(cut),
            Mode::Shadow | Mode::Waiting => None,
        };
        self.parts.slot.promote();
        // Parents the candidate did not serve yet run it now.
        if cut != Some(u64::MAX) {
            self.parents().requeue_all();
        }
        let digest = candidate.guest.digest().to_owned();
        state.stable_source = state.candidate_source.take();
        state.record = Record {
            phase: Phase::Promoted,
            strategy: Some(state.settings.strategy),
            reason: Some(format!("promoted: {why}")),
            ..Record::stable(&digest)
        };
        let message = format!(
            "guest {:?}: module sha256 {}… promoted to stable ({why})",
            self.parts.guest,
            short(&digest)
        );
        tracing::info!(guest = %self.parts.guest, "{message}");
        self.announce(EventType::Normal, Reason::RolloutPromoted, message);
        self.publish(state);
        (self.parts.on_promote)();
    }

    fn abort(&self, state: &mut State, failure: &tracker::Failure) {
        let Some(candidate) = self.parts.slot.set_candidate(None) else {
            return;
        };
        if let Mode::Canary { cut } = candidate.mode {
            self.parents().requeue_at_once(0..=cut);
        }
        let step = state.record.step;
        state.record.phase = Phase::Aborted;
        state.record.reason = Some(format!(
            "step {step} failed: {}; first parent: {}",
            failure.reason, failure.parent
        ));
        state.record.set_cut(None);
        state.record.weight = 0;
        state.record.parents_on_candidate = 0;
        let message = format!(
            "guest {:?}: rollout of module sha256 {}… aborted at step {step}: {}; parent {}; every parent is back on the stable version sha256 {}…",
            self.parts.guest,
            short(candidate.guest.digest()),
            failure.reason,
            failure.parent,
            short(self.parts.slot.current().digest()),
        );
        tracing::warn!(guest = %self.parts.guest, "{message}");
        self.announce(EventType::Warning, Reason::RolloutAborted, message);
        self.publish(state);
    }

    fn announce(&self, kind: EventType, reason: Reason, message: String) {
        if let Some(board) = &self.parts.board {
            board.announce(&self.parts.guest, kind, reason, message);
        }
    }

    /// Writes the record (through the board) and the metrics.
    fn publish(&self, state: &mut State) {
        let guest = &self.parts.guest;
        state.record.stable_source = state.stable_source.clone();
        state.record.stable_settings = state
            .record
            .candidate
            .is_some()
            .then(|| self.parts.slot.current().settings().map(str::to_owned))
            .flatten();
        if let Some(board) = &self.parts.board {
            board.set(guest, state.record.clone());
        }
        let metrics = &self.parts.telemetry;
        for phase in Phase::ALL {
            metrics
                .rollout_phase
                .get_or_create(&RolloutPhaseLabels {
                    guest: guest.clone(),
                    phase: phase.as_str(),
                })
                .set(i64::from(phase == state.record.phase));
        }
        let version = |g: &Guest| (g.digest().to_owned(), g.contract().package());
        let mut shown = vec![version(&self.parts.slot.current())];
        shown.extend(self.parts.slot.candidate().map(|c| version(&c.guest)));
        for (sha256, contract) in state.shown.iter().filter(|d| !shown.contains(d)) {
            metrics.guest_info.remove(&GuestInfoLabels {
                guest: guest.clone(),
                sha256: sha256.clone(),
                contract,
            });
        }
        for (sha256, contract) in &shown {
            metrics
                .guest_info
                .get_or_create(&GuestInfoLabels {
                    guest: guest.clone(),
                    sha256: sha256.clone(),
                    contract,
                })
                .set(1);
        }
        state.shown = shown;
    }

    /// Counts the parents on each side; moves the rollout on when this
    /// host leads.
    fn tick(&self) {
        let leader = self.leadership().is_leader();
        let mut state = self.state.lock().expect("rollout lock");
        let candidate = self.parts.slot.candidate();
        let parents = self.parents();
        let (all, on_candidate) = match &candidate {
            Some(Candidate {
                mode: Mode::Canary { cut },
                tracker,
                ..
            }) => {
                let positions = parents.positions();
                let on: std::collections::HashSet<&str> = positions
                    .iter()
                    .filter(|(_, p)| p <= cut)
                    .map(|(uid, _)| uid.as_str())
                    .collect();
                // Parents gone or back on the stable version are no longer
                // watched.
                tracker.forget(|uid| !on.contains(uid));
                (positions.len(), on.len())
            }
            _ => (parents.count(), 0),
        };
        let metrics = &self.parts.telemetry;
        for (version, count) in [("stable", all - on_candidate), ("candidate", on_candidate)] {
            metrics
                .rollout_parents
                .get_or_create(&RolloutParentsLabels {
                    guest: self.parts.guest.clone(),
                    version,
                })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        let Some(candidate) = candidate else {
            return;
        };
        state.record.parents_on_candidate = on_candidate as u64;
        state.record.failed_reconciles = candidate.tracker.failed_reconciles();
        if leader && state.record.phase == Phase::Progressing {
            let deadline = state
                .settings
                .ready_condition
                .as_ref()
                .map(|_| state.settings.progress_deadline);
            if let Some(failure) = candidate
                .tracker
                .verdict(state.settings.max_failed_reconciles, deadline)
            {
                self.abort(&mut state, &failure);
                return;
            }
            if state.record.step == 0 {
                self.next_step(&mut state);
                return;
            }
            if state.step_started.elapsed() >= state.settings.step_duration {
                if (state.record.step as usize) < state.settings.steps.len() {
                    self.next_step(&mut state);
                } else {
                    let why = format!(
                        "every step held ({})",
                        state
                            .settings
                            .steps
                            .iter()
                            .map(|s| format!("{s}%"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    self.promote(&mut state, why);
                }
                return;
            }
        }
        self.publish(&mut state);
    }
}

/// The rollout's task: a tick every [`TICK`], at once when the candidate
/// reports a failure, and when this host becomes the leader (the parents'
/// readiness before they moved is then unknown to it).
async fn run(shared: Arc<Shared>) {
    let mut leading = shared.leadership().subscribe();
    loop {
        let tracker = shared.parts.slot.candidate().map(|c| c.tracker);
        tokio::select! {
            () = async {
                match &tracker {
                    Some(t) => t.changed(TICK).await,
                    None => tokio::time::sleep(TICK).await,
                }
            } => {}
            () = shared.wake.notified() => {}
            () = shared.unit_changed.notified() => {
                leading = shared.leadership().subscribe();
            }
            Ok(()) = leading.changed() => {
                if *leading.borrow_and_update()
                    && let Some(candidate) = shared.parts.slot.candidate()
                    && let Mode::Canary { cut } = candidate.mode
                {
                    candidate.tracker.assume_ready_up_to(Some(cut));
                }
            }
        }
        shared.tick();
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}

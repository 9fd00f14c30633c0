//! Events on the parent: what the guest asked for and what the host saw go
//! wrong, as events.k8s.io/v1 Events (`kubectl describe` shows them).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType as KubeEventType, Recorder, Reporter};

use crate::model::{EventType, GuestEvent};

/// The component name events are reported under.
pub const REPORTER: &str = "wasmop";

/// Publishes events for one guest.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// A recorder reporting as `wasmop`, instance `<guest>`.
    pub fn new(client: Client, guest: &str) -> Self {
        let reporter = Reporter {
            controller: REPORTER.into(),
            instance: Some(guest.to_string()),
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Records `event` on `parent`. Failing to record an event is logged,
    /// never fatal: the reconcile's real work matters more.
    pub async fn publish(&self, parent: &ObjectReference, event: &GuestEvent, action: &str) {
        let ev = Event {
            type_: match event.event_type {
                EventType::Normal => KubeEventType::Normal,
                EventType::Warning => KubeEventType::Warning,
            },
            reason: event.reason.clone(),
            note: Some(event.message.clone()),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, parent).await {
            tracing::warn!(reason = %event.reason, "could not record event: {e}");
        }
    }

    /// Records a host-side Warning.
    pub async fn warn(&self, parent: &ObjectReference, reason: &str, message: String) {
        let event = GuestEvent {
            event_type: EventType::Warning,
            reason: reason.to_string(),
            message,
        };
        self.publish(parent, &event, "Reconcile").await;
    }
}

//! One reconcile's answer: the WIT `reconcile-response` and
//! `reconcile-error`.

use serde::{Deserialize, Serialize};

/// The type of an event, as Kubernetes Events know it. The WIT `event-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(enum))]
#[repr(u8)]
pub enum EventType {
    /// Something expected happened.
    #[cfg_attr(feature = "wasmtime", component(name = "normal"))]
    Normal,
    /// Something a person should look at.
    #[cfg_attr(feature = "wasmtime", component(name = "warning"))]
    Warning,
}

/// An event the host records on the parent (events.k8s.io/v1). The WIT
/// `event`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct Event {
    /// Normal or Warning.
    #[serde(rename = "type")]
    #[cfg_attr(feature = "wasmtime", component(name = "event-type"))]
    pub event_type: EventType,
    /// A CamelCase reason, e.g. "ScaledUp": a letter, then letters and
    /// digits, at most 128 characters.
    pub reason: String,
    /// A human-readable message (the host keeps its first 1024 bytes).
    pub message: String,
}

impl Event {
    /// A Normal event.
    pub fn normal(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            event_type: EventType::Normal,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// A Warning event.
    pub fn warning(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            event_type: EventType::Warning,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// An observed object named by its identity. The WIT `object-ref`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct ObjectRef {
    /// `apiVersion`, e.g. "apps/v1".
    #[cfg_attr(feature = "wasmtime", component(name = "api-version"))]
    pub api_version: String,
    /// `kind`, e.g. "Deployment".
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
}

impl ObjectRef {
    /// A reference from its parts.
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.api_version, self.kind, self.name)
    }
}

/// One reconcile's answer. The WIT `reconcile-response`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct ReconcileResponse {
    /// The children that should exist, each a complete JSON object in text.
    pub children: Vec<String>,
    /// The desired `.status` of the parent as a JSON object in text, or none
    /// to leave it alone.
    pub status: Option<String>,
    /// Ask to be called again after this many seconds.
    #[cfg_attr(feature = "wasmtime", component(name = "requeue-after-seconds"))]
    pub requeue_after_seconds: Option<u32>,
    /// Deletion path only: cleanup is complete.
    pub finalized: bool,
    /// Events to record on the parent.
    pub events: Vec<Event>,
    /// Observed children to leave exactly as they are: neither written nor
    /// pruned.
    pub keep: Vec<ObjectRef>,
}

/// Whether a failed reconcile is worth retrying. The WIT `error-kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(enum))]
#[repr(u8)]
pub enum ErrorKind {
    /// A transient failure: the host retries with exponential backoff.
    #[cfg_attr(feature = "wasmtime", component(name = "retryable"))]
    Retryable,
    /// The input can never succeed as it is: the host reports it and waits
    /// for the parent or a child to change.
    #[cfg_attr(feature = "wasmtime", component(name = "permanent"))]
    Permanent,
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Retryable => "retryable",
            Self::Permanent => "permanent",
        })
    }
}

/// A reconcile failure reported by the guest: a value the host reports and,
/// when retryable, retries; not a trap. The WIT `reconcile-error`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "wasmtime",
    derive(
        wasmtime::component::ComponentType,
        wasmtime::component::Lift,
        wasmtime::component::Lower
    )
)]
#[cfg_attr(feature = "wasmtime", component(record))]
pub struct ReconcileError {
    /// Retryable or permanent.
    pub kind: ErrorKind,
    /// What went wrong, shown in the log, an Event and a condition.
    pub message: String,
}

impl ReconcileError {
    /// A transient failure the host should retry with backoff.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Retryable,
            message: message.into(),
        }
    }

    /// A failure that retrying cannot fix until the input changes.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Permanent,
            message: message.into(),
        }
    }

    /// Whether the host should retry.
    pub fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Retryable
    }
}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} error: {}", self.kind, self.message)
    }
}

impl std::error::Error for ReconcileError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialise_their_type_under_the_key_type() {
        let text = serde_json::to_string(&Event::warning("Boom", "it broke")).unwrap();
        assert_eq!(
            text,
            r#"{"type":"Warning","reason":"Boom","message":"it broke"}"#
        );
    }

    #[test]
    fn errors_say_whether_they_are_retryable() {
        assert!(ReconcileError::retryable("x").is_retryable());
        let permanent = ReconcileError::permanent("bad spec");
        assert!(!permanent.is_retryable());
        assert_eq!(permanent.to_string(), "permanent error: bad spec");
    }
}

//! The error a guest returns from a reconcile.

use std::fmt;

/// Whether a failed reconcile is worth retrying; mirrors the WIT `error-kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A transient failure: the host retries with exponential backoff.
    Retryable,
    /// The input can never succeed as it is (an invalid spec, say): the host
    /// reports it and waits for the parent or a child to change.
    Permanent,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Retryable => "retryable",
            Self::Permanent => "permanent",
        })
    }
}

/// A reconcile failure reported by the guest.
///
/// This is a value the host reports (log line, Event, condition) and, when
/// retryable, retries; it is not a trap. Guests should return it instead of
/// panicking: a panic is a trap, which the host treats as a bug.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} error: {message}")]
pub struct Error {
    /// Retryable or permanent.
    pub kind: ErrorKind,
    /// What went wrong, shown in the host's log, an Event and a condition.
    pub message: String,
}

impl Error {
    /// A transient failure the host should retry with backoff.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Retryable,
            message: message.into(),
        }
    }

    /// A failure that cannot succeed until the input changes.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Permanent,
            message: message.into(),
        }
    }

    /// True for [`ErrorKind::Retryable`].
    pub fn is_retryable(&self) -> bool {
        self.kind == ErrorKind::Retryable
    }
}

/// `Result` with the SDK's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_set_the_kind_and_the_message() {
        let retry = Error::retryable("try later");
        assert_eq!(retry.kind, ErrorKind::Retryable);
        assert!(retry.is_retryable());
        let never = Error::permanent("bad spec");
        assert_eq!(never.kind, ErrorKind::Permanent);
        assert!(!never.is_retryable());
        assert_eq!(never.message, "bad spec");
    }

    #[test]
    fn display_names_the_kind_and_the_message() {
        assert_eq!(
            Error::permanent("image is empty").to_string(),
            "permanent error: image is empty"
        );
    }
}

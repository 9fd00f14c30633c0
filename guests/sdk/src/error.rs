//! The error a guest returns from a reconcile: the WIT `reconcile-error`.
//!
//! A value the host reports (log line, Event, condition) and, when
//! retryable, retries; not a trap. Guests return it instead of panicking: a
//! panic is a trap, which the host treats as a bug.

pub use wasmop_contract::{ErrorKind, ReconcileError as Error};

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

//! Wall-clock time for conditions and status, to the second.
//!
//! Inside a guest the time comes from the host with each request
//! ([`Request::now`](crate::Request::now)): a guest has no clock of its own.
//! [`now`] reads the system clock for native tests and tools. Times are
//! truncated to whole seconds because that is what Kubernetes stores
//! (`metav1.Time` is RFC 3339 with second precision): a finer time would never
//! compare equal to what the API server returns and would cause a write on
//! every reconcile.

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// The system clock as a `metav1.Time`, to the second. Natively only: a
/// guest built for `wasm32-unknown-unknown` has no clock (calling this there
/// traps); use [`Request::now`](crate::Request::now) in reconcile logic.
pub fn now() -> Time {
    time_at(SystemTime::now())
}

/// Whole seconds since the Unix epoch (the WIT `now`) as a `metav1.Time`.
/// A time past year 9999 (a broken clock) becomes the epoch, as in
/// [`time_at`].
pub fn from_unix_seconds(seconds: u64) -> Time {
    let seconds = i64::try_from(seconds).unwrap_or(i64::MAX);
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// `at` as a `metav1.Time`, truncated to the second. Times before the Unix
/// epoch (a broken clock) become the epoch.
pub fn time_at(at: SystemTime) -> Time {
    from_unix_seconds(
        at.duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs()),
    )
}

/// `at` formatted as RFC 3339 in UTC to the second, e.g.
/// `2024-05-01T12:00:00Z`, the way Kubernetes writes times.
pub fn rfc3339(at: SystemTime) -> String {
    time_at(at).0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rfc3339_formats_utc_to_the_second() {
        let at = UNIX_EPOCH + Duration::from_millis(1_714_564_800_999);
        assert_eq!(rfc3339(at), "2024-05-01T12:00:00Z");
    }

    #[test]
    fn time_at_truncates_sub_second_parts() {
        let at = UNIX_EPOCH + Duration::from_millis(1_500);
        assert_eq!(time_at(at).0.as_second(), 1);
        assert_eq!(time_at(at).0.subsec_nanosecond(), 0);
    }

    #[test]
    fn time_serializes_like_kubernetes() {
        let at = time_at(UNIX_EPOCH + Duration::from_secs(1_714_564_800));
        assert_eq!(
            serde_json::to_string(&at).unwrap(),
            "\"2024-05-01T12:00:00Z\""
        );
    }

    #[test]
    fn unix_seconds_from_the_host_become_times() {
        assert_eq!(
            serde_json::to_string(&from_unix_seconds(1_714_564_800)).unwrap(),
            "\"2024-05-01T12:00:00Z\""
        );
        assert_eq!(from_unix_seconds(u64::MAX).0, Timestamp::UNIX_EPOCH);
    }

    #[test]
    fn times_before_the_epoch_become_the_epoch() {
        let at = UNIX_EPOCH - Duration::from_secs(10);
        assert_eq!(rfc3339(at), "1970-01-01T00:00:00Z");
    }
}

//! How the host's watches retry. A leaf: it imports no other module of the
//! host.

/// How a watch retries after an error: 250 ms doubling to 2 s, with jitter,
/// starting over after a minute without errors. client-go's reflector waits
/// up to 30 s; here a restarted API server is seen within ~4 s, and a
/// watch costs the API server one request per retry.
pub fn watch_backoff() -> impl kube::runtime::utils::Backoff {
    let builder = backon::ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(250))
        .with_max_delay(std::time::Duration::from_secs(2))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    kube::runtime::utils::ResetTimerBackoff::new(
        kube::runtime::watcher::ExponentialBackoff::from(builder),
        std::time::Duration::from_secs(60),
    )
}

//! Logging through the host, the only capability a guest imports.
//!
//! Inside wasm each line goes to the WIT `log` import and appears in the
//! host's log tagged with the guest's name. Natively (unit tests, the host's
//! native benchmark) lines are dropped unless the environment variable
//! `WASMOP_GUEST_LOG` is set, in which case they go to stderr: a benchmark
//! must not measure terminal output.
//!
//! The macros take `format!` arguments: `wasmop_guest::info!("scaled to {n}")`.

/// Severity of a log line; mirrors the WIT `level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected but handled.
    Warn,
    /// A failure.
    Error,
}

/// Writes one line to the host's log.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::export::bindings::wasmop::operator::log as wit;
        let level = match level {
            Level::Trace => wit::Level::Trace,
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Warn => wit::Level::Warn,
            Level::Error => wit::Level::Error,
        };
        wit::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::sync::OnceLock;
        static ENABLED: OnceLock<bool> = OnceLock::new();
        if *ENABLED.get_or_init(|| std::env::var_os("WASMOP_GUEST_LOG").is_some()) {
            eprintln!("[guest {level:?}] {message}");
        }
    }
}

/// Writes a trace line.
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Writes a debug line.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Writes an info line.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Writes a warning line.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Writes an error line.
pub fn error(message: &str) {
    log(Level::Error, message);
}

/// Logs a `format!` message at trace level.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Trace, &::std::format!($($arg)*)) };
}

/// Logs a `format!` message at debug level.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Debug, &::std::format!($($arg)*)) };
}

/// Logs a `format!` message at info level.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Info, &::std::format!($($arg)*)) };
}

/// Logs a `format!` message at warn level.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Warn, &::std::format!($($arg)*)) };
}

/// Logs a `format!` message at error level.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Error, &::std::format!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    #[test]
    fn logging_natively_does_not_panic() {
        super::info("plain");
        crate::warn!("formatted {}", 42);
        crate::error!("{}", "x");
        crate::debug!("d");
        crate::trace!("t");
    }
}

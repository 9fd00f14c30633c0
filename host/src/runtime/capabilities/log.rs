//! The WIT's `log` import: each line goes to the host log under the guest's
//! name (target `wasmop::guest`), at most [`MAX_LOG_LINES`] lines per call,
//! each cut to [`MAX_LOG_LINE`] bytes, so that a chatty guest cannot flood
//! the host's log. The last error line is kept: an SDK guest's panic message
//! goes there before the trap.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use crate::runtime::abi::v0_1::{Level, OperatorGuest, wasmop::operator::log};

/// Most log lines one call may write.
const MAX_LOG_LINES: usize = 200;

/// Longest line kept; a longer one is cut and marked with `…`.
const MAX_LOG_LINE: usize = 4 << 10;

/// What one call has logged.
pub(crate) struct LogState {
    guest: Arc<str>,
    lines: usize,
    /// The last line logged at error level.
    last_error: Option<String>,
}

impl LogState {
    pub(crate) fn new(guest: Arc<str>) -> Self {
        Self {
            guest,
            lines: 0,
            last_error: None,
        }
    }

    /// The last line the call logged at error level.
    pub(crate) fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    fn write(&mut self, level: Level, mut message: String) {
        self.lines += 1;
        if self.lines > MAX_LOG_LINES {
            if self.lines == MAX_LOG_LINES + 1 {
                tracing::warn!(guest = %self.guest, "guest log limit reached; dropping further lines of this call");
            }
            return;
        }
        if message.len() > MAX_LOG_LINE {
            message.truncate(message.floor_char_boundary(MAX_LOG_LINE));
            message.push('…');
        }
        if matches!(level, Level::Error) {
            self.last_error = Some(message.clone());
        }
        let guest = &*self.guest;
        match level {
            Level::Trace => tracing::trace!(target: "wasmop::guest", guest, "{message}"),
            Level::Debug => tracing::debug!(target: "wasmop::guest", guest, "{message}"),
            Level::Info => tracing::info!(target: "wasmop::guest", guest, "{message}"),
            Level::Warn => tracing::warn!(target: "wasmop::guest", guest, "{message}"),
            Level::Error => tracing::error!(target: "wasmop::guest", guest, "{message}"),
        }
    }
}

impl log::Host for LogState {
    fn log(&mut self, level: Level, message: String) {
        self.write(level, message);
    }
}

impl crate::runtime::abi::v0_1::wasmop::operator::types::Host for LogState {}

/// How a store's data reaches its call's [`LogState`].
pub(crate) trait LogView {
    /// The call's log state.
    fn log(&mut self) -> &mut LogState;
}

/// Adds the WIT's imports (`log` and its types) to `linker`.
pub(super) fn link<T: LogView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    OperatorGuest::add_to_linker::<_, HasSelf<LogState>>(linker, T::log)
}

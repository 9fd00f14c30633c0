//! A bounded window over which a test looks for a change it must not see.
//!
//! A test that proves nothing happened checks over the whole window, not
//! once after a fixed sleep: the loop body runs at once, every
//! [`Window::POLL`] while the window lasts, and once more at its end, so an
//! unwanted change fails the test the first time it can be seen.
//!
//! ```no_run
//! # async fn f(writes: impl Fn() -> usize) -> anyhow::Result<()> {
//! use std::time::Duration;
//! let mut window = wasmop_testenv::Window::new(Duration::from_secs(3));
//! while window.next().await {
//!     anyhow::ensure!(writes() == 0, "the host wrote");
//! }
//! # Ok(()) }
//! ```

use std::time::Duration;

use tokio::time::Instant;

/// A window of a given length; see the module's documentation.
#[derive(Debug)]
pub struct Window {
    deadline: Instant,
    state: State,
}

#[derive(Debug, PartialEq)]
enum State {
    Unopened,
    Open,
    Closed,
}

impl Window {
    /// How often the body runs while the window lasts.
    pub const POLL: Duration = Duration::from_millis(250);

    /// A window that lasts `length` from now.
    pub fn new(length: Duration) -> Self {
        Self {
            deadline: Instant::now() + length,
            state: State::Unopened,
        }
    }

    /// Whether to look again: `true` at once, then after each
    /// [`Self::POLL`] until the end of the window, and once at its end;
    /// `false` after that.
    pub async fn next(&mut self) -> bool {
        match self.state {
            State::Unopened => {
                self.state = State::Open;
                true
            }
            State::Closed => false,
            State::Open => {
                let now = Instant::now();
                if now >= self.deadline {
                    self.state = State::Closed;
                    return false;
                }
                tokio::time::sleep_until((now + Self::POLL).min(self.deadline)).await;
                if Instant::now() >= self.deadline {
                    self.state = State::Closed;
                }
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_window_looks_at_once_every_poll_and_at_its_end() {
        let start = Instant::now();
        let mut window = Window::new(Duration::from_millis(600));
        let mut looks = Vec::new();
        while window.next().await {
            looks.push(start.elapsed());
        }
        assert_eq!(looks.len(), 4, "{looks:?}");
        assert!(looks[0] < Window::POLL, "{looks:?}");
        assert!(looks[3] >= Duration::from_millis(600), "{looks:?}");
        assert!(!window.next().await);
    }
}

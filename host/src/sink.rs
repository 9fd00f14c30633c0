//! Text a guest influences, made fit for the sink it lands in: bounded by
//! that sink's limit, and one line where a line is the unit.
//!
//! A guest chooses its error messages, and the host quotes what a guest
//! sent in its own errors (a refused answer, a trap), so every such string
//! is cut where it is written: an Event's note to [`EVENT_NOTE_BYTES`] (the
//! API server refuses a longer one), a condition's message to
//! [`CONDITION_MESSAGE_BYTES`], a log line's message to
//! [`LOG_MESSAGE_BYTES`]. The log itself writes one record per line
//! (`telemetry::logs`).

use std::borrow::Cow;

/// The most an Event's note may hold (`events.k8s.io/v1`: 1 kB).
pub const EVENT_NOTE_BYTES: usize = 1024;

/// The most a status condition's message may hold (`metav1.Condition`:
/// 32768 bytes).
pub const CONDITION_MESSAGE_BYTES: usize = 32 * 1024;

/// The most of a failure the host quotes in one log line.
pub const LOG_MESSAGE_BYTES: usize = 4 * 1024;

/// `text` cut to at most `max` bytes at a character boundary, ending in
/// `…` when it was cut.
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    const MARK: &str = "…";
    let end = text.floor_char_boundary(max.saturating_sub(MARK.len()));
    Cow::Owned(format!("{}{MARK}", &text[..end]))
}

/// `text` on one line (whitespace runs and control characters become one
/// space), cut to `max` characters with `...` at the cut.
pub fn one_line(text: &str, max: usize) -> String {
    let mut line = String::with_capacity(text.len().min(max));
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !line.is_empty();
            continue;
        }
        if space {
            line.push(' ');
            space = false;
        }
        line.push(c);
    }
    if line.chars().count() <= max {
        return line;
    }
    let cut: String = line.chars().take(max.saturating_sub(3)).collect();
    format!("{cut}...")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_text_fits_its_sink_at_a_character_boundary() {
        assert_eq!(cut("short", 10), "short");
        let long = "é".repeat(1000);
        let note = cut(&long, EVENT_NOTE_BYTES);
        assert!(note.len() <= EVENT_NOTE_BYTES, "{}", note.len());
        assert!(note.ends_with('…'));
        assert!(note.len() > EVENT_NOTE_BYTES - 8);
        assert_eq!(cut(&"x".repeat(20), 20), "x".repeat(20));
    }

    #[test]
    fn text_becomes_one_bounded_line_without_control_characters() {
        assert_eq!(one_line("a\n  b\tc\u{1b}[31md", 100), "a b c [31md");
        assert_eq!(one_line("  lead and trail  ", 100), "lead and trail");
        let cut = one_line(&"x".repeat(50), 10);
        assert_eq!(cut, "xxxxxxx...");
        assert_eq!(one_line("", 5), "");
    }
}

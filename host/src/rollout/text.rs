//! Text a guest influences, made fit for a sink: one line, no control
//! characters, bounded. Event notes, status reasons and log fields built
//! from a candidate's answers or errors go through here.

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
    fn text_becomes_one_bounded_line_without_control_characters() {
        assert_eq!(one_line("a\n  b\tc\u{1b}[31md", 100), "a b c [31md");
        assert_eq!(one_line("  lead and trail  ", 100), "lead and trail");
        let cut = one_line(&"x".repeat(50), 10);
        assert_eq!(cut, "xxxxxxx...");
        assert_eq!(one_line("", 5), "");
    }
}

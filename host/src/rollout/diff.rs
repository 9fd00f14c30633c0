//! Field-level differences between two JSON values, as JSON pointers with
//! the value before and after: what `wasmop plan` prints for a changed child
//! or status, and what a shadow comparison names as its first difference.

use serde_json::Value;

/// One field that differs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Change {
    /// JSON pointer (RFC 6901) of the field.
    pub path: String,
    /// Its value before; absent when the field is new.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// Its value after; absent when the field goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(none)".to_owned(), short);
        write!(
            f,
            "{}: {} -> {}",
            self.path,
            show(&self.before),
            show(&self.after)
        )
    }
}

/// `value` as compact JSON, cut to 80 characters.
pub fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 80 {
        return text;
    }
    let cut: String = text.chars().take(77).collect();
    format!("{cut}...")
}

/// Every field that differs between `before` and `after`, in pointer order:
/// objects key by key, arrays element by element (extra elements as added
/// or removed), anything else as a whole.
pub fn changes(before: &Value, after: &Value) -> Vec<Change> {
    changes_bounded(before, after, usize::MAX).0
}

/// The first `limit` fields that differ between `before` and `after` (as
/// [`changes`]), each value whose JSON text is longer than
/// [`MAX_VALUE_BYTES`] shown cut, and how many more differ.
pub fn changes_bounded(before: &Value, after: &Value, limit: usize) -> (Vec<Change>, usize) {
    let mut walk = Walk {
        out: Vec::new(),
        limit,
        more: 0,
        stop_at_limit: false,
    };
    walk.walk(&mut String::new(), Some(before), Some(after));
    (walk.out, walk.more)
}

/// The first field that differs, if any (the walk stops there).
pub fn first(before: &Value, after: &Value) -> Option<Change> {
    let mut walk = Walk {
        out: Vec::new(),
        limit: 1,
        more: 0,
        stop_at_limit: true,
    };
    walk.walk(&mut String::new(), Some(before), Some(after));
    walk.out.pop()
}

/// The longest value a change shows whole, as JSON text; a longer one
/// becomes a string that says how long it was.
pub const MAX_VALUE_BYTES: usize = 1024;

/// `value`, or a short stand-in when its JSON text passes
/// [`MAX_VALUE_BYTES`].
fn shown(value: &Value) -> Value {
    let text = value.to_string();
    if text.len() <= MAX_VALUE_BYTES {
        return value.clone();
    }
    let cut = text.floor_char_boundary(MAX_VALUE_BYTES / 2);
    Value::String(format!(
        "{}... ({} bytes of JSON, cut)",
        &text[..cut],
        text.len()
    ))
}

/// A key as a JSON-pointer token, fit to show: `~` and `/` escaped, control
/// characters as `?`, at most [`MAX_KEY`] characters.
fn pointer_token(key: &str) -> String {
    let mut token: String = key
        .chars()
        .take(MAX_KEY)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if key.chars().count() > MAX_KEY {
        token.push_str("...");
    }
    token.replace('~', "~0").replace('/', "~1")
}

/// Longest key shown in a pointer.
const MAX_KEY: usize = 64;

/// A walk over two values, collecting their differences.
struct Walk {
    out: Vec<Change>,
    /// How many differences are collected.
    limit: usize,
    /// Differences past the limit, counted.
    more: usize,
    /// Whether the walk ends at the limit instead of counting the rest.
    stop_at_limit: bool,
}

impl Walk {
    /// Collects the changes between `before` and `after` under `path`.
    fn walk(&mut self, path: &mut String, before: Option<&Value>, after: Option<&Value>) {
        if self.stop_at_limit && self.out.len() >= self.limit {
            return;
        }
        match (before, after) {
            (Some(Value::Object(a)), Some(Value::Object(b))) => {
                let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
                keys.sort();
                keys.dedup();
                for key in keys {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&pointer_token(key));
                    self.walk(path, a.get(key), b.get(key));
                    path.truncate(len);
                }
            }
            (Some(Value::Array(a)), Some(Value::Array(b))) => {
                for i in 0..a.len().max(b.len()) {
                    let len = path.len();
                    path.push('/');
                    path.push_str(&i.to_string());
                    self.walk(path, a.get(i), b.get(i));
                    path.truncate(len);
                }
            }
            (a, b) if a == b => {}
            _ if self.out.len() >= self.limit => self.more += 1,
            (a, b) => self.out.push(Change {
                path: if path.is_empty() {
                    "/".to_owned()
                } else {
                    path.clone()
                },
                before: a.map(shown),
                after: b.map(shown),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changed_added_and_removed_fields_are_named_by_pointer() {
        let before = json!({"spec": {"replicas": 3, "a/b": 1, "ports": [1, 2]}, "gone": true});
        let after = json!({"spec": {"replicas": 0, "a/b": 1, "ports": [1], "new": "x"}});
        let found: Vec<String> = changes(&before, &after)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                "/gone: true -> (none)",
                "/spec/new: (none) -> \"x\"",
                "/spec/ports/1: 2 -> (none)",
                "/spec/replicas: 3 -> 0",
            ]
        );
        assert_eq!(first(&before, &before), None);
        assert_eq!(first(&json!(1), &json!(2)).unwrap().path, "/");
    }

    #[test]
    fn keys_a_guest_chose_are_shown_escaped_and_cut() {
        let long = "k".repeat(100);
        let before = json!({"a\nb": 1, long.clone(): 1});
        let after = json!({"a\nb": 2, long: 2});
        let found = changes(&before, &after);
        assert_eq!(found[0].path, "/a?b");
        assert_eq!(found[1].path.chars().count(), 1 + 64 + 3);
    }

    #[test]
    fn a_bounded_walk_names_the_first_fields_counts_the_rest_and_cuts_long_values() {
        let before = json!({"a": 1, "b": 1, "c": 1, "big": "x"});
        let after = json!({"a": 2, "b": 2, "c": 2, "big": "y".repeat(4 << 20)});
        let (shown, more) = changes_bounded(&before, &after, 2);
        assert_eq!(
            shown.iter().map(|c| c.path.as_str()).collect::<Vec<_>>(),
            ["/a", "/b"]
        );
        assert_eq!(more, 2);
        let (all, more) = changes_bounded(&before, &after, 10);
        assert_eq!(more, 0);
        let big = all.iter().find(|c| c.path == "/big").unwrap();
        let text = big.after.as_ref().unwrap().to_string();
        assert!(text.len() < MAX_VALUE_BYTES, "{} bytes", text.len());
        assert!(text.contains("4194306 bytes of JSON, cut"), "{text}");
    }

    #[test]
    fn long_values_are_cut() {
        let long = Value::String("x".repeat(200));
        assert_eq!(short(&long).chars().count(), 80);
    }
}

//! Reading kube-apiserver's audit log (JSON lines, one event per request).

use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

/// Verbs that change state.
pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The `ResponseComplete` events in the log at `path`. A last line the API
/// server is still writing (no newline yet) is left out.
pub(crate) fn read_events(path: &Path) -> Result<Vec<Value>> {
    read_events_naming(path, None)
}

/// [`read_events`], keeping only lines that hold `string` as a JSON string
/// (quoted and escaped, e.g. a user name); lines without it are skipped
/// before they are parsed, which keeps a log of hundreds of megabytes
/// quick to read.
pub(crate) fn read_events_naming(path: &Path, string: Option<&str>) -> Result<Vec<Value>> {
    let mut cursor = Cursor::at(0);
    cursor.advance(path, string)?;
    Ok(cursor.events)
}

/// The events of one string read so far, and where the reading stopped:
/// the next read starts there, so that polling a growing log (every test
/// of a binary writes to one) reads each byte once.
#[derive(Debug)]
pub(crate) struct Cursor {
    /// The length of the complete lines read.
    offset: u64,
    events: Vec<Value>,
}

impl Cursor {
    /// A cursor that starts reading at `offset`: a string that cannot be
    /// named before then (a user whose certificate was made there) skips
    /// what the log held.
    pub(crate) fn at(offset: u64) -> Self {
        Self {
            offset,
            events: Vec::new(),
        }
    }

    /// Reads the complete lines added to the log at `path` since the last
    /// read, keeping the events that name `string` (every event when
    /// `None`), as [`read_events_naming`] does; returns every event kept so
    /// far, oldest first.
    pub(crate) fn advance(&mut self, path: &Path, string: Option<&str>) -> Result<&[Value]> {
        // The API server writes Go's JSON, which also escapes <, > and & (and
        // U+2028/9): a string with those is matched after parsing only.
        let needle = string
            .filter(|s| !s.contains(['<', '>', '&', '\u{2028}', '\u{2029}']))
            .map(|s| Value::from(s).to_string());
        let mut file = match File::open(path) {
            Ok(file) => file,
            // No request has completed yet.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(&self.events),
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        };
        if file.metadata()?.len() < self.offset {
            // Not the log read before (it never shrinks): read it anew.
            *self = Self::at(0);
        }
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .with_context(|| format!("reading {}", path.display()))?;
        // A last line the API server is still writing (no newline yet) is
        // left for the next read.
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let text = std::str::from_utf8(&bytes[..complete])
            .with_context(|| format!("{} is not UTF-8", path.display()))?;
        for line in text
            .split_inclusive('\n')
            .filter(|line| needle.as_ref().is_none_or(|n| line.contains(n.as_str())))
        {
            let event: Value = serde_json::from_str(line)
                .with_context(|| format!("parsing audit event {line}"))?;
            if event["stage"] == "ResponseComplete" {
                self.events.push(event);
            }
        }
        self.offset += complete as u64;
        Ok(&self.events)
    }
}

/// The user a request acted as: the impersonated user if any, else the
/// authenticated one.
pub fn effective_user(event: &Value) -> Option<&str> {
    event["impersonatedUser"]["username"]
        .as_str()
        .or_else(|| event["user"]["username"].as_str())
}

/// How many of `events` are writes made as `user`.
pub(crate) fn count_writes_by(events: &[Value], user: &str) -> usize {
    events
        .iter()
        .filter(|event| effective_user(event) == Some(user))
        .filter(|event| {
            event["verb"]
                .as_str()
                .is_some_and(|verb| WRITE_VERBS.contains(&verb))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;

    #[test]
    fn writes_are_counted_per_effective_user() {
        let events = vec![
            json!({"stage": "ResponseComplete", "verb": "create", "user": {"username": "alice"}}),
            json!({"stage": "ResponseComplete", "verb": "get", "user": {"username": "alice"}}),
            json!({"stage": "ResponseComplete", "verb": "patch", "user": {"username": "admin"},
                   "impersonatedUser": {"username": "alice"}}),
            json!({"stage": "ResponseComplete", "verb": "delete", "user": {"username": "bob"}}),
        ];
        assert_eq!(count_writes_by(&events, "alice"), 2);
        assert_eq!(count_writes_by(&events, "admin"), 0);
        assert_eq!(count_writes_by(&events, "bob"), 1);
    }

    #[test]
    fn a_half_written_last_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        fs::write(
            &path,
            "{\"stage\":\"ResponseComplete\",\"verb\":\"get\"}\n{\"stage\":\"Panic\"}\n{\"stage\":\"Respo",
        )
        .unwrap();
        let events = read_events(&path).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["verb"], "get");
    }

    #[test]
    fn a_cursor_reads_each_complete_line_once_and_keeps_what_it_read() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let alice =
            "{\"stage\":\"ResponseComplete\",\"verb\":\"get\",\"user\":{\"username\":\"alice\"}}\n";
        let bob =
            "{\"stage\":\"ResponseComplete\",\"verb\":\"get\",\"user\":{\"username\":\"bob\"}}\n";
        let mut cursor = Cursor::at(0);
        assert!(cursor.advance(&path, Some("alice")).unwrap().is_empty());
        fs::write(&path, format!("{alice}{bob}{}", &alice[..20])).unwrap();
        assert_eq!(cursor.advance(&path, Some("alice")).unwrap().len(), 1);
        let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(&alice.as_bytes()[20..]).unwrap();
        assert_eq!(cursor.advance(&path, Some("alice")).unwrap().len(), 2);
        assert_eq!(cursor.advance(&path, Some("alice")).unwrap().len(), 2);
        // Started past what the log held: only what came after.
        let mut late = Cursor::at(fs::metadata(&path).unwrap().len());
        file.write_all(alice.as_bytes()).unwrap();
        assert_eq!(late.advance(&path, Some("alice")).unwrap().len(), 1);
        assert_eq!(cursor.advance(&path, Some("alice")).unwrap().len(), 3);
    }

    #[test]
    fn events_naming_a_string_keep_exactly_the_lines_that_quote_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        fs::write(
            &path,
            concat!(
                "{\"stage\":\"ResponseComplete\",\"verb\":\"get\",\"user\":{\"username\":\"alice\"}}\n",
                "{\"stage\":\"ResponseComplete\",\"verb\":\"get\",\"user\":{\"username\":\"alice2\"}}\n",
                "{\"stage\":\"ResponseComplete\",\"verb\":\"patch\",\"user\":{\"username\":\"admin\"},\"impersonatedUser\":{\"username\":\"alice\"}}\n",
                "{\"stage\":\"ResponseComplete\",\"verb\":\"get\",\"user\":{\"username\":\"bob\"}}\n",
            ),
        )
        .unwrap();
        let events = read_events_naming(&path, Some("alice")).unwrap();
        let verbs: Vec<_> = events.iter().map(|e| e["verb"].as_str().unwrap()).collect();
        assert_eq!(verbs, ["get", "patch"]);
        assert_eq!(count_writes_by(&events, "alice"), 1);
        assert_eq!(read_events_naming(&path, None).unwrap().len(), 4);
    }
}

//! What the commands print: aligned tables and lines for a person, JSON
//! with stable field names for scripts.

use serde_json::{json, Value};
use std::time::{Duration, SystemTime};
use timerpool_pg::Record;

/// A table whose columns are padded to their widest cell.
pub struct Table {
    /// Column titles.
    head: Vec<&'static str>,
    /// Right-aligned columns (numbers).
    right: Vec<bool>,
    /// The cells, row by row.
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns; a title ending in `>` is right-aligned
    /// (the `>` is not shown).
    pub fn new(head: &[&'static str]) -> Table {
        Table {
            head: head.iter().map(|h| h.trim_end_matches('>')).collect(),
            right: head.iter().map(|h| h.ends_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row of as many cells as there are columns.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table, two spaces between columns, no trailing blanks.
    pub fn render(&self) -> String {
        let width = |i: usize| {
            self.rows
                .iter()
                .map(|r| r[i].chars().count())
                .chain([self.head[i].len()])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.head.len()).map(width).collect();
        let mut out = String::new();
        let heads: Vec<String> = self.head.iter().map(|h| h.to_string()).collect();
        for cells in std::iter::once(&heads).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i].saturating_sub(cell.chars().count());
                if self.right[i] {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A time for JSON: RFC 3339 in UTC with microseconds, or null.
pub fn time_json(t: Option<SystemTime>) -> Value {
    t.map_or(Value::Null, |t| {
        Value::String(humantime::format_rfc3339_micros(t).to_string())
    })
}

/// A time for a person: RFC 3339 in UTC to the second, or `-`.
pub fn time_text(t: Option<SystemTime>) -> String {
    t.map_or_else(
        || "-".to_string(),
        |t| humantime::format_rfc3339_seconds(t).to_string(),
    )
}

/// How far `t` is from `now`, to the second: `in 4m 10s` or `3s ago`.
pub fn relative(t: SystemTime, now: SystemTime) -> String {
    let secs = |d: Duration| Duration::from_secs(d.as_secs());
    match t.duration_since(now) {
        Ok(ahead) => format!("in {}", humantime::format_duration(secs(ahead))),
        Err(e) => format!("{} ago", humantime::format_duration(secs(e.duration()))),
    }
}

/// A record as JSON.
pub fn record_json(r: &Record) -> Value {
    json!({
        "id": r.id,
        "key": r.key,
        "handler": r.handler,
        "state": r.state.as_str(),
        "due": time_json(Some(r.due)),
        "created": time_json(Some(r.created)),
        "claimed": time_json(r.claimed),
        "started": time_json(r.started),
        "finished": time_json(r.finished),
        "attempts": r.attempts,
        "owner": r.owner,
        "error": r.error,
    })
}

/// Text for one table cell: one line, at most `max` characters.
pub fn cell(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(3)).collect();
        cut.push_str("...");
        cut
    }
}

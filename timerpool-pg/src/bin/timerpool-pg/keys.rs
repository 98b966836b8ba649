//! The commands on one key: `history`, `cancel` and `retry`.

use super::output::{cell, record_json, time_json, time_text, Table};
use super::{require_queue, Done, Failure, EXIT_NOTHING_DONE};
use serde_json::{json, Value};
use timerpool_pg::admin::{Retried, Retry, Source};
use timerpool_pg::postgres;

pub(crate) fn history(
    client: &mut postgres::Client,
    schema: &str,
    queue: &str,
    key: &str,
    json: bool,
) -> Result<Done, Failure> {
    let q = require_queue(client, schema, queue)?;
    let records = q.history(client, key)?;
    if records.is_empty() {
        return Err(Failure::error(format!(
            "queue {queue:?} has no record of key {key:?}"
        )));
    }
    if json {
        let list: Vec<Value> = records.iter().map(record_json).collect();
        return Ok(Done::ok(Value::Array(list).to_string() + "\n"));
    }
    let mut table = Table::new(&[
        "ID>",
        "STATE",
        "HANDLER",
        "ATTEMPTS>",
        "DUE",
        "FINISHED",
        "OWNER",
        "ERROR",
    ]);
    for r in &records {
        table.row(vec![
            r.id.to_string(),
            r.state.as_str().to_string(),
            cell(&r.handler, 32),
            r.attempts.to_string(),
            time_text(Some(r.due)),
            time_text(r.finished),
            r.owner.as_deref().map_or("-".into(), |o| cell(o, 24)),
            r.error.as_deref().map_or("-".into(), |e| cell(e, 60)),
        ]);
    }
    Ok(Done::ok(table.render()))
}

pub(crate) fn cancel(
    client: &mut postgres::Client,
    schema: &str,
    queue: &str,
    key: &str,
    json: bool,
) -> Result<Done, Failure> {
    let q = require_queue(client, schema, queue)?;
    let cancelled = q.cancel(client, key)?;
    if cancelled {
        let out = if json {
            json!({ "queue": queue, "key": key, "cancelled": true }).to_string() + "\n"
        } else {
            format!("cancelled the pending task of key {key:?} in queue {queue:?}\n")
        };
        return Ok(Done::ok(out));
    }
    let latest = q.history(client, key)?.pop();
    let Some(latest) = latest else {
        return Err(Failure::error(format!(
            "queue {queue:?} has no record of key {key:?}"
        )));
    };
    let out = if json {
        json!({ "queue": queue, "key": key, "cancelled": false, "latest": record_json(&latest) })
            .to_string()
            + "\n"
    } else {
        format!(
            "key {key:?} in queue {queue:?} has no pending task: nothing cancelled \
             (its latest task, {}, is {})\n",
            latest.id,
            latest.state.as_str()
        )
    };
    Ok(Done {
        out,
        code: EXIT_NOTHING_DONE,
    })
}

pub(crate) fn retry_key(
    client: &mut postgres::Client,
    schema: &str,
    queue: &str,
    key: &str,
    (retry, id): (&Retry, Option<i64>),
    json: bool,
) -> Result<Done, Failure> {
    let q = require_queue(client, schema, queue)?;
    let done = retry.run(client, &q, key)?;
    let (code, text, body) = match &done {
        Retried::Scheduled {
            from,
            scheduled,
            payload,
            payload_from,
            max_attempts,
            max_attempts_from,
        } => (
            0,
            format!(
                "retried task {} ({}) of key {key:?}: new task {} due {}{}\n{}",
                from.id,
                from.state.as_str(),
                scheduled.id,
                time_text(Some(scheduled.due)),
                if scheduled.replaced {
                    ", replacing the key's pending task"
                } else {
                    ""
                },
                retried_with(
                    from.id,
                    payload.len(),
                    *payload_from,
                    *max_attempts,
                    *max_attempts_from
                ),
            ),
            json!({
                "retried": true,
                "from": record_json(from),
                "scheduled": {
                    "id": scheduled.id,
                    "due": time_json(Some(scheduled.due)),
                    "replaced": scheduled.replaced,
                    "payload_bytes": payload.len(),
                    "payload_source": source_name(*payload_from),
                    "max_attempts": max_attempts,
                    "max_attempts_source": source_name(*max_attempts_from),
                },
            }),
        ),
        Retried::KeyHeld { from, pending } => (
            EXIT_NOTHING_DONE,
            format!(
                "not retried: pending task {} (due {}) holds key {key:?}; \
                 --replace replaces it with the retry of task {}\n",
                pending.id,
                time_text(Some(pending.due)),
                from.id
            ),
            json!({
                "retried": false,
                "reason": "key_held",
                "from": record_json(from),
                "pending": record_json(pending),
            }),
        ),
        Retried::NotRetryable { latest } => (
            EXIT_NOTHING_DONE,
            format!(
                "not retried: task {} of key {key:?} is {}, and only failed, abandoned or \
                 expired tasks are retried\n",
                latest.id,
                latest.state.as_str()
            ),
            json!({
                "retried": false,
                "reason": "not_retryable",
                "from": record_json(latest),
            }),
        ),
        Retried::NotFound => {
            return Err(Failure::error(not_found(queue, key, id)));
        }
        Retried::Contended => {
            return Err(Failure::error(format!(
                "not retried: pending tasks of key {key:?} kept appearing meanwhile; try again"
            )));
        }
    };
    let out = if json {
        let mut body = body;
        body["queue"] = json!(queue);
        body["key"] = json!(key);
        body.to_string() + "\n"
    } else {
        text
    };
    Ok(Done { out, code })
}

/// The name of a retry's source in `--json`.
fn source_name(source: Source) -> &'static str {
    match source {
        Source::Stored => "stored",
        Source::Given => "given",
        Source::Default => "default",
    }
}

/// The lines saying what the retried task carries and where it came from,
/// and, when the failed task's outcome row kept nothing, that the defaults
/// stood in.
fn retried_with(
    from: i64,
    bytes: usize,
    payload: Source,
    max_attempts: u32,
    bound: Source,
) -> String {
    let whose = |s: Source| match s {
        Source::Stored => format!("task {from}'s"),
        Source::Given => "given".to_string(),
        Source::Default => "default".to_string(),
    };
    let mut out = format!(
        "  payload: {bytes} byte{} ({}); attempt bound: {max_attempts} ({})\n",
        if bytes == 1 { "" } else { "s" },
        whose(payload),
        whose(bound),
    );
    let mut defaults = Vec::new();
    let mut flags = Vec::new();
    if payload == Source::Default {
        defaults.push("an empty payload");
        flags.push("--payload (or --payload-file)");
    }
    if bound == Source::Default {
        defaults.push("the default attempt bound");
        flags.push("--max-attempts");
    }
    if !defaults.is_empty() {
        out.push_str(&format!(
            "  note: task {from}'s outcome was recorded without its payload and attempt bound \
             (before schema version 4), so the new task has {}; give {} to set {}\n",
            defaults.join(" and "),
            flags.join(" and "),
            if defaults.len() == 1 { "it" } else { "them" },
        ));
    }
    out
}

fn not_found(queue: &str, key: &str, id: Option<i64>) -> String {
    match id {
        Some(id) => format!("key {key:?} in queue {queue:?} has no finished task {id}"),
        None => format!("key {key:?} in queue {queue:?} has no finished task to retry"),
    }
}

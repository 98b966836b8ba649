//! The client operations once for every driver: each is one statement of
//! [`Sql`](crate::sql::Sql) with its parameters as driver-neutral values
//! ([`Arg`]) and a reader of its result rows ([`Row`]). The `postgres`
//! client (`queue.rs`), the sqlx client (`sqlx_client.rs`) and the
//! tokio-postgres client (`tokio_client.rs`) only send the text with the
//! values bound their driver's way and hand the rows back, so the checks,
//! the statements and the decoding cannot drift apart.

use crate::names::check_key;
use crate::task::{due_params, Params};
use crate::{Due, Error, NewTask, Queue, Record, Scheduled, State};
use postgres::types::{ToSql, Type};
use std::collections::HashSet;
use std::time::SystemTime;

/// One parameter value, in the SQL type the statement casts it to.
#[derive(Debug)]
pub(crate) enum Arg<'a> {
    /// `text`.
    Text(&'a str),
    /// `int4`.
    Int4(i32),
    /// `int8`, or NULL.
    Int8(Option<i64>),
    /// `timestamptz`, or NULL.
    Time(Option<SystemTime>),
    /// `bytea`.
    Bytea(&'a [u8]),
    /// `text[]`.
    TextArray(Vec<&'a str>),
    /// `int4[]`.
    Int4Array(Vec<i32>),
    /// `int8[]` with NULL elements.
    Int8Array(Vec<Option<i64>>),
    /// `timestamptz[]` with NULL elements.
    TimeArray(Vec<Option<SystemTime>>),
    /// `bytea[]`.
    ByteaArray(Vec<&'a [u8]>),
}

impl Arg<'_> {
    /// The value and its type for rust-postgres (`postgres` and
    /// `tokio-postgres` share these types): sent typed, so the statement
    /// needs no prepare round trip.
    pub(crate) fn typed(&self) -> (&(dyn ToSql + Sync), Type) {
        match self {
            Arg::Text(v) => (v, Type::TEXT),
            Arg::Int4(v) => (v, Type::INT4),
            Arg::Int8(v) => (v, Type::INT8),
            Arg::Time(v) => (v, Type::TIMESTAMPTZ),
            Arg::Bytea(v) => (v, Type::BYTEA),
            Arg::TextArray(v) => (v, Type::TEXT_ARRAY),
            Arg::Int4Array(v) => (v, Type::INT4_ARRAY),
            Arg::Int8Array(v) => (v, Type::INT8_ARRAY),
            Arg::TimeArray(v) => (v, Type::TIMESTAMPTZ_ARRAY),
            Arg::ByteaArray(v) => (v, Type::BYTEA_ARRAY),
        }
    }
}

/// Reads the columns of a result row, whatever the driver.
pub(crate) trait Row {
    /// An `int8` column.
    fn int8(&self, i: usize) -> Result<i64, Error>;
    /// An `int4` column.
    fn int4(&self, i: usize) -> Result<i32, Error>;
    /// A `bool` column.
    fn boolean(&self, i: usize) -> Result<bool, Error>;
    /// A `text` column, NULL as `None`.
    fn text(&self, i: usize) -> Result<Option<String>, Error>;
    /// A `timestamptz` column, NULL as `None`.
    fn time(&self, i: usize) -> Result<Option<SystemTime>, Error>;
}

impl Row for postgres::Row {
    fn int8(&self, i: usize) -> Result<i64, Error> {
        Ok(self.try_get(i)?)
    }
    fn int4(&self, i: usize) -> Result<i32, Error> {
        Ok(self.try_get(i)?)
    }
    fn boolean(&self, i: usize) -> Result<bool, Error> {
        Ok(self.try_get(i)?)
    }
    fn text(&self, i: usize) -> Result<Option<String>, Error> {
        Ok(self.try_get(i)?)
    }
    fn time(&self, i: usize) -> Result<Option<SystemTime>, Error> {
        Ok(self.try_get(i)?)
    }
}

/// A `NOT NULL` column read as NULL: the statements rule it out, so it
/// means the schema was changed under the crate.
fn required<T>(v: Option<T>, what: &str) -> Result<T, Error> {
    v.ok_or_else(|| Error::Unexpected(format!("the database returned NULL for {what}")))
}

/// One operation: a statement and its parameters; a `read_*` function
/// below reads its rows.
#[derive(Debug)]
pub(crate) struct Op<'a> {
    /// The statement text (from [`Sql`](crate::sql::Sql)).
    pub sql: &'a str,
    /// Its parameters, in order.
    pub args: Vec<Arg<'a>>,
}

/// The queue-name parameter every statement starts with.
fn queue_arg(q: &Queue) -> Arg<'_> {
    Arg::Text(q.name())
}

/// `schedule` of one checked task.
pub(crate) fn schedule<'a>(q: &'a Queue, p: &Params<'a>) -> Op<'a> {
    Op {
        sql: &q.sql().schedule,
        args: vec![
            queue_arg(q),
            Arg::Text(p.key),
            Arg::Text(p.handler),
            Arg::Time(p.due_at),
            Arg::Int8(p.delay_us),
            Arg::Bytea(p.payload),
            Arg::Int4(p.max_attempts),
            Arg::Int8(p.expire_us),
        ],
    }
}

/// Reads the row of [`schedule`].
pub(crate) fn read_scheduled(row: &impl Row, key: &str) -> Result<Scheduled, Error> {
    Ok(Scheduled {
        id: row.int8(0)?,
        key: key.to_string(),
        replaced: !row.boolean(1)?,
        due: required(row.time(2)?, "a due time")?,
    })
}

/// `schedule_many` of checked tasks; `None` for an empty batch, which
/// needs no statement. Refuses a key given twice.
pub(crate) fn schedule_batch<'a>(
    q: &'a Queue,
    tasks: &'a [NewTask],
) -> Result<Option<Op<'a>>, Error> {
    if tasks.is_empty() {
        return Ok(None);
    }
    let params = tasks
        .iter()
        .map(NewTask::params)
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = HashSet::with_capacity(params.len());
    if let Some(dup) = params.iter().find(|p| !seen.insert(p.key)) {
        return Err(Error::DuplicateKeyInBatch(dup.key.to_string()));
    }
    Ok(Some(Op {
        sql: &q.sql().schedule_batch,
        args: vec![
            queue_arg(q),
            Arg::TextArray(params.iter().map(|p| p.key).collect()),
            Arg::TextArray(params.iter().map(|p| p.handler).collect()),
            Arg::TimeArray(params.iter().map(|p| p.due_at).collect()),
            Arg::Int8Array(params.iter().map(|p| p.delay_us).collect()),
            Arg::ByteaArray(params.iter().map(|p| p.payload).collect()),
            Arg::Int4Array(params.iter().map(|p| p.max_attempts).collect()),
            Arg::Int8Array(params.iter().map(|p| p.expire_us).collect()),
        ],
    }))
}

/// Reads the rows of [`schedule_batch`].
pub(crate) fn read_batch<R: Row>(rows: &[R]) -> Result<Vec<Scheduled>, Error> {
    rows.iter()
        .map(|row| {
            Ok(Scheduled {
                id: row.int8(0)?,
                key: required(row.text(1)?, "a key")?,
                replaced: !row.boolean(2)?,
                due: required(row.time(3)?, "a due time")?,
            })
        })
        .collect()
}

/// `reschedule` of `key` to `due`.
pub(crate) fn reschedule<'a>(q: &'a Queue, key: &'a str, due: Due) -> Result<Op<'a>, Error> {
    check_key(key)?;
    let (due_at, delay_us) = due_params(due)?;
    Ok(Op {
        sql: &q.sql().reschedule,
        args: vec![
            queue_arg(q),
            Arg::Text(key),
            Arg::Time(due_at),
            Arg::Int8(delay_us),
        ],
    })
}

/// `cancel` of `key`.
pub(crate) fn cancel<'a>(q: &'a Queue, key: &'a str) -> Result<Op<'a>, Error> {
    keyed(q, &q.sql().cancel, key)
}

/// `due_of` of `key`.
pub(crate) fn due_of<'a>(q: &'a Queue, key: &'a str) -> Result<Op<'a>, Error> {
    keyed(q, &q.sql().due_of, key)
}

/// The `history` of `key`.
pub(crate) fn history<'a>(q: &'a Queue, key: &'a str) -> Result<Op<'a>, Error> {
    keyed(q, &q.sql().history, key)
}

/// A statement of (queue, key).
fn keyed<'a>(q: &'a Queue, sql: &'a str, key: &'a str) -> Result<Op<'a>, Error> {
    check_key(key)?;
    Ok(Op {
        sql,
        args: vec![queue_arg(q), Arg::Text(key)],
    })
}

/// Reads the one `bool` of [`reschedule`] and [`cancel`].
pub(crate) fn read_bool(row: &impl Row) -> Result<bool, Error> {
    row.boolean(0)
}

/// Reads the one `timestamptz` of [`due_of`].
pub(crate) fn read_due(row: &impl Row) -> Result<Option<SystemTime>, Error> {
    row.time(0)
}

/// Reads the rows of [`history`].
pub(crate) fn read_history<R: Row>(rows: &[R]) -> Result<Vec<Record>, Error> {
    rows.iter()
        .map(|row| {
            let state = required(row.text(3)?, "a state")?;
            Ok(Record {
                id: row.int8(0)?,
                key: required(row.text(1)?, "a key")?,
                handler: required(row.text(2)?, "a handler")?,
                state: State::parse(&state)
                    .ok_or_else(|| Error::Unexpected(format!("unknown state {state:?}")))?,
                due: required(row.time(4)?, "a due time")?,
                created: required(row.time(5)?, "a creation time")?,
                claimed: row.time(6)?,
                started: row.time(7)?,
                finished: row.time(8)?,
                attempts: u32::try_from(row.int4(9)?).unwrap_or(0),
                owner: row.text(10)?,
                error: row.text(11)?,
            })
        })
        .collect()
}

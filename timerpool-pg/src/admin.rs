//! Operating a schema and its queues: the migration status and the SQL an
//! upgrade would run, counts per queue, purging old outcomes, and retrying
//! a failed task. The `timerpool-pg` command line is built on these; they
//! take any [`GenericClient`] like the rest of the crate.
//!
//! # Examples
//!
//! ```no_run
//! use std::time::Duration;
//! use timerpool_pg::{admin, postgres};
//!
//! let mut client = postgres::Client::connect("postgres://postgres@127.0.0.1/test", postgres::NoTls)?;
//! let status = admin::migration_status(&mut client, admin::DEFAULT_SCHEMA)?;
//! if !status.up_to_date() {
//!     print!("{}", admin::migration_script(&mut client, admin::DEFAULT_SCHEMA)?);
//! }
//! for q in admin::queue_counts(&mut client, admin::DEFAULT_SCHEMA)? {
//!     println!("{}: {} pending, {} failed", q.queue, q.pending, q.failed);
//! }
//! let week = Duration::from_secs(7 * 86_400);
//! admin::purge(&mut client, admin::DEFAULT_SCHEMA, None, week)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::names::{check_key, check_name, check_schema};
use crate::schema::{self, Applied};
use crate::{Error, NewTask, Queue, Record, Scheduled, State, DEFAULT_MAX_ATTEMPTS};
use postgres::types::Type;
use postgres::GenericClient;
use std::time::{Duration, SystemTime};

/// The schema a [`NodeBuilder`](crate::NodeBuilder) uses unless told
/// otherwise.
pub const DEFAULT_SCHEMA: &str = "timerpool";

/// One migration as the database records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    /// Its number, from 1.
    pub version: i32,
    /// Whether it is breaking: code that does not know it refuses the schema.
    pub breaking: bool,
    /// When it was applied; `None` for a schema installed by version-1
    /// code (a `meta` row only), adopted at the next migration.
    pub applied: Option<SystemTime>,
}

/// Where a schema stands against the migrations this crate knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    /// The schema's name.
    pub schema: String,
    /// False if the schema does not exist.
    pub installed: bool,
    /// The newest version this crate installs ([`SCHEMA_VERSION`](crate::SCHEMA_VERSION)).
    pub known: i32,
    /// The migrations the database records, oldest first (newer ones
    /// than [`known`](Self::known) included).
    pub applied: Vec<AppliedMigration>,
    /// The versions this crate knows that the database lacks, oldest first.
    pub outstanding: Vec<i32>,
}

impl MigrationStatus {
    /// True when every migration this crate knows is applied.
    pub fn up_to_date(&self) -> bool {
        self.installed && self.outstanding.is_empty()
    }

    /// The newest applied version, if any.
    pub fn version(&self) -> Option<i32> {
        self.applied.iter().map(|a| a.version).max()
    }

    /// The newest applied breaking migration this crate does not know:
    /// nodes of this version refuse such a schema
    /// ([`Error::SchemaTooNew`]).
    pub fn too_new(&self) -> Option<i32> {
        self.applied
            .iter()
            .filter(|a| a.breaking && a.version > self.known)
            .map(|a| a.version)
            .max()
    }
}

/// Reads where `schema` stands; changes nothing.
///
/// # Errors
///
/// [`Error::InvalidName`] for a bad schema name, [`Error::Db`] if a
/// statement fails.
pub fn migration_status<C: GenericClient>(
    client: &mut C,
    schema: &str,
) -> Result<MigrationStatus, Error> {
    check_schema(schema)?;
    let found = schema::applied(client, schema)?;
    let applied: Vec<AppliedMigration> = found
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|a: &Applied| AppliedMigration {
            version: a.version,
            breaking: a.breaking,
            applied: a.applied,
        })
        .collect();
    let outstanding = schema::known()
        .map(|(v, _)| v)
        .filter(|v| !applied.iter().any(|a| a.version == *v))
        .collect();
    Ok(MigrationStatus {
        schema: schema.to_string(),
        installed: found.is_some(),
        known: crate::SCHEMA_VERSION,
        applied,
        outstanding,
    })
}

/// Installs `schema` or applies its outstanding migrations, as a node does
/// when it starts (safe beside running nodes and other installers), and
/// returns the versions this call found outstanding and applied, oldest
/// first (empty when the schema was current).
///
/// # Errors
///
/// As [`migration_status`], and [`Error::SchemaTooNew`] if the database
/// holds a breaking migration newer than this crate knows.
pub fn migrate<C: GenericClient>(client: &mut C, schema: &str) -> Result<Vec<i32>, Error> {
    let before = migration_status(client, schema)?;
    schema::install(client, schema)?;
    let after = migration_status(client, schema)?;
    Ok(before
        .outstanding
        .into_iter()
        .filter(|v| !after.outstanding.contains(v))
        .collect())
}

/// The SQL [`migrate`] would run on this database now, as a script for
/// `psql` (one transaction per migration, each recording itself in
/// `<schema>.migrations`), for review or for a migration tool of one's
/// own. Empty when the schema is current. Changes nothing.
///
/// # Errors
///
/// As [`migrate`].
pub fn migration_script<C: GenericClient>(client: &mut C, schema: &str) -> Result<String, Error> {
    check_schema(schema)?;
    let found = schema::applied(client, schema)?;
    let status = migration_status(client, schema)?;
    if let Some(found) = status.too_new() {
        return Err(Error::SchemaTooNew {
            found,
            known: status.known,
        });
    }
    Ok(schema::script(schema, found.as_deref()))
}

/// The counts of one queue: its live tasks by state and its recorded
/// outcomes by kind (kept for the nodes' retention period).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueCounts {
    /// The queue's name.
    pub queue: String,
    /// Tasks waiting for their due time.
    pub pending: i64,
    /// Tasks claimed by a node and running under a lease.
    pub running: i64,
    /// Tasks whose attempt failed, waiting for their retry (state
    /// `running`, no owner).
    pub retrying: i64,
    /// Outcomes `completed`.
    pub completed: i64,
    /// Outcomes `failed`.
    pub failed: i64,
    /// Outcomes `abandoned`.
    pub abandoned: i64,
    /// Outcomes `expired`.
    pub expired: i64,
    /// Outcomes `cancelled`.
    pub cancelled: i64,
    /// Outcomes `replaced`.
    pub replaced: i64,
    /// The earliest due time of a pending task.
    pub next_due: Option<SystemTime>,
}

/// Every queue of `schema` that has a task or an outcome, by name, with
/// its counts, and the database's clock when they were read. The outcome
/// counts read the queue's whole `outcomes` table.
///
/// # Errors
///
/// As [`migration_status`]; [`Error::Db`] also when the schema is not
/// installed.
pub fn queue_counts<C: GenericClient>(
    client: &mut C,
    schema: &str,
) -> Result<Vec<QueueCounts>, Error> {
    Ok(queue_counts_at(client, schema)?.0)
}

/// [`queue_counts`] and the database's clock when they were read.
///
/// # Errors
///
/// As [`queue_counts`].
pub fn queue_counts_at<C: GenericClient>(
    client: &mut C,
    schema: &str,
) -> Result<(Vec<QueueCounts>, SystemTime), Error> {
    check_schema(schema)?;
    let now: SystemTime = client.query_one("SELECT clock_timestamp()", &[])?.get(0);
    let rows = client.query(
        &format!(
            "WITH t AS (
                SELECT queue,
                       count(*) FILTER (WHERE state = 'pending') AS pending,
                       count(*) FILTER (WHERE state = 'running' AND owner IS NOT NULL) AS running,
                       count(*) FILTER (WHERE state = 'running' AND owner IS NULL) AS retrying,
                       min(due) FILTER (WHERE state = 'pending') AS next_due
                FROM {schema}.tasks GROUP BY queue
            ), o AS (
                SELECT queue,
                       count(*) FILTER (WHERE outcome = 'completed') AS completed,
                       count(*) FILTER (WHERE outcome = 'failed') AS failed,
                       count(*) FILTER (WHERE outcome = 'abandoned') AS abandoned,
                       count(*) FILTER (WHERE outcome = 'expired') AS expired,
                       count(*) FILTER (WHERE outcome = 'cancelled') AS cancelled,
                       count(*) FILTER (WHERE outcome = 'replaced') AS replaced
                FROM {schema}.outcomes GROUP BY queue
            )
            SELECT COALESCE(t.queue, o.queue),
                   COALESCE(t.pending, 0), COALESCE(t.running, 0), COALESCE(t.retrying, 0),
                   COALESCE(o.completed, 0), COALESCE(o.failed, 0), COALESCE(o.abandoned, 0),
                   COALESCE(o.expired, 0), COALESCE(o.cancelled, 0), COALESCE(o.replaced, 0),
                   t.next_due
            FROM t FULL JOIN o ON t.queue = o.queue
            ORDER BY 1"
        ),
        &[],
    )?;
    let counts = rows
        .iter()
        .map(|r| QueueCounts {
            queue: r.get(0),
            pending: r.get(1),
            running: r.get(2),
            retrying: r.get(3),
            completed: r.get(4),
            failed: r.get(5),
            abandoned: r.get(6),
            expired: r.get(7),
            cancelled: r.get(8),
            replaced: r.get(9),
            next_due: r.get(10),
        })
        .collect();
    Ok((counts, now))
}

/// True if `queue` of `schema` holds a task or an outcome.
///
/// # Errors
///
/// As [`queue_counts`], and [`Error::InvalidName`] for a bad queue name.
pub fn queue_exists<C: GenericClient>(
    client: &mut C,
    schema: &str,
    queue: &str,
) -> Result<bool, Error> {
    check_schema(schema)?;
    check_name("queue", queue)?;
    let row = client.query_typed_one(
        &format!(
            "SELECT EXISTS (SELECT 1 FROM {schema}.tasks WHERE queue = $1)
                 OR EXISTS (SELECT 1 FROM {schema}.outcomes WHERE queue = $1)"
        ),
        &[(&queue, Type::TEXT)],
    )?;
    Ok(row.get(0))
}

/// Deletes the outcome rows of `queue` (every queue if `None`) that
/// finished more than `older_than` ago by the database's clock, as the
/// nodes' retention does, and returns how many. Live tasks are never
/// touched.
///
/// # Errors
///
/// As [`queue_exists`], and [`Error::InvalidConfig`] for a duration
/// PostgreSQL's intervals cannot hold.
pub fn purge<C: GenericClient>(
    client: &mut C,
    schema: &str,
    queue: Option<&str>,
    older_than: Duration,
) -> Result<u64, Error> {
    check_schema(schema)?;
    if let Some(q) = queue {
        check_name("queue", q)?;
    }
    // Far inside the range of PostgreSQL's intervals and timestamps.
    const MAX: Duration = Duration::from_secs(10_000 * 365 * 86_400);
    if older_than > MAX {
        return Err(Error::InvalidConfig(format!(
            "a purge age of {} s is longer than the maximum {} s",
            older_than.as_secs(),
            MAX.as_secs()
        )));
    }
    let us = older_than.as_micros() as i64; // below MAX, so it fits
    let deleted = client.query_typed(
        &format!(
            "DELETE FROM {schema}.outcomes
             WHERE ($1::text IS NULL OR queue = $1::text)
               AND finished < clock_timestamp() - $2::int8 * interval '1 microsecond'
             RETURNING 1"
        ),
        &[(&queue, Type::TEXT), (&us, Type::INT8)],
    )?;
    Ok(deleted.len() as u64)
}

/// How a retry is scheduled: which failed task, and the new task's
/// payload, attempts and delay.
///
/// By default the new task runs as the failed one did: the outcome row of
/// a `failed`, `abandoned` or `expired` task keeps its payload and attempt
/// bound (schema version 4 on), and the retry reuses them;
/// [`payload`](Retry::payload) and [`max_attempts`](Retry::max_attempts)
/// override them. A row that keeps neither (recorded before migration 4,
/// or by code that does not know it) falls back to an empty payload and
/// [`DEFAULT_MAX_ATTEMPTS`], and [`Retried::Scheduled`] says so
/// ([`Source::Default`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// The task to retry, by id; `None` for the key's latest outcome.
    id: Option<i64>,
    /// Replace a pending task that holds the key.
    replace: bool,
    /// The new task's payload; `None` for the failed task's.
    payload: Option<Vec<u8>>,
    /// The new task's attempt bound; `None` for the failed task's.
    max_attempts: Option<u32>,
    /// The new task's delay after the database's clock.
    after: Duration,
}

/// Where a retried task's payload or attempt bound came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The failed task's own, kept in its outcome row.
    Stored,
    /// Given to the [`Retry`] ([`Retry::payload`], [`Retry::max_attempts`]).
    Given,
    /// The failed task's outcome row keeps none (it was recorded before
    /// migration 4, or by code that does not know it), so the default: an
    /// empty payload, [`DEFAULT_MAX_ATTEMPTS`] attempts.
    Default,
}

impl Default for Retry {
    fn default() -> Self {
        Retry::new()
    }
}

/// What [`Retry::run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retried {
    /// A new task of the failed one's key and handler was scheduled;
    /// `scheduled.replaced` says whether it replaced a pending task
    /// ([`Retry::replace`]).
    Scheduled {
        /// The failed task retried.
        from: Box<Record>,
        /// The new task.
        scheduled: Scheduled,
        /// The new task's payload.
        payload: Vec<u8>,
        /// Where [`payload`](Retried::Scheduled::payload) came from.
        payload_from: Source,
        /// The new task's attempt bound.
        max_attempts: u32,
        /// Where [`max_attempts`](Retried::Scheduled::max_attempts) came
        /// from.
        max_attempts_from: Source,
    },
    /// A pending task holds the key and [`Retry::replace`] was not set:
    /// nothing changed.
    KeyHeld {
        /// The failed task that would have been retried.
        from: Box<Record>,
        /// The pending task that holds the key.
        pending: Box<Record>,
    },
    /// The key's latest outcome (or the task named by [`Retry::id`]) is not
    /// `failed`, `abandoned` or `expired`: nothing to retry.
    NotRetryable {
        /// That record.
        latest: Box<Record>,
    },
    /// The key has no finished task (or none with that id) in the queue.
    NotFound,
    /// Pending tasks of the key kept appearing and running between the
    /// read and the upsert of every try: nothing changed; try again.
    Contended,
}

impl Retry {
    /// Retries the key's latest outcome, failing if a pending task holds
    /// the key, due now, with the failed task's payload and attempt bound.
    pub fn new() -> Retry {
        Retry {
            id: None,
            replace: false,
            payload: None,
            max_attempts: None,
            after: Duration::ZERO,
        }
    }

    /// Retries the key's task `id` instead of its latest outcome.
    pub fn id(mut self, id: i64) -> Retry {
        self.id = Some(id);
        self
    }

    /// Replaces a pending task that holds the key (its outcome is
    /// `replaced`) instead of refusing.
    pub fn replace(mut self, yes: bool) -> Retry {
        self.replace = yes;
        self
    }

    /// The new task's payload instead of the failed task's (default: the
    /// failed task's, or empty if its outcome row keeps none).
    pub fn payload(mut self, payload: Vec<u8>) -> Retry {
        self.payload = Some(payload);
        self
    }

    /// The new task's attempt bound instead of the failed task's
    /// (default: the failed task's, or [`DEFAULT_MAX_ATTEMPTS`] if its
    /// outcome row keeps none).
    pub fn max_attempts(mut self, n: u32) -> Retry {
        self.max_attempts = Some(n);
        self
    }

    /// The new task falls due this long after the database's clock
    /// (default now).
    pub fn after(mut self, delay: Duration) -> Retry {
        self.after = delay;
        self
    }

    /// Schedules a new task with the failed task's key, handler, payload
    /// and attempt bound (unless overridden) through the schedule upsert,
    /// in one transaction: if a pending task holds the key, nothing
    /// changes unless [`replace`](Retry::replace) was set. So a retry run
    /// twice schedules once; the second finds the first's pending task.
    /// A schema older than version 4 keeps no payloads: every retry then
    /// falls back to the defaults ([`Source::Default`]).
    ///
    /// # Errors
    ///
    /// As [`Queue::schedule`] (bad payload, zero attempts, a delay out of
    /// range), [`Error::InvalidConfig`] if the outcome row keeps an
    /// attempt bound below 1 (only a hand-edited row can), and
    /// [`Error::Db`].
    pub fn run<C: GenericClient>(
        &self,
        client: &mut C,
        queue: &Queue,
        key: &str,
    ) -> Result<Retried, Error> {
        check_key(key)?;
        // Each try either commits, or finds the key held, or saw a
        // pending task commit (or the outcome row go) between its read and
        // its upsert.
        for _ in 0..RETRY_TRIES {
            if let Some(done) = self.try_once(client, queue, key)? {
                return Ok(done);
            }
        }
        Ok(Retried::Contended)
    }

    /// One transaction of [`run`](Retry::run); `None` if a pending task of
    /// the key appeared between the read and the upsert and then ran, or
    /// the failed task's outcome row was purged after the read (the next
    /// try finds it gone).
    fn try_once<C: GenericClient>(
        &self,
        client: &mut C,
        queue: &Queue,
        key: &str,
    ) -> Result<Option<Retried>, Error> {
        let mut tx = client.transaction()?;
        let history = queue.history(&mut tx, key)?;
        let from = match self.id {
            Some(id) => history.iter().find(|r| r.id == id && r.state.is_final()),
            None => history.iter().rev().find(|r| r.state.is_final()),
        };
        let Some(from) = from.cloned() else {
            return Ok(Some(Retried::NotFound));
        };
        if !matches!(
            from.state,
            State::Failed | State::Abandoned | State::Expired
        ) {
            return Ok(Some(Retried::NotRetryable {
                latest: Box::new(from),
            }));
        }
        let pending = history.iter().find(|r| r.state == State::Pending).cloned();
        if let (Some(pending), false) = (pending, self.replace) {
            return Ok(Some(Retried::KeyHeld {
                from: Box::new(from),
                pending: Box::new(pending),
            }));
        }
        let Some(stored) = stored(&mut tx, queue, &from, self)? else {
            return Ok(None); // purged since the history was read: look again
        };
        let (payload, payload_from) = match (&self.payload, stored.payload) {
            (Some(given), _) => (given.clone(), Source::Given),
            (None, Some(kept)) => (kept, Source::Stored),
            (None, None) => (Vec::new(), Source::Default),
        };
        let (max_attempts, max_attempts_from) = match (self.max_attempts, stored.max_attempts) {
            (Some(given), _) => (given, Source::Given),
            (None, Some(kept)) => (kept, Source::Stored),
            (None, None) => (DEFAULT_MAX_ATTEMPTS, Source::Default),
        };
        let task = NewTask::new(key, from.handler.clone())
            .payload(payload.clone())
            .max_attempts(max_attempts)
            .after(self.after);
        let scheduled = queue.schedule(&mut tx, &task)?;
        if scheduled.replaced && !self.replace {
            // A pending task of the key committed after the history was
            // read and the upsert replaced it, which was not asked for:
            // roll back, and report that task if it is still pending.
            drop(tx);
            let pending = queue
                .history(client, key)?
                .into_iter()
                .find(|r| r.state == State::Pending);
            return Ok(pending.map(|pending| Retried::KeyHeld {
                from: Box::new(from),
                pending: Box::new(pending),
            }));
        }
        tx.commit()?;
        Ok(Some(Retried::Scheduled {
            from: Box::new(from),
            scheduled,
            payload,
            payload_from,
            max_attempts,
            max_attempts_from,
        }))
    }
}

/// What the outcome row of a retried task keeps of it.
struct Stored {
    /// Its payload, if the row keeps it.
    payload: Option<Vec<u8>>,
    /// Its attempt bound, if the row keeps it.
    max_attempts: Option<u32>,
}

/// Reads the payload and attempt bound that `from`'s outcome row keeps,
/// unless `retry` gives both; `None` if the row is gone. The row is read
/// whole and its columns found by name, so a schema without them (older
/// than version 4, which nodes of this crate never leave, but an operator
/// may point the command line at) reads as keeping neither.
fn stored<C: GenericClient>(
    client: &mut C,
    queue: &Queue,
    from: &Record,
    retry: &Retry,
) -> Result<Option<Stored>, Error> {
    if retry.payload.is_some() && retry.max_attempts.is_some() {
        return Ok(Some(Stored {
            payload: None,
            max_attempts: None,
        }));
    }
    let Some(row) = client.query_typed_opt(
        &format!("SELECT * FROM {}.outcomes WHERE id = $1", queue.schema()),
        &[(&from.id, Type::INT8)],
    )?
    else {
        return Ok(None);
    };
    let column = |name: &str| row.columns().iter().position(|c| c.name() == name);
    let payload: Option<Vec<u8>> = match column("payload") {
        Some(i) => row.try_get(i)?,
        None => None,
    };
    let max_attempts: Option<i32> = match column("max_attempts") {
        Some(i) => row.try_get(i)?,
        None => None,
    };
    let max_attempts = max_attempts
        .map(|n| {
            u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "the outcome row of task {} keeps the attempt bound {n}, which is not \
                     at least 1: give one to the retry",
                    from.id
                ))
            })
        })
        .transpose()?;
    Ok(Some(Stored {
        payload,
        max_attempts,
    }))
}

/// How many transactions [`Retry::run`] tries before it reports
/// [`Retried::Contended`].
const RETRY_TRIES: usize = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_schema_is_the_nodes() {
        let config: postgres::Config = "host=localhost".parse().unwrap();
        let builder = crate::Node::builder(config, "q");
        let shown = format!("{builder:?}");
        assert!(
            shown.contains(&format!("schema: {DEFAULT_SCHEMA:?}")),
            "{shown}"
        );
    }
}

//! The client side of a queue: schedule, replace, cancel and read tasks
//! with any client or inside the caller's own transaction.

use crate::names::{channel, check_key, check_name, check_schema};
use crate::sql::Sql;
use crate::task::{due_params, Due, NewTask, Params, Scheduled};
use crate::{schema, Error, Record};
use postgres::types::{ToSql, Type};
use postgres::GenericClient;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;

/// A named queue of keyed tasks in one schema. Cheap to clone.
///
/// Every method takes a [`GenericClient`]: a `postgres::Client` (the
/// statement commits on its own) or a `postgres::Transaction` (it commits
/// or rolls back with the caller's rows).
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use timerpool_pg::{NewTask, Queue};
///
/// let mut client = postgres::Client::connect("postgres://postgres@127.0.0.1/test", postgres::NoTls)?;
/// let offers = Queue::new("timerpool", "offers")?;
/// offers.install(&mut client)?;
///
/// let mut tx = client.transaction()?;
/// tx.execute("CREATE TEMP TABLE IF NOT EXISTS trips (id int)", &[])?;
/// tx.execute("INSERT INTO trips VALUES (42)", &[])?;
/// let s = offers.schedule(&mut tx, &NewTask::new("trip-42", "redispatch").after(Duration::from_secs(15)))?;
/// assert!(!s.replaced);
/// tx.commit()?; // the row and its timeout commit together
///
/// assert!(offers.cancel(&mut client, "trip-42")?); // the driver accepted
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Queue {
    /// Shared, immutable parts.
    inner: Arc<Inner>,
}

/// What every clone of a [`Queue`] shares.
#[derive(Debug)]
struct Inner {
    /// Schema holding the tables.
    schema: String,
    /// Queue name.
    name: String,
    /// `LISTEN` channel of the queue's leaders.
    channel: String,
    /// The statements.
    sql: Sql,
}

impl Queue {
    /// The queue `name` in `schema` (a lower-case identifier such as
    /// `"timerpool"`; it is created on [`install`](Queue::install)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a bad schema or queue name.
    pub fn new(schema: &str, name: &str) -> Result<Queue, Error> {
        check_schema(schema)?;
        check_name("queue", name)?;
        Ok(Queue {
            inner: Arc::new(Inner {
                schema: schema.to_string(),
                name: name.to_string(),
                channel: channel(schema, name),
                sql: Sql::new(schema),
            }),
        })
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The schema's name.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// The `LISTEN` channel of this queue: every schedule, reschedule and
    /// retry notifies it at commit with the earliest new run time (µs
    /// since the epoch, as text). The installed function
    /// `<schema>.channel(queue)` gives the same name.
    pub fn channel(&self) -> &str {
        &self.inner.channel
    }

    /// The statements of this queue's schema, for a client or node built
    /// on another driver.
    pub fn sql(&self) -> &Sql {
        &self.inner.sql
    }

    /// Creates or migrates the schema's tables; idempotent and safe to run
    /// from many processes at once. Nodes call it when they start.
    ///
    /// # Errors
    ///
    /// [`Error::Db`] if a statement fails, [`Error::SchemaTooNew`] if the
    /// database holds a newer schema than this crate knows.
    pub fn install<C: GenericClient>(&self, client: &mut C) -> Result<(), Error> {
        schema::install(client, &self.inner.schema)
    }

    /// Schedules `task`: inserts it, or, if its key has a pending task,
    /// replaces that task atomically (the old one's outcome is `Replaced`)
    /// and says so in [`Scheduled::replaced`]. A key whose task is running
    /// gets a new pending task beside it.
    ///
    /// The statement sends a notification with the task's due time, which
    /// wakes the nodes whose wait ends later when the caller commits.
    ///
    /// # Errors
    ///
    /// Bad input ([`Error::KeyTooLong`], [`Error::PayloadTooLarge`],
    /// [`Error::InvalidName`], [`Error::InvalidConfig`],
    /// [`Error::DueOutOfRange`]) before anything is sent; [`Error::Db`] if
    /// the statement fails.
    pub fn schedule<C: GenericClient>(
        &self,
        client: &mut C,
        task: &NewTask,
    ) -> Result<Scheduled, Error> {
        let p = task.params()?;
        let queue = self.name();
        let args: [(&(dyn ToSql + Sync), Type); 8] = [
            (&queue, Type::TEXT),
            (&p.key, Type::TEXT),
            (&p.handler, Type::TEXT),
            (&p.due_at, Type::TIMESTAMPTZ),
            (&p.delay_us, Type::INT8),
            (&p.payload, Type::BYTEA),
            (&p.max_attempts, Type::INT4),
            (&p.expire_us, Type::INT8),
        ];
        let row = client.query_typed_one(&self.sql().schedule, &args)?;
        Ok(Scheduled {
            id: row.get(0),
            key: p.key.to_string(),
            replaced: !row.get::<_, bool>(1),
            due: row.get(2),
        })
    }

    /// Schedules many tasks in one statement, each inserted or replacing
    /// as in [`schedule`](Queue::schedule), with at most one notification.
    /// Results come in no particular order; match them by key.
    ///
    /// # Errors
    ///
    /// As [`schedule`](Queue::schedule), and
    /// [`Error::DuplicateKeyInBatch`] if two tasks share a key. Nothing is
    /// scheduled when any task is refused.
    pub fn schedule_batch<C: GenericClient>(
        &self,
        client: &mut C,
        tasks: &[NewTask],
    ) -> Result<Vec<Scheduled>, Error> {
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        let params = tasks
            .iter()
            .map(NewTask::params)
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = HashSet::with_capacity(params.len());
        if let Some(dup) = params.iter().find(|p| !seen.insert(p.key)) {
            return Err(Error::DuplicateKeyInBatch(dup.key.to_string()));
        }
        let cols = Columns::of(&params);
        let queue = self.name();
        let args: [(&(dyn ToSql + Sync), Type); 8] = [
            (&queue, Type::TEXT),
            (&cols.keys, Type::TEXT_ARRAY),
            (&cols.handlers, Type::TEXT_ARRAY),
            (&cols.due_at, Type::TIMESTAMPTZ_ARRAY),
            (&cols.delay_us, Type::INT8_ARRAY),
            (&cols.payloads, Type::BYTEA_ARRAY),
            (&cols.max_attempts, Type::INT4_ARRAY),
            (&cols.expire_us, Type::INT8_ARRAY),
        ];
        let rows = client.query_typed(&self.sql().schedule_batch, &args)?;
        Ok(rows
            .iter()
            .map(|row| Scheduled {
                id: row.get(0),
                key: row.get(1),
                replaced: !row.get::<_, bool>(2),
                due: row.get(3),
            })
            .collect())
    }

    /// Cancels the pending task of `key`: true iff it was pending, and then
    /// it never runs (outcome `Cancelled`). A task already claimed by a
    /// node cannot be stopped: false.
    ///
    /// # Errors
    ///
    /// [`Error::KeyTooLong`] or [`Error::InvalidName`] for a bad key,
    /// [`Error::Db`] if the statement fails.
    pub fn cancel<C: GenericClient>(&self, client: &mut C, key: &str) -> Result<bool, Error> {
        check_key(key)?;
        let queue = self.name();
        let row = client.query_typed_one(
            &self.sql().cancel,
            &[(&queue, Type::TEXT), (&key, Type::TEXT)],
        )?;
        Ok(row.get(0))
    }

    /// Moves the due time of `key`'s pending task in place: the same task
    /// (same id, payload, handler and attempts; its expiry window moves
    /// with it), with no `Replaced` record. True iff a pending task was
    /// moved; a running task, or none, gives false. Like a schedule, it
    /// notifies the nodes at commit, so a move to an earlier time wakes a
    /// node sleeping toward the old one.
    ///
    /// # Errors
    ///
    /// As [`cancel`](Queue::cancel), and [`Error::DueOutOfRange`] for a
    /// due time `timestamptz` cannot hold.
    pub fn reschedule<C: GenericClient>(
        &self,
        client: &mut C,
        key: &str,
        due: Due,
    ) -> Result<bool, Error> {
        check_key(key)?;
        let (due_at, delay_us) = due_params(due)?;
        let queue = self.name();
        let args: [(&(dyn ToSql + Sync), Type); 4] = [
            (&queue, Type::TEXT),
            (&key, Type::TEXT),
            (&due_at, Type::TIMESTAMPTZ),
            (&delay_us, Type::INT8),
        ];
        let row = client.query_typed_one(&self.sql().reschedule, &args)?;
        Ok(row.get(0))
    }

    /// The due time of `key`'s pending task, on the database's clock;
    /// `None` if the key has no pending task (none, or only a running one).
    ///
    /// # Errors
    ///
    /// As [`cancel`](Queue::cancel).
    pub fn due_of<C: GenericClient>(
        &self,
        client: &mut C,
        key: &str,
    ) -> Result<Option<SystemTime>, Error> {
        check_key(key)?;
        let queue = self.name();
        let row = client.query_typed_one(
            &self.sql().due_of,
            &[(&queue, Type::TEXT), (&key, Type::TEXT)],
        )?;
        Ok(row.get(0))
    }

    /// Every recorded task of `key`, live and finished (until removed after
    /// the retention period), oldest first.
    ///
    /// # Errors
    ///
    /// As [`cancel`](Queue::cancel).
    pub fn history<C: GenericClient>(
        &self,
        client: &mut C,
        key: &str,
    ) -> Result<Vec<Record>, Error> {
        check_key(key)?;
        let queue = self.name();
        let rows = client.query_typed(
            &self.sql().history,
            &[(&queue, Type::TEXT), (&key, Type::TEXT)],
        )?;
        Ok(rows.iter().map(Record::from_row).collect())
    }
}

/// A batch as parallel arrays, one per column.
struct Columns<'a> {
    keys: Vec<&'a str>,
    handlers: Vec<&'a str>,
    payloads: Vec<&'a [u8]>,
    due_at: Vec<Option<SystemTime>>,
    delay_us: Vec<Option<i64>>,
    expire_us: Vec<Option<i64>>,
    max_attempts: Vec<i32>,
}

impl<'a> Columns<'a> {
    fn of(params: &[Params<'a>]) -> Columns<'a> {
        Columns {
            keys: params.iter().map(|p| p.key).collect(),
            handlers: params.iter().map(|p| p.handler).collect(),
            payloads: params.iter().map(|p| p.payload).collect(),
            due_at: params.iter().map(|p| p.due_at).collect(),
            delay_us: params.iter().map(|p| p.delay_us).collect(),
            expire_us: params.iter().map(|p| p.expire_us).collect(),
            max_attempts: params.iter().map(|p| p.max_attempts).collect(),
        }
    }
}

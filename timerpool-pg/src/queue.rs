//! The client side of a queue: schedule, replace, cancel and read tasks
//! with any client or inside the caller's own transaction.

use crate::names::{channel, check_name, check_schema};
use crate::ops::{self, Arg, Op};
use crate::sql::Sql;
use crate::task::{Due, NewTask, Scheduled};
use crate::{schema, Error, Record};
use postgres::GenericClient;
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
        let row = one(client, ops::schedule(self, &p))?;
        ops::read_scheduled(&row, p.key)
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
        match ops::schedule_batch(self, tasks)? {
            Some(op) => ops::read_batch(&many(client, op)?),
            None => Ok(Vec::new()),
        }
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
        ops::read_bool(&one(client, ops::cancel(self, key)?)?)
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
        ops::read_bool(&one(client, ops::reschedule(self, key, due)?)?)
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
        ops::read_due(&one(client, ops::due_of(self, key)?)?)
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
        ops::read_history(&many(client, ops::history(self, key)?)?)
    }
}

/// Sends a one-row operation with the synchronous driver.
fn one<C: GenericClient>(client: &mut C, op: Op<'_>) -> Result<postgres::Row, Error> {
    let args: Vec<_> = op.args.iter().map(Arg::typed).collect();
    Ok(client.query_typed_one(op.sql, &args)?)
}

/// Sends an operation of any number of rows with the synchronous driver.
fn many<C: GenericClient>(client: &mut C, op: Op<'_>) -> Result<Vec<postgres::Row>, Error> {
    let args: Vec<_> = op.args.iter().map(Arg::typed).collect();
    Ok(client.query_typed(op.sql, &args)?)
}

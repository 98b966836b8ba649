//! The queue's client operations from sqlx: the statements of
//! [`ops`](crate::ops), bound sqlx's way and sent through any `Executor`.

use crate::ops::{self, Arg, Op, Row};
use crate::{Due, Error, NewTask, Queue, Record, Scheduled};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::types::chrono::{DateTime, Utc};
use sqlx::{Executor, Postgres};
use std::time::SystemTime;

impl Queue {
    /// This queue's operations for sqlx: [`SqlxQueue`] takes any sqlx
    /// `Executor` (a `&PgPool`, a `&mut PgConnection`, or a transaction as
    /// `&mut *tx`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use timerpool_pg::sqlx::PgPool;
    /// use timerpool_pg::{NewTask, Queue};
    ///
    /// # async fn f(pool: PgPool) -> Result<(), Box<dyn std::error::Error>> {
    /// let offers = Queue::new("timerpool", "offers")?;
    /// let task = NewTask::new("trip-42", "redispatch").after(Duration::from_secs(15));
    /// offers.sqlx().schedule(&pool, &task).await?;
    /// # Ok(()) }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
    pub fn sqlx(&self) -> SqlxQueue<'_> {
        SqlxQueue { queue: self }
    }
}

/// A [`Queue`]'s client operations through sqlx, from
/// [`Queue::sqlx`]: the same statements, checks and results as the
/// synchronous methods of [`Queue`], awaited.
///
/// Every operation is one statement, so it takes any
/// `E: sqlx::Executor<'_, Database = Postgres>` by value: `&PgPool` (the
/// statement commits on its own), `&mut PgConnection`, or the caller's
/// transaction as `&mut *tx`, where the task commits or rolls back with
/// the caller's rows and its notification reaches the nodes at commit.
/// The statements go through sqlx's per-connection statement cache
/// (`persistent(true)`): each connection prepares a statement once, and
/// every later call is one round trip with no parsing or planning. The
/// futures are `Send` when the executor is.
///
/// Errors from the database come as [`Error::Sqlx`]; bad input is refused
/// before anything is sent, as by [`Queue::schedule`].
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use timerpool_pg::sqlx::{self, PgPool};
/// use timerpool_pg::{Due, NewTask, Queue};
///
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = PgPool::connect("postgres://postgres@127.0.0.1/test").await?;
/// // The schema is installed by the nodes when they start (or `Queue::install`).
/// let offers = Queue::new("timerpool", "offers")?;
///
/// let mut tx = pool.begin().await?;
/// sqlx::query("INSERT INTO trips (id) VALUES (42)").execute(&mut *tx).await?;
/// let task = NewTask::new("trip-42", "redispatch").after(Duration::from_secs(15));
/// let s = offers.sqlx().schedule(&mut *tx, &task).await?;
/// tx.commit().await?; // the trip and its timeout commit together
///
/// // The driver asks for more time: the same task, later, no new id.
/// assert!(offers.sqlx().reschedule(&pool, "trip-42", Due::After(Duration::from_secs(30))).await?);
/// assert_eq!(offers.sqlx().history(&pool, "trip-42").await?[0].id, s.id);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
pub struct SqlxQueue<'q> {
    /// The queue whose statements are sent.
    queue: &'q Queue,
}

impl SqlxQueue<'_> {
    /// Schedules `task` as [`Queue::schedule`] does: inserts it, or
    /// atomically replaces the key's pending task and says so.
    ///
    /// # Errors
    ///
    /// Bad input as [`Queue::schedule`], before anything is sent;
    /// [`Error::Sqlx`] if the statement fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::{NewTask, Queue};
    /// # async fn f(pool: timerpool_pg::sqlx::PgPool, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// let mut tx = pool.begin().await?;
    /// let s = offers.sqlx().schedule(&mut *tx, &NewTask::new("trip-42", "redispatch")).await?;
    /// tx.commit().await?;
    /// println!("task {} due at {:?}, replaced: {}", s.id, s.due, s.replaced);
    /// # Ok(()) }
    /// ```
    pub async fn schedule<'c, E>(self, executor: E, task: &NewTask) -> Result<Scheduled, Error>
    where
        E: Executor<'c, Database = Postgres>,
    {
        let p = task.params()?;
        let row = one(executor, ops::schedule(self.queue, &p)).await?;
        ops::read_scheduled(&row, p.key)
    }

    /// Schedules many tasks in one statement, as
    /// [`Queue::schedule_batch`] does; results in no particular order.
    ///
    /// # Errors
    ///
    /// As [`schedule`](SqlxQueue::schedule), and
    /// [`Error::DuplicateKeyInBatch`]; nothing is scheduled when any task
    /// is refused.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::{NewTask, Queue};
    /// # async fn f(pool: timerpool_pg::sqlx::PgPool, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// let tasks: Vec<NewTask> = (0..100).map(|i| NewTask::new(format!("trip-{i}"), "redispatch")).collect();
    /// assert_eq!(offers.sqlx().schedule_batch(&pool, &tasks).await?.len(), 100);
    /// # Ok(()) }
    /// ```
    pub async fn schedule_batch<'c, E>(
        self,
        executor: E,
        tasks: &[NewTask],
    ) -> Result<Vec<Scheduled>, Error>
    where
        E: Executor<'c, Database = Postgres>,
    {
        match ops::schedule_batch(self.queue, tasks)? {
            Some(op) => ops::read_batch(&many(executor, op).await?),
            None => Ok(Vec::new()),
        }
    }

    /// Moves the due time of `key`'s pending task in place, as
    /// [`Queue::reschedule`] does (same task, no `Replaced` record); true
    /// iff a pending task was moved.
    ///
    /// # Errors
    ///
    /// Bad input as [`Queue::reschedule`]; [`Error::Sqlx`] if the
    /// statement fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use timerpool_pg::{Due, Queue};
    /// # async fn f(pool: timerpool_pg::sqlx::PgPool, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// let moved = offers.sqlx().reschedule(&pool, "trip-42", Due::After(Duration::from_secs(60))).await?;
    /// # let _ = moved; Ok(()) }
    /// ```
    pub async fn reschedule<'c, E>(self, executor: E, key: &str, due: Due) -> Result<bool, Error>
    where
        E: Executor<'c, Database = Postgres>,
    {
        ops::read_bool(&one(executor, ops::reschedule(self.queue, key, due)?).await?)
    }

    /// Cancels `key`'s pending task, as [`Queue::cancel`] does: true iff
    /// it was pending, and then it never runs.
    ///
    /// # Errors
    ///
    /// Bad input as [`Queue::cancel`]; [`Error::Sqlx`] if the statement
    /// fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::Queue;
    /// # async fn f(pool: timerpool_pg::sqlx::PgPool, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// if offers.sqlx().cancel(&pool, "trip-42").await? {
    ///     println!("the timeout will not run");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn cancel<'c, E>(self, executor: E, key: &str) -> Result<bool, Error>
    where
        E: Executor<'c, Database = Postgres>,
    {
        ops::read_bool(&one(executor, ops::cancel(self.queue, key)?).await?)
    }

    /// The due time of `key`'s pending task on the database's clock, as
    /// [`Queue::due_of`] gives it; `None` if it has none.
    ///
    /// # Errors
    ///
    /// As [`cancel`](SqlxQueue::cancel).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::Queue;
    /// # async fn f(pool: timerpool_pg::sqlx::PgPool, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// let due = offers.sqlx().due_of(&pool, "trip-42").await?;
    /// # let _ = due; Ok(()) }
    /// ```
    pub async fn due_of<'c, E>(self, executor: E, key: &str) -> Result<Option<SystemTime>, Error>
    where
        E: Executor<'c, Database = Postgres>,
    {
        ops::read_due(&one(executor, ops::due_of(self.queue, key)?).await?)
    }

    /// Every recorded task of `key`, oldest first, as [`Queue::history`]
    /// gives them.
    ///
    /// # Errors
    ///
    /// As [`cancel`](SqlxQueue::cancel).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::Queue;
    /// # async fn f(pool: timerpool_pg::sqlx::PgPool, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// for record in offers.sqlx().history(&pool, "trip-42").await? {
    ///     println!("{} {:?} due {:?}", record.id, record.state, record.due);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn history<'c, E>(self, executor: E, key: &str) -> Result<Vec<Record>, Error>
    where
        E: Executor<'c, Database = Postgres>,
    {
        ops::read_history(&many(executor, ops::history(self.queue, key)?).await?)
    }
}

/// `op` as an sqlx query with its values bound, kept in sqlx's statement
/// cache of each connection.
fn query<'a>(op: Op<'a>) -> Query<'a, Postgres, PgArguments> {
    let time = |t: SystemTime| DateTime::<Utc>::from(t);
    op.args
        .into_iter()
        .fold(sqlx::query(op.sql).persistent(true), |q, arg| match arg {
            Arg::Text(v) => q.bind(v),
            Arg::Int4(v) => q.bind(v),
            Arg::Int8(v) => q.bind(v),
            Arg::Time(v) => q.bind(v.map(time)),
            Arg::Bytea(v) => q.bind(v),
            Arg::TextArray(v) => q.bind(v),
            Arg::Int4Array(v) => q.bind(v),
            Arg::Int8Array(v) => q.bind(v),
            Arg::TimeArray(v) => q.bind(v.into_iter().map(|t| t.map(time)).collect::<Vec<_>>()),
            Arg::ByteaArray(v) => q.bind(v),
        })
}

/// Sends a one-row operation.
async fn one<'c, E>(executor: E, op: Op<'_>) -> Result<PgRow, Error>
where
    E: Executor<'c, Database = Postgres>,
{
    Ok(query(op).fetch_one(executor).await?)
}

/// Sends an operation of any number of rows.
async fn many<'c, E>(executor: E, op: Op<'_>) -> Result<Vec<PgRow>, Error>
where
    E: Executor<'c, Database = Postgres>,
{
    Ok(query(op).fetch_all(executor).await?)
}

impl Row for PgRow {
    fn int8(&self, i: usize) -> Result<i64, Error> {
        Ok(sqlx::Row::try_get(self, i)?)
    }
    fn int4(&self, i: usize) -> Result<i32, Error> {
        Ok(sqlx::Row::try_get(self, i)?)
    }
    fn boolean(&self, i: usize) -> Result<bool, Error> {
        Ok(sqlx::Row::try_get(self, i)?)
    }
    fn text(&self, i: usize) -> Result<Option<String>, Error> {
        Ok(sqlx::Row::try_get(self, i)?)
    }
    fn time(&self, i: usize) -> Result<Option<SystemTime>, Error> {
        let t: Option<DateTime<Utc>> = sqlx::Row::try_get(self, i)?;
        Ok(t.map(SystemTime::from))
    }
}

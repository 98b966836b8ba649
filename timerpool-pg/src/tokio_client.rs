//! The queue's client operations from tokio-postgres: the statements of
//! [`ops`](crate::ops), sent typed through any `GenericClient`.

use crate::ops::{self, Arg, Op};
use crate::{Due, Error, NewTask, Queue, Record, Scheduled};
use std::time::SystemTime;
use tokio_postgres::{GenericClient, Row};

impl Queue {
    /// This queue's operations for tokio-postgres: [`TokioPostgresQueue`]
    /// takes any `tokio_postgres::GenericClient` (a `Client` or a
    /// `Transaction`).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use timerpool_pg::tokio_postgres::{self, NoTls};
    /// use timerpool_pg::{NewTask, Queue};
    ///
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let (client, connection) = tokio_postgres::connect("postgres://postgres@127.0.0.1/test", NoTls).await?;
    /// tokio::spawn(connection);
    /// let offers = Queue::new("timerpool", "offers")?;
    /// offers.tokio_postgres().schedule(&client, &NewTask::new("trip-42", "redispatch")).await?;
    /// # Ok(()) }
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
    pub fn tokio_postgres(&self) -> TokioPostgresQueue<'_> {
        TokioPostgresQueue { queue: self }
    }
}

/// A [`Queue`]'s client operations through tokio-postgres, from
/// [`Queue::tokio_postgres`]: the same statements, checks and results as
/// the synchronous methods of [`Queue`], awaited.
///
/// Every operation takes `&C` for any `C: tokio_postgres::GenericClient`:
/// a `Client` (the statement commits on its own) or the caller's
/// `Transaction`, where the task commits or rolls back with the caller's
/// rows and its notification reaches the nodes at commit. Each is one
/// statement sent with typed parameters (`query_typed`): one round trip,
/// no prepared statement to keep per connection; the statements are calls
/// of the functions the schema installs, whose own statements PostgreSQL
/// plans once per session.
///
/// Errors from the database come as [`Error::Db`] (tokio-postgres's error
/// is the one the `postgres` driver re-exports); bad input is refused
/// before anything is sent, as by [`Queue::schedule`].
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use timerpool_pg::tokio_postgres::{self, NoTls};
/// use timerpool_pg::{Due, NewTask, Queue};
///
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let (mut client, connection) = tokio_postgres::connect("postgres://postgres@127.0.0.1/test", NoTls).await?;
/// tokio::spawn(connection);
/// // The schema is installed by the nodes when they start (or `Queue::install`).
/// let offers = Queue::new("timerpool", "offers")?;
///
/// let tx = client.transaction().await?;
/// tx.execute("INSERT INTO trips (id) VALUES (42)", &[]).await?;
/// let task = NewTask::new("trip-42", "redispatch").after(Duration::from_secs(15));
/// let s = offers.tokio_postgres().schedule(&tx, &task).await?;
/// tx.commit().await?; // the trip and its timeout commit together
///
/// assert!(offers.tokio_postgres().reschedule(&client, "trip-42", Due::After(Duration::from_secs(30))).await?);
/// assert_eq!(offers.tokio_postgres().history(&client, "trip-42").await?[0].id, s.id);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
pub struct TokioPostgresQueue<'q> {
    /// The queue whose statements are sent.
    queue: &'q Queue,
}

impl TokioPostgresQueue<'_> {
    /// Schedules `task` as [`Queue::schedule`] does: inserts it, or
    /// atomically replaces the key's pending task and says so.
    ///
    /// # Errors
    ///
    /// Bad input as [`Queue::schedule`], before anything is sent;
    /// [`Error::Db`] if the statement fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::{NewTask, Queue};
    /// # async fn f(client: &mut timerpool_pg::tokio_postgres::Client, offers: Queue) -> Result<(), Box<dyn std::error::Error>> {
    /// let tx = client.transaction().await?;
    /// let s = offers.tokio_postgres().schedule(&tx, &NewTask::new("trip-42", "redispatch")).await?;
    /// tx.commit().await?;
    /// println!("task {} due at {:?}, replaced: {}", s.id, s.due, s.replaced);
    /// # Ok(()) }
    /// ```
    pub async fn schedule<C: GenericClient>(
        self,
        client: &C,
        task: &NewTask,
    ) -> Result<Scheduled, Error> {
        let p = task.params()?;
        let row = one(client, ops::schedule(self.queue, &p)).await?;
        ops::read_scheduled(&row, p.key)
    }

    /// Schedules many tasks in one statement, as
    /// [`Queue::schedule_batch`] does; results in no particular order.
    ///
    /// # Errors
    ///
    /// As [`schedule`](TokioPostgresQueue::schedule), and
    /// [`Error::DuplicateKeyInBatch`]; nothing is scheduled when any task
    /// is refused.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::{NewTask, Queue};
    /// # async fn f(client: &timerpool_pg::tokio_postgres::Client, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// let tasks: Vec<NewTask> = (0..100).map(|i| NewTask::new(format!("trip-{i}"), "redispatch")).collect();
    /// assert_eq!(offers.tokio_postgres().schedule_batch(client, &tasks).await?.len(), 100);
    /// # Ok(()) }
    /// ```
    pub async fn schedule_batch<C: GenericClient>(
        self,
        client: &C,
        tasks: &[NewTask],
    ) -> Result<Vec<Scheduled>, Error> {
        match ops::schedule_batch(self.queue, tasks)? {
            Some(op) => ops::read_batch(&many(client, op).await?),
            None => Ok(Vec::new()),
        }
    }

    /// Moves the due time of `key`'s pending task in place, as
    /// [`Queue::reschedule`] does (same task, no `Replaced` record); true
    /// iff a pending task was moved.
    ///
    /// # Errors
    ///
    /// Bad input as [`Queue::reschedule`]; [`Error::Db`] if the statement
    /// fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use timerpool_pg::{Due, Queue};
    /// # async fn f(client: &timerpool_pg::tokio_postgres::Client, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// let moved = offers.tokio_postgres().reschedule(client, "trip-42", Due::After(Duration::from_secs(60))).await?;
    /// # let _ = moved; Ok(()) }
    /// ```
    pub async fn reschedule<C: GenericClient>(
        self,
        client: &C,
        key: &str,
        due: Due,
    ) -> Result<bool, Error> {
        ops::read_bool(&one(client, ops::reschedule(self.queue, key, due)?).await?)
    }

    /// Cancels `key`'s pending task, as [`Queue::cancel`] does: true iff
    /// it was pending, and then it never runs.
    ///
    /// # Errors
    ///
    /// Bad input as [`Queue::cancel`]; [`Error::Db`] if the statement
    /// fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::Queue;
    /// # async fn f(client: &timerpool_pg::tokio_postgres::Client, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// if offers.tokio_postgres().cancel(client, "trip-42").await? {
    ///     println!("the timeout will not run");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn cancel<C: GenericClient>(self, client: &C, key: &str) -> Result<bool, Error> {
        ops::read_bool(&one(client, ops::cancel(self.queue, key)?).await?)
    }

    /// The due time of `key`'s pending task on the database's clock, as
    /// [`Queue::due_of`] gives it; `None` if it has none.
    ///
    /// # Errors
    ///
    /// As [`cancel`](TokioPostgresQueue::cancel).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::Queue;
    /// # async fn f(client: &timerpool_pg::tokio_postgres::Client, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// let due = offers.tokio_postgres().due_of(client, "trip-42").await?;
    /// # let _ = due; Ok(()) }
    /// ```
    pub async fn due_of<C: GenericClient>(
        self,
        client: &C,
        key: &str,
    ) -> Result<Option<SystemTime>, Error> {
        ops::read_due(&one(client, ops::due_of(self.queue, key)?).await?)
    }

    /// Every recorded task of `key`, oldest first, as [`Queue::history`]
    /// gives them.
    ///
    /// # Errors
    ///
    /// As [`cancel`](TokioPostgresQueue::cancel).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use timerpool_pg::Queue;
    /// # async fn f(client: &timerpool_pg::tokio_postgres::Client, offers: Queue) -> Result<(), timerpool_pg::Error> {
    /// for record in offers.tokio_postgres().history(client, "trip-42").await? {
    ///     println!("{} {:?} due {:?}", record.id, record.state, record.due);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn history<C: GenericClient>(
        self,
        client: &C,
        key: &str,
    ) -> Result<Vec<Record>, Error> {
        ops::read_history(&many(client, ops::history(self.queue, key)?).await?)
    }
}

/// Sends a one-row operation.
async fn one<C: GenericClient>(client: &C, op: Op<'_>) -> Result<Row, Error> {
    let args: Vec<_> = op.args.iter().map(Arg::typed).collect();
    Ok(client.query_typed_one(op.sql, &args).await?)
}

/// Sends an operation of any number of rows.
async fn many<C: GenericClient>(client: &C, op: Op<'_>) -> Result<Vec<Row>, Error> {
    let args: Vec<_> = op.args.iter().map(Arg::typed).collect();
    Ok(client.query_typed(op.sql, &args).await?)
}

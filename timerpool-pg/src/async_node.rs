//! A node whose handlers are `async fn`s (feature `tokio`).
//!
//! The claim, lease, heartbeat and record side is the blocking node's:
//! the same leader and recorder threads and connections (`node.rs`). Only
//! running a claimed job differs: instead of worker threads, one
//! dispatcher thread spawns each job's future on a tokio runtime, at most
//! `slots` at once, each bounded by the execution timeout, and forwards
//! each result to the recorder. So there is one protocol, not two.

use crate::names::check_name;
use crate::node::{spawn_thread, Node, NodeBuilder, Spawned};
use crate::recorder::{Done, Msg, Verdict};
use crate::shared::{HandlerResult, Job, NodeStats, Shared};
use crate::worker::{panic_message, release};
use crate::{Error, Queue};
use crossbeam_channel::{select, unbounded, Receiver, Sender};
use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant, SystemTime};
use tokio::runtime::{Handle, Runtime};

/// A handler's future, boxed.
type BoxFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;

/// A registered async handler.
type AsyncHandler = Arc<dyn Fn(Job) -> BoxFuture + Send + Sync>;

/// How often a busy or stopping dispatcher looks at the stop flag.
const TICK: Duration = Duration::from_millis(50);

/// Configures and starts an [`AsyncNode`]. The settings the blocking
/// [`NodeBuilder`] has mean the same here; `slots`, `runtime` and
/// `execution_timeout` are the async node's own.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use timerpool_pg::AsyncNode;
///
/// # async fn notify_rider(_key: &str) -> Result<(), std::io::Error> { Ok(()) }
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let config = "postgres://postgres@127.0.0.1/test".parse()?;
///     // Started inside a runtime: the handlers run on it.
///     let node = AsyncNode::builder(config, "offers")
///         .slots(16)
///         .execution_timeout(Duration::from_secs(30))
///         .handler("redispatch", |job| async move {
///             notify_rider(job.key()).await?;
///             Ok(())
///         })
///         .start()?;
///     // ... schedule with node.queue() from any process ...
///     node.shutdown().await;
///     Ok(())
/// }
/// ```
pub struct AsyncNodeBuilder {
    inner: NodeBuilder,
    handlers: HashMap<String, AsyncHandler>,
    slots: usize,
    runtime: Option<Handle>,
    execution_timeout: Duration,
}

impl fmt::Debug for AsyncNodeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncNodeBuilder")
            .field("inner", &self.inner)
            .field("slots", &self.slots)
            .field("execution_timeout", &self.execution_timeout)
            .finish_non_exhaustive()
    }
}

impl AsyncNodeBuilder {
    /// The schema holding the tables (default `"timerpool"`), as
    /// [`NodeBuilder::schema`].
    pub fn schema(mut self, schema: &str) -> Self {
        self.inner = self.inner.schema(schema);
        self
    }

    /// Handlers that may run at once (default 16). A slot is taken from
    /// the moment a handler starts until its result is handed to the
    /// recorder.
    ///
    /// ```no_run
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// let builder = timerpool_pg::AsyncNode::builder(config, "offers").slots(64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn slots(mut self, n: usize) -> Self {
        self.slots = n;
        self
    }

    /// The most attempts the node holds claimed and unfinished at once
    /// (default: 4 × slots, at least 16), as [`NodeBuilder::prefetch`].
    pub fn prefetch(mut self, n: usize) -> Self {
        self.inner = self.inner.prefetch(n);
        self
    }

    /// How long a claim stays this node's without a renewal (default
    /// 30 s), as [`NodeBuilder::lease`].
    pub fn lease(mut self, lease: Duration) -> Self {
        self.inner = self.inner.lease(lease);
        self
    }

    /// How often the node renews its leases (default: a third of the
    /// lease), as [`NodeBuilder::heartbeat`].
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.inner = self.inner.heartbeat(every);
        self
    }

    /// The longest the leader waits without asking the database (default
    /// 30 s), and the period of the node's calendar top-up, as
    /// [`NodeBuilder::safety_recheck`]. An async handler has no
    /// [`tick_handler`](crate::tick_handler) wrapper, so this top-up is what
    /// enqueues each next tick of a calendar schedule whose ticks only
    /// async nodes run: keep the period shorter than the schedule's.
    pub fn safety_recheck(mut self, every: Duration) -> Self {
        self.inner = self.inner.safety_recheck(every);
        self
    }

    /// How long finished tasks' records are kept (default 7 days), as
    /// [`NodeBuilder::retention`].
    pub fn retention(mut self, keep: Duration) -> Self {
        self.inner = self.inner.retention(keep);
        self
    }

    /// The wait before the first retry of a failed attempt (default 1 s,
    /// doubling), as [`NodeBuilder::retry_backoff`]. A timed-out attempt
    /// is a failed one.
    pub fn retry_backoff(mut self, first: Duration) -> Self {
        self.inner = self.inner.retry_backoff(first);
        self
    }

    /// `statement_timeout` of the node's sessions (default 10 s), as
    /// [`NodeBuilder::statement_timeout`].
    pub fn statement_timeout(mut self, limit: Duration) -> Self {
        self.inner = self.inner.statement_timeout(limit);
        self
    }

    /// The longest one attempt's handler may run (default 5 minutes). A
    /// handler still running then is dropped at its next `.await` and the
    /// attempt fails with a message saying so: retried after the backoff
    /// while attempts remain, else recorded `failed`. The lease is kept
    /// (heartbeats go on) until that result is written.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// let builder = timerpool_pg::AsyncNode::builder(config, "offers")
    ///     .execution_timeout(Duration::from_secs(10));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn execution_timeout(mut self, limit: Duration) -> Self {
        self.execution_timeout = limit;
        self
    }

    /// The runtime the handlers run on. Without it, [`start`] takes the
    /// runtime it is called in, and outside any runtime the node starts
    /// one of its own (multi-threaded, at most one thread per slot and
    /// per CPU), shut down with the node. The runtime must have its time
    /// driver enabled (`enable_all` or `enable_time`; `#[tokio::main]`
    /// does) and must outlive the node: a handler the runtime drops
    /// unfinished is a failed attempt.
    ///
    /// [`start`]: AsyncNodeBuilder::start
    ///
    /// ```no_run
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// let runtime = tokio::runtime::Runtime::new()?;
    /// let node = timerpool_pg::AsyncNode::builder(config, "offers")
    ///     .runtime(runtime.handle().clone())
    ///     .handler("h", |_job| async { Ok(()) })
    ///     .start()?;
    /// drop(node); // shuts down and waits, as a synchronous program may
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn runtime(mut self, handle: Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// Runs tasks whose handler name is `name` with the future `f`
    /// returns. `Err`, a panic (in `f` or in the future) or the execution
    /// timeout fail the attempt; a task whose handler is not registered
    /// fails its attempt with a message naming the handler and the node.
    ///
    /// ```no_run
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// let builder = timerpool_pg::AsyncNode::builder(config, "offers")
    ///     .handler("redispatch", |job| async move {
    ///         println!("offer {} timed out (attempt {})", job.key(), job.attempt());
    ///         Ok(())
    ///     });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn handler<F, Fut>(mut self, name: &str, f: F) -> Self
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        let boxed: AsyncHandler = Arc::new(move |job| Box::pin(f(job)) as BoxFuture);
        self.handlers.insert(name.to_string(), boxed);
        self
    }

    /// Checks the settings, connects, installs or migrates the schema and
    /// starts the node. It blocks while it connects (a few milliseconds
    /// on a reachable server, the connect timeout at most); called inside
    /// a runtime it does so on a thread of its own, as the synchronous
    /// driver it uses must not run on a runtime's thread.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] or [`Error::InvalidName`] for bad settings
    /// (also a runtime without its time driver), [`Error::Unreachable`] if
    /// the database cannot be reached, [`Error::Db`] if the schema cannot
    /// be installed, [`Error::Spawn`] if a thread or the node's own
    /// runtime cannot start.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// // A synchronous program: the node owns its runtime.
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// let node = timerpool_pg::AsyncNode::builder(config, "offers")
    ///     .handler("h", |_job| async { Ok(()) })
    ///     .start()?;
    /// println!("node {} started", node.id());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(self) -> Result<AsyncNode, Error> {
        let bad = |why: String| Err(Error::InvalidConfig(why));
        if self.slots == 0 || self.slots > 1024 {
            return bad(format!("slots must be 1..=1024, got {}", self.slots));
        }
        if self.execution_timeout.is_zero() {
            return bad("the execution timeout must be positive".into());
        }
        for name in self.handlers.keys() {
            check_name("handler", name)?;
        }
        let (handle, owned) = match self.runtime {
            Some(h) => (h, None),
            None => match Handle::try_current() {
                Ok(h) => (h, None),
                Err(_) => {
                    let rt = own_runtime(self.slots)?;
                    (rt.handle().clone(), Some(rt))
                }
            },
        };
        timers_enabled(&handle)?;
        let inner = self.inner.workers(self.slots);
        let prepared = if Handle::try_current().is_ok() {
            // The synchronous driver panics on a thread inside a runtime.
            match thread::Builder::new().spawn(move || inner.prepare()) {
                Ok(t) => t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(e) => Err(Error::Spawn(e.to_string())),
            }
        } else {
            inner.prepare()
        };
        let (shared, leader, rec) = prepared?;
        let dispatch = Dispatch {
            handlers: self.handlers,
            handle,
            slots: self.slots,
            limit: self.execution_timeout,
        };
        let runners = move |shared: &Arc<Shared>, jobs, done| -> Spawned {
            let s = shared.clone();
            let run = Box::new(move || dispatch.run(&s, jobs, done));
            Ok(vec![spawn_thread("timerpool-pg-dispatch".into(), run)?])
        };
        let node = Node::spawn(shared, leader, rec, runners)?;
        Ok(AsyncNode {
            node: Some(node),
            runtime: owned,
        })
    }
}

/// The node's own runtime, for callers outside any runtime.
fn own_runtime(slots: usize) -> Result<Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(slots.min(num_cpus::get()).max(1))
        .thread_name("timerpool-pg-async")
        .enable_all()
        .build()
        .map_err(|e| Error::Spawn(format!("the node's tokio runtime: {e}")))
}

/// The execution timeout needs the runtime's timers: refuse a runtime
/// without them at start rather than fail every attempt later.
fn timers_enabled(handle: &Handle) -> Result<(), Error> {
    let _in = handle.enter();
    // Creating a timer panics when the runtime has no time driver.
    match catch_unwind(|| drop(tokio::time::sleep(Duration::ZERO))) {
        Ok(()) => Ok(()),
        Err(_) => Err(Error::InvalidConfig(
            "the tokio runtime has no time driver (build it with enable_all or enable_time)".into(),
        )),
    }
}

/// A running node whose handlers are `async fn`s run on a tokio runtime
/// (feature `tokio`). Claims, leases, heartbeats, fencing, retries, expiry
/// and outcomes are the blocking [`Node`]'s: the same leader and recorder
/// threads and two database connections; handlers run as tasks on the
/// runtime, at most [`slots`](AsyncNodeBuilder::slots) at once, each bounded
/// by the [execution timeout](AsyncNodeBuilder::execution_timeout).
///
/// Stop it with [`shutdown`](AsyncNode::shutdown)`.await` in async code.
/// Dropping it shuts it down too, blocking the dropping thread until the
/// handlers in flight end: from a runtime's thread, that thread cannot
/// drive them meanwhile (on a current-thread runtime nothing can), so drop
/// it only in synchronous code.
///
/// # Examples
///
/// ```no_run
/// use timerpool_pg::{AsyncNode, NewTask};
///
/// #[tokio::main]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let config: timerpool_pg::postgres::Config = "postgres://postgres@127.0.0.1/test".parse()?;
///     let node = AsyncNode::builder(config, "offers")
///         .handler("redispatch", |job| async move {
///             tokio::time::sleep(std::time::Duration::from_millis(5)).await;
///             println!("re-dispatch {}", job.key());
///             Ok(())
///         })
///         .start()?;
///     println!("{:?}", node.stats());
///     node.shutdown().await;
///     Ok(())
/// }
/// ```
pub struct AsyncNode {
    /// The leader, dispatcher and recorder; `None` once shut down.
    node: Option<Node>,
    /// The runtime the node started for itself, if it did.
    runtime: Option<Runtime>,
}

impl fmt::Debug for AsyncNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncNode")
            .field("node", &self.node)
            .field("owns_runtime", &self.runtime.is_some())
            .finish()
    }
}

impl AsyncNode {
    /// A builder for an async node of `queue` on the database `config`
    /// names.
    ///
    /// ```no_run
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// let builder = timerpool_pg::AsyncNode::builder(config, "offers").schema("timers");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(config: postgres::Config, queue: &str) -> AsyncNodeBuilder {
        AsyncNodeBuilder {
            inner: Node::builder(config, queue),
            handlers: HashMap::new(),
            slots: 16,
            runtime: None,
            execution_timeout: Duration::from_secs(300),
        }
    }

    fn node(&self) -> &Node {
        self.node.as_ref().expect("a node is running until dropped")
    }

    /// This node's id: the owner recorded on the tasks it claims.
    ///
    /// ```no_run
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// # let node = timerpool_pg::AsyncNode::builder(config, "q").start()?;
    /// println!("serving as {}", node.id());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn id(&self) -> &str {
        self.node().id()
    }

    /// The queue this node serves, for scheduling and reading records.
    ///
    /// ```no_run
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// # let node = timerpool_pg::AsyncNode::builder(config, "q").start()?;
    /// assert_eq!(node.queue().name(), "q");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn queue(&self) -> &Queue {
        self.node().queue()
    }

    /// The node's counters, as [`Node::stats`].
    ///
    /// ```no_run
    /// # let config = "postgres://postgres@127.0.0.1/test".parse()?;
    /// # let node = timerpool_pg::AsyncNode::builder(config, "q").start()?;
    /// let s = node.stats();
    /// println!("{} started, {} re-runs, {} fenced", s.started, s.reruns, s.fenced);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> NodeStats {
        self.node().stats()
    }

    /// Stops claiming, lets the handlers in flight and the attempts
    /// already claimed run (for at most the execution timeout from now),
    /// records every result and joins the node's threads, without
    /// blocking the runtime it is awaited on. Attempts still unfinished
    /// at that bound are left to lease expiry: another node re-runs them.
    /// Pending tasks stay in the database for other nodes.
    ///
    /// ```no_run
    /// # async fn f(node: timerpool_pg::AsyncNode) {
    /// node.shutdown().await;
    /// # }
    /// ```
    pub async fn shutdown(self) {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        // The joins block: they run on a thread of their own. If it cannot
        // start, the closure (and the node with it) is dropped here, which
        // shuts down in place.
        let joined = thread::Builder::new()
            .name("timerpool-pg-shutdown".into())
            .spawn(move || {
                drop(self);
                let _ = tx.send(());
            });
        if joined.is_ok() {
            // An error means the thread ended without sending: also done.
            let _ = rx.await;
        }
    }
}

impl Drop for AsyncNode {
    fn drop(&mut self) {
        if let Some(mut node) = self.node.take() {
            node.stop();
        }
        if let Some(rt) = self.runtime.take() {
            // Every handler has ended; this does not wait, so it may run
            // inside another runtime too.
            rt.shutdown_background();
        }
    }
}

/// The dispatcher: takes claimed jobs from the leader's channel, spawns
/// each on the runtime while a slot is free, and forwards each result to
/// the recorder.
struct Dispatch {
    handlers: HashMap<String, AsyncHandler>,
    handle: Handle,
    slots: usize,
    limit: Duration,
}

impl Dispatch {
    /// Runs until the leader is gone and every started handler reported,
    /// or, once stopping, the execution timeout has passed.
    fn run(self, shared: &Shared, jobs: Receiver<Job>, done: Sender<Msg>) {
        let (report, results) = unbounded::<Done>();
        let mut running = 0usize;
        let mut jobs_open = true;
        let mut give_up: Option<Instant> = None;
        let forward = |d: Done| {
            // The recorder outlives the dispatcher; an error means it is gone.
            let _ = done.send(Msg::Done(d));
            release(shared);
        };
        loop {
            if give_up.is_none() && shared.stopping() {
                give_up = Some(Instant::now() + self.limit);
            }
            if !jobs_open && running == 0 {
                return;
            }
            if give_up.is_some_and(|t| Instant::now() >= t) {
                // Left unrecorded: the leases expire and others re-run them.
                return;
            }
            let take = jobs_open && running < self.slots;
            if take && running == 0 && give_up.is_none() {
                // Idle: the leader's channel closing at stop wakes this.
                match jobs.recv() {
                    Ok(job) => running += self.start(shared, job, &report, &done),
                    Err(_) => jobs_open = false,
                }
            } else if take {
                select! {
                    recv(jobs) -> job => match job {
                        Ok(job) => running += self.start(shared, job, &report, &done),
                        Err(_) => jobs_open = false,
                    },
                    recv(results) -> d => {
                        // This holds a sender, so the channel stays open.
                        if let Ok(d) = d {
                            forward(d);
                            running -= 1;
                        }
                    },
                    default(TICK) => {},
                }
            } else if let Ok(d) = results.recv_timeout(TICK) {
                forward(d);
                running -= 1;
            }
        }
    }

    /// Starts one attempt; 1 if it now holds a slot, 0 if it was decided
    /// at once (no such handler).
    fn start(&self, shared: &Shared, job: Job, report: &Sender<Done>, done: &Sender<Msg>) -> usize {
        let started = job.claimed + job.received.elapsed();
        shared.counters.started.fetch_add(1, Ordering::Relaxed);
        if job.attempt > 1 {
            shared.counters.reruns.fetch_add(1, Ordering::Relaxed);
        }
        let Some(handler) = self.handlers.get(&job.handler) else {
            let why = format!(
                "no handler named {:?} is registered on node {}",
                job.handler, shared.cfg.id
            );
            let d = Done::ran(&job, Verdict::Failed(why), started, started);
            let _ = done.send(Msg::Done(d));
            release(shared);
            return 0;
        };
        let report = Report {
            job,
            to: report.clone(),
            started,
            sent: false,
        };
        // If the runtime has shut down, the task is dropped unpolled and
        // its report says so.
        drop(
            self.handle
                .spawn(attempt(handler.clone(), report, self.limit)),
        );
        1
    }
}

/// Runs one attempt's handler under the execution timeout with panics
/// caught, and reports how it went.
async fn attempt(handler: AsyncHandler, mut report: Report, limit: Duration) {
    report.started = report.job.claimed + report.job.received.elapsed();
    let job = report.job.clone();
    let verdict = match catch_unwind(AssertUnwindSafe(|| handler(job))) {
        Err(panic) => panicked(&*panic),
        // The handler's future is dropped when `timeout` gives up on it,
        // before the verdict is sent.
        Ok(fut) => match tokio::time::timeout(limit, CatchUnwind(fut)).await {
            Ok(Ok(Ok(()))) => Verdict::Completed,
            Ok(Ok(Err(e))) => Verdict::Failed(e.to_string()),
            Ok(Err(panic)) => panicked(&*panic),
            Err(_) => Verdict::Failed(format!(
                "timed out: the handler ran longer than the execution timeout ({limit:?}) \
                 and was dropped"
            )),
        },
    };
    report.send(verdict);
}

fn panicked(panic: &(dyn Any + Send)) -> Verdict {
    Verdict::Failed(format!("panicked: {}", panic_message(panic)))
}

/// One attempt's result on its way to the dispatcher. Dropped unsent (the
/// runtime shut down and dropped the task), it reports a failed attempt,
/// so no attempt is left holding a slot.
struct Report {
    job: Job,
    to: Sender<Done>,
    started: SystemTime,
    sent: bool,
}

impl Report {
    fn send(&mut self, verdict: Verdict) {
        self.sent = true;
        let finished = self.job.claimed + self.job.received.elapsed();
        // An error means the dispatcher gave up at shutdown: the lease
        // expires and another node re-runs the task.
        let _ = self
            .to
            .send(Done::ran(&self.job, verdict, self.started, finished));
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        if !self.sent {
            let why = "the tokio runtime shut down before the handler finished";
            self.send(Verdict::Failed(why.into()));
        }
    }
}

/// A handler's future with a panic in any of its polls caught and
/// returned, as the blocking node's `catch_unwind` does for a call.
struct CatchUnwind(BoxFuture);

impl Future for CatchUnwind {
    type Output = Result<HandlerResult, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = &mut self.0;
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(r)) => Poll::Ready(Ok(r)),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

//! A node: its builder and its handle. The threads are the leader
//! (`leader.rs`), the workers (`worker.rs`) and the recorder
//! (`recorder.rs`), sharing `shared.rs`; `docs/durable.md` states the
//! protocol.

use crate::connect::{harden, Connector};
use crate::names::check_name;
use crate::shared::{Counters, Handler, HandlerResult, Job, NodeStats, Settings, Shared};
use crate::{leader, recorder, worker, Error, Queue};
use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime};

/// Configures and starts a [`Node`].
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use timerpool_pg::Node;
///
/// let config = "postgres://postgres@127.0.0.1/test".parse()?;
/// let node = Node::builder(config, "offers")
///     .workers(4)
///     .handler("redispatch", |job| {
///         println!("offer {} timed out", job.key());
///         Ok(())
///     })
///     .start()?;
/// // ... schedule with node.queue() from any process ...
/// node.shutdown();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct NodeBuilder {
    config: postgres::Config,
    schema: String,
    queue: String,
    workers: usize,
    prefetch: Option<usize>,
    lease: Duration,
    heartbeat: Option<Duration>,
    safety: Duration,
    retention: Duration,
    retry_backoff: Duration,
    statement_timeout: Duration,
    handlers: HashMap<String, Handler>,
}

impl fmt::Debug for NodeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeBuilder")
            .field("schema", &self.schema)
            .field("queue", &self.queue)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl NodeBuilder {
    fn new(config: postgres::Config, queue: &str) -> NodeBuilder {
        NodeBuilder {
            config,
            schema: "timerpool".to_string(),
            queue: queue.to_string(),
            workers: num_cpus::get(),
            prefetch: None,
            lease: Duration::from_secs(30),
            heartbeat: None,
            safety: Duration::from_secs(30),
            retention: Duration::from_secs(7 * 86_400),
            retry_backoff: Duration::from_secs(1),
            statement_timeout: Duration::from_secs(10),
            handlers: HashMap::new(),
        }
    }

    /// The schema holding the tables (default `"timerpool"`).
    pub fn schema(mut self, schema: &str) -> NodeBuilder {
        self.schema = schema.to_string();
        self
    }

    /// Worker threads that run handlers (default: the number of CPUs).
    pub fn workers(mut self, n: usize) -> NodeBuilder {
        self.workers = n;
        self
    }

    /// The most attempts the node holds claimed and unfinished at once, and
    /// so the largest claim (default: 4 × workers, at least 16).
    pub fn prefetch(mut self, n: usize) -> NodeBuilder {
        self.prefetch = Some(n);
        self
    }

    /// How long a claim stays this node's without a renewal (default 30 s):
    /// after a crash, its tasks are taken over this long after the last
    /// heartbeat.
    pub fn lease(mut self, lease: Duration) -> NodeBuilder {
        self.lease = lease;
        self
    }

    /// How often the node renews its leases (default: a third of the lease).
    pub fn heartbeat(mut self, every: Duration) -> NodeBuilder {
        self.heartbeat = Some(every);
        self
    }

    /// The longest the leader waits without asking the database, covering
    /// lost notifications (default 30 s). A wait is also never longer than
    /// the lease, so a lease taken while this leader slept (claims send no
    /// notification) is seen before it can expire.
    ///
    /// It is also the period of the node's calendar top-up: when the node
    /// starts and then once per period, every calendar schedule of the
    /// queue ([`Queue::register_schedule`]) that has no live pending tick
    /// (its tick was cancelled, expired unrun, or its node died before
    /// enqueuing the next) gets its next one by its backfill policy. The
    /// check rides on that period's claim, in the same statement: when
    /// every schedule has its tick, or the queue has none, it costs no
    /// statement of its own.
    pub fn safety_recheck(mut self, every: Duration) -> NodeBuilder {
        self.safety = every;
        self
    }

    /// How long finished tasks' records are kept (default 7 days). The
    /// node removes them once they pass it, within
    /// `min(retention / 2, 60 s)` (within an hour for a result recorded
    /// late, with an older finish time).
    pub fn retention(mut self, keep: Duration) -> NodeBuilder {
        self.retention = keep;
        self
    }

    /// The wait before the first retry of a failed attempt, doubling per
    /// attempt up to 10 minutes (default 1 s).
    pub fn retry_backoff(mut self, first: Duration) -> NodeBuilder {
        self.retry_backoff = first;
        self
    }

    /// `statement_timeout` (and `lock_timeout`) of the node's sessions
    /// (default 10 s).
    pub fn statement_timeout(mut self, limit: Duration) -> NodeBuilder {
        self.statement_timeout = limit;
        self
    }

    /// Runs tasks whose handler name is `name` with `f`. A task whose
    /// handler is not registered fails its attempt with a message naming
    /// the handler and the node.
    pub fn handler<F>(mut self, name: &str, f: F) -> NodeBuilder
    where
        F: Fn(&Job) -> HandlerResult + Send + Sync + 'static,
    {
        self.handlers.insert(name.to_string(), Arc::new(f));
        self
    }

    /// Checks the settings, connects, installs or migrates the schema and
    /// starts the node's threads.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] or [`Error::InvalidName`] for bad settings,
    /// [`Error::Unreachable`] if the database cannot be reached,
    /// [`Error::Db`] if the schema cannot be installed, [`Error::Spawn`] if
    /// a thread cannot start.
    pub fn start(self) -> Result<Node, Error> {
        let (shared, leader, rec) = self.prepare()?;
        Node::spawn(shared, leader, rec, spawn_workers)
    }

    /// Everything [`start`](NodeBuilder::start) does before the threads
    /// start: checks, connections, schema. The node kinds differ only in
    /// how they run claimed jobs.
    pub(crate) fn prepare(self) -> Result<Prepared, Error> {
        let cfg = self.settings()?;
        for name in self.handlers.keys() {
            check_name("handler", name)?;
        }
        let config = harden(self.config, &format!("timerpool node {}", cfg.id));
        let leader_conn = Connector {
            config: config.clone(),
            statement_timeout: self.statement_timeout,
            listen: vec![cfg.queue.channel().to_string(), cfg.wake_channel.clone()],
        };
        let recorder_conn = Connector {
            listen: Vec::new(),
            ..leader_conn.clone()
        };
        let mut rec_client = recorder_conn.first()?;
        cfg.queue.install(&mut rec_client)?;
        let lead_client = leader_conn.first()?;
        let shared = Arc::new(Shared {
            cfg,
            handlers: self.handlers,
            stop: AtomicU64::new(0),
            in_flight: Mutex::new(0),
            held: Mutex::new(HashSet::new()),
            room: Condvar::new(),
            counters: Counters::default(),
        });
        Ok((
            shared,
            (leader_conn, lead_client),
            (recorder_conn, rec_client),
        ))
    }

    fn settings(&self) -> Result<Settings, Error> {
        let bad = |why: String| Err(Error::InvalidConfig(why));
        let queue = Queue::new(&self.schema, &self.queue)?;
        if self.workers == 0 || self.workers > 1024 {
            return bad(format!("workers must be 1..=1024, got {}", self.workers));
        }
        let prefetch = self.prefetch.unwrap_or((self.workers * 4).max(16));
        if prefetch == 0 {
            return bad("prefetch must be positive".into());
        }
        let heartbeat = self.heartbeat.unwrap_or(self.lease / 3);
        if self.lease < Duration::from_millis(10) || heartbeat.is_zero() || heartbeat >= self.lease
        {
            return bad(format!(
                "need 0 < heartbeat ({heartbeat:?}) < lease ({:?}) and a lease of at least 10 ms",
                self.lease
            ));
        }
        if self.safety < Duration::from_millis(10) || self.statement_timeout.is_zero() {
            return bad("safety re-check must be at least 10 ms and the timeout positive".into());
        }
        let id = node_id();
        Ok(Settings {
            wake_channel: format!("timerpool_node_{id}"),
            id,
            queue,
            workers: self.workers,
            prefetch,
            lease: self.lease,
            heartbeat,
            safety: self.safety,
            retention: self.retention,
            purge_every: (self.retention / 2)
                .clamp(Duration::from_millis(10), Duration::from_secs(60)),
            retry_backoff: self.retry_backoff,
        })
    }
}

/// A fresh node id: 16 hex digits from a randomly seeded hasher, so a
/// restarted process never shares an id (and so a fence) with its past.
fn node_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{:016x}", h.finish())
}

/// What [`NodeBuilder::prepare`] hands to [`Node::spawn`]: the shared
/// state and the leader's and the recorder's connections.
pub(crate) type Prepared = (
    Arc<Shared>,
    (Connector, postgres::Client),
    (Connector, postgres::Client),
);

/// The threads that run claimed jobs, or why one could not start.
pub(crate) type Spawned = Result<Vec<thread::JoinHandle<()>>, Error>;

/// A named thread, its failure to start an [`Error::Spawn`].
pub(crate) fn spawn_thread(
    name: String,
    f: Box<dyn FnOnce() + Send>,
) -> Result<thread::JoinHandle<()>, Error> {
    thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|e| Error::Spawn(e.to_string()))
}

/// The blocking node's runners: `workers` threads, each running one
/// handler at a time.
fn spawn_workers(
    shared: &Arc<Shared>,
    jobs: Receiver<Job>,
    done: Sender<recorder::Msg>,
) -> Spawned {
    (0..shared.cfg.workers)
        .map(|i| {
            let (s, rx, tx) = (shared.clone(), jobs.clone(), done.clone());
            spawn_thread(
                format!("timerpool-pg-worker-{i}"),
                Box::new(move || worker::run(&s, rx, tx)),
            )
        })
        .collect()
}

/// A running node of a queue: one leader, its workers and a recorder, each
/// a thread, with two database connections (leader, recorder).
///
/// Dropping the node shuts it down as [`shutdown`](Node::shutdown) does.
pub struct Node {
    /// State the threads share.
    shared: Arc<Shared>,
    /// The recorder's inbox, for the stop message.
    control: Option<Sender<recorder::Msg>>,
    /// Leader, workers and recorder, joined at shutdown.
    threads: Vec<thread::JoinHandle<()>>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.shared.cfg.id)
            .field("queue", &self.shared.cfg.queue.name())
            .finish_non_exhaustive()
    }
}

impl Node {
    /// A builder for a node of `queue` on the database `config` names.
    pub fn builder(config: postgres::Config, queue: &str) -> NodeBuilder {
        NodeBuilder::new(config, queue)
    }

    /// Starts the recorder, then the job runners (`runners` spawns them:
    /// worker threads, or an async dispatcher), then the leader.
    pub(crate) fn spawn(
        shared: Arc<Shared>,
        leader: (Connector, postgres::Client),
        rec: (Connector, postgres::Client),
        runners: impl FnOnce(&Arc<Shared>, Receiver<Job>, Sender<recorder::Msg>) -> Spawned,
    ) -> Result<Node, Error> {
        let (job_tx, job_rx) = unbounded();
        let (done_tx, done_rx) = unbounded();
        let mut node = Node {
            shared: shared.clone(),
            control: Some(done_tx.clone()),
            threads: Vec::new(),
        };
        let s = shared.clone();
        node.threads.push(spawn_thread(
            "timerpool-pg-recorder".into(),
            Box::new(move || recorder::run(&s, rec.0, rec.1, done_rx)),
        )?);
        node.threads
            .extend(runners(&shared, job_rx, done_tx.clone())?);
        let s = shared.clone();
        node.threads.push(spawn_thread(
            "timerpool-pg-leader".into(),
            Box::new(move || leader::run(&s, leader.0, leader.1, job_tx, done_tx)),
        )?);
        Ok(node)
    }

    /// This node's id: the owner recorded on the tasks it claims.
    pub fn id(&self) -> &str {
        &self.shared.cfg.id
    }

    /// The queue this node serves, for scheduling and reading records.
    pub fn queue(&self) -> &Queue {
        &self.shared.cfg.queue
    }

    /// The node's counters.
    pub fn stats(&self) -> NodeStats {
        self.shared.counters.snapshot()
    }

    /// Stops claiming, runs what this node already claimed, records every
    /// result and joins the threads. Pending tasks stay in the database for
    /// other nodes. If the database is unreachable, results that cannot be
    /// recorded within one lease are left to lease expiry (re-run later).
    pub fn shutdown(mut self) {
        self.stop();
    }

    pub(crate) fn stop(&mut self) {
        self.shared.stop.store(1, Ordering::Release);
        {
            let _guard = self.shared.in_flight.lock();
            self.shared.room.notify_all();
        }
        if let Some(control) = self.control.take() {
            // Ignored if the recorder is gone: it is then already stopping.
            let _ = control.send(recorder::Msg::Stop);
        }
        // Leader first, then workers, then the recorder, which drains them.
        for t in self.threads.drain(..).rev() {
            // A panicked node thread has nothing left to hand over.
            let _ = t.join();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}

//! The engine's state: what the workers, the handles and the pool object
//! share, and the lock around the heap.
//!
//! # Ground rules
//!
//! - `Shared::state` guards the pending tasks (heap and ready lane; the
//!   workers' holds, which have locks of their own, are taken after it), the
//!   exclusive keys' `busy` and `held` sets, the mode, the wake-up count,
//!   the count of runs started under it, the latest clock reading
//!   seen and the number of callers waiting to settle. No task and no
//!   closure's `Drop` runs under it (a key's `Hash`, `Eq` and `Clone` and
//!   the clock do, contained): closures that are replaced, cancelled or shut
//!   down are dropped after the lock is released, and tasks run on workers
//!   that hold no pool lock.
//! - `Shared::leader_cv` has at most one waiter, the leader. It is notified,
//!   under the lock, when the earliest due time changes, when the mode
//!   changes, when a manual clock moves, and when a draining pool runs out
//!   of pending work.
//! - The protocol between leader and workers is in `docs/protocol.md`,
//!   whose last section maps each step to its functions.

use super::builder::Config;
use super::completion::{Observe, Sink};
use super::context::RunningKey;
use super::exclusive::ExclusiveKeys;
use super::fault::{Fault, Faults};
use super::handoff::{Mailbox, Msg};
use super::hold::{Held, Hold};
use super::outcome::Abandon;
use super::pending::{Given, Pending};
use super::stats::Counters;
use super::task::{Task, TaskKey};
use super::time::Timeline;
use super::wake::{self, Batch};
use crate::clock::Wake;
use crate::sync::{thread, Arc, AtomicU64, Condvar, Mutex, MutexGuard, Ordering};
use std::hash::Hash;
use std::sync::OnceLock;

/// How far past the latest reading seen under the lock a task may be due
/// for intake to read the clock to see whether it is due on arrival: one
/// second in nanoseconds. Tasks due later go into the heap unread.
pub(crate) const NEAR: i64 = 1_000_000_000;

/// What the pool needs of a key: the bound of every pool type's methods.
pub(crate) trait Key: Hash + Eq + Clone + Send + 'static {}

impl<K: Hash + Eq + Clone + Send + 'static> Key for K {}

/// Whether the pool takes work, drains it, or has stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Accepting and running tasks.
    Running,
    /// `shutdown()`: refusing new tasks, running the pending ones when due.
    Draining,
    /// `shutdown_now()` or drop: refusing new tasks, nothing pending.
    Stopped,
}

/// State behind the pool's one lock.
pub(crate) struct State<K> {
    /// Pending tasks, one per key: the heap and the ready lane beside it
    /// (`pending.rs`).
    pub(crate) pending: Pending<K>,
    /// Exclusive keys: keys whose task runs, and due tasks held for them.
    pub(crate) exclusive: ExclusiveKeys<K>,
    /// Running, draining or stopped.
    pub(crate) mode: Mode,
    /// Times the leader returned from a wait (notify, timeout or spurious).
    pub(crate) wakeups: u64,
    /// Tasks (and periodic runs) workers have started.
    pub(crate) started: u64,
    /// The latest due time among the tasks workers started (step 4), for
    /// the wake policy's density test: whoever started it, a task started
    /// due then means some thread was awake about then.
    pub(crate) latest_start: Option<i64>,
    /// When a worker last saw a task run long (`wake::ran_long`), on the
    /// pool's clock: the fact the deputies' backup reads (`wake::backup`).
    pub(crate) long_run: Option<i64>,
    /// Tasks admitted (`Stats::scheduled`): counted under the lock that
    /// admits them, so that a burst's scheduling call pays no atomic
    /// read-modify-write of its own (a full barrier that waited for the
    /// admission's stores).
    pub(crate) scheduled: u64,
    /// Callers waiting in `settle`.
    pub(crate) settle_waiters: usize,
    /// The latest reading of the pool's clock a worker or the leader took
    /// under this lock: a lower bound of the clock, so intake knows a task
    /// due by then is due on arrival, and reads the clock itself only for
    /// tasks due within [`NEAR`] of it (`intake.rs`).
    pub(crate) seen_now: i64,
}

impl<K> State<K> {
    /// Pending tasks, in the heap, the lane, the workers' holds or held
    /// for their keys.
    pub(crate) fn pending_count(&self) -> usize {
        self.pending.len() + self.exclusive.len()
    }
}

/// What the workers, the handles and the pool object share.
pub(crate) struct Shared<K> {
    /// Heap, mode, counters.
    pub(crate) state: Mutex<State<K>>,
    /// The leader's wait; notified when the head or the mode changes.
    pub(crate) leader_cv: Condvar,
    /// The workers' holds and running slots, one per worker (`hold.rs`);
    /// `State::pending` shares them.
    pub(crate) holds: Arc<[Hold<K>]>,
    /// The pool's clock and epoch.
    pub(crate) time: Timeline,
    /// Hand-off channel, where the free workers wait: the lead token, the
    /// exit pill, buffers to free.
    pub(crate) handoff: Mailbox<Msg>,
    /// The validated configuration.
    pub(crate) config: Config,
    /// Counters and lateness histograms.
    pub(crate) counters: Counters,
    /// Last keyless number given out.
    anon: AtomicU64,
    /// Workers still running (not yet past their exit), for a bounded wait
    /// for termination.
    pub(crate) live: Mutex<usize>,
    /// Notified when a worker exits.
    pub(crate) exited: Condvar,
    /// Notified, while someone waits to settle, when a worker finds nothing
    /// due to start.
    pub(crate) settled: Condvar,
    /// The protocol step the loom models asked to break, if any.
    pub(crate) faults: Faults,
    /// How errors name keys ([`Builder::debug_keys`](crate::Builder::debug_keys)).
    pub(crate) key_names: Option<fn(&K) -> String>,
    /// The worker threads' ids, set once before the first task can start:
    /// a draining pool admits follow-ups from them (`drain.rs`).
    pub(crate) worker_ids: OnceLock<Vec<thread::ThreadId>>,
    /// The completion stream, if the pool was built with one
    /// (`completion/send.rs`); `None` costs a branch per ended task.
    pub(crate) completions: Option<Sink<K>>,
    /// How keys are formatted in tracing spans and events (`trace.rs`).
    #[cfg(feature = "tracing")]
    pub(crate) key_format: Option<super::completion::KeyFormat<K>>,
}

impl<K: Key> Shared<K> {
    /// Send buffers the heap or the lane gave up to a free worker to free
    /// (`Msg::Free`), if there are any: a large free can hold the freeing
    /// thread up (the kernel flushes other CPUs' address translations), so
    /// neither the leader passing the lead
    /// (step 5) nor a worker that just shrank the heap (step 4d) does it.
    pub(crate) fn free_elsewhere(&self, given: Given<K>) {
        if !given.is_empty() {
            self.handoff.send(Msg::Free(Box::new(given)));
        }
    }

    /// The engine of a pool configured by `config` and observed as
    /// `observe` says (completion stream, tracing keys), with nothing
    /// pending; `key_names` names keys in errors.
    pub(crate) fn new(
        config: Config,
        key_names: Option<fn(&K) -> String>,
        mut observe: Observe<K>,
    ) -> Self {
        let faults = config.faults;
        let holds: Arc<[Hold<K>]> = (0..config.workers).map(|_| Hold::new()).collect();
        Shared {
            holds: holds.clone(),
            state: Mutex::new(State {
                pending: Pending::new(holds, faults),
                exclusive: ExclusiveKeys::new(config.exclusive_keys, faults),
                mode: Mode::Running,
                wakeups: 0,
                scheduled: 0,
                started: 0,
                latest_start: None,
                long_run: None,
                settle_waiters: 0,
                seen_now: 0, // the epoch: the clock read when the pool started
            }),
            leader_cv: Condvar::new(),
            time: Timeline::new(config.clock.clone()),
            handoff: Mailbox::new(),
            counters: Counters::new(config.workers),
            live: Mutex::new(config.workers),
            exited: Condvar::new(),
            settled: Condvar::new(),
            config,
            anon: AtomicU64::new(0),
            faults,
            key_names,
            worker_ids: OnceLock::new(),
            completions: observe.sink(),
            #[cfg(feature = "tracing")]
            key_format: observe.key_format,
        }
    }

    /// The workers' holds, locked one after another; the caller holds the
    /// state lock (the lock order).
    pub(crate) fn each_hold(
        &self,
        _st: &State<K>,
    ) -> impl Iterator<Item = MutexGuard<'_, Held<K>>> {
        self.holds.iter().map(Hold::lock)
    }

    /// True if a worker's running slot holds a key `pred` picks.
    pub(crate) fn any_running(
        &self,
        st: &State<K>,
        mut pred: impl FnMut(&TaskKey<K>) -> bool,
    ) -> bool {
        self.each_hold(st)
            .any(|h| h.running.as_ref().is_some_and(&mut pred))
    }

    /// Runs workers started: under the state lock, and from their holds.
    pub(crate) fn started(&self, st: &State<K>) -> u64 {
        st.started + self.each_hold(st).map(|h| h.started).sum::<u64>()
    }

    /// A fresh key for a keyless task (taken before the lock: it only needs
    /// to be unique; equal due times run in the heap's stamp order).
    pub(crate) fn anon_key(&self) -> TaskKey<K> {
        TaskKey::Anon(self.anon.fetch_add(1, Ordering::Relaxed))
    }

    /// True when the leader may stop: draining or stopped, and nothing
    /// pending anywhere (nor running, with `drain_follow_ups`: a running
    /// task may still add its follow-up).
    pub(crate) fn drained(&self, st: &State<K>) -> bool {
        st.pending.is_empty() && st.exclusive.is_empty() && !self.follow_ups_may_come(st)
    }

    /// Tell the leader that the head, the mode or the clock changed: notify
    /// the leader's condition variable, and, if the lead token waits in the
    /// mailbox (passed quietly, step 5), wake a free worker to take it, so
    /// the change is seen at once rather than when a deputy's deadline
    /// passes. Called under the state lock.
    pub(crate) fn notify_leader(&self) {
        self.leader_cv.notify_one();
        self.handoff.nudge();
    }

    /// Step 3: what the pool waits for, the head's batch by the wake
    /// policy (`wake::batch`), read from the heap under the lock; `None`:
    /// nothing pending.
    pub(crate) fn batch(&self, st: &State<K>) -> Option<Batch> {
        let head = st.pending.peek_due()?;
        Some(wake::batch(self.config.precision, head, |upto, out| {
            st.pending.dues_through(upto, out)
        }))
    }

    /// How far past a due time a deputy wakes now (`wake::backup`), by the
    /// latest clock reading under the lock.
    pub(crate) fn backup(&self, st: &State<K>) -> std::time::Duration {
        wake::backup(st.seen_now, st.long_run)
    }

    /// The real instant the latest task started was due at, if any: the
    /// fact the wake policy's density test reads.
    pub(crate) fn latest_start(&self, st: &State<K>) -> Option<std::time::Instant> {
        st.latest_start.map(|due| self.time.instant_of(due))
    }

    /// A draining leader waits for the last pending task; when a removal
    /// (not a start) takes it, the leader must hear of it or it would sleep
    /// until that task's due time, or for ever if it waits untimed.
    pub(crate) fn notify_if_drained(&self, st: &State<K>) {
        if st.mode != Mode::Running && self.drained(st) {
            self.notify_leader();
        }
    }

    /// Give a removed task (under `key`, due at `due`) its outcome, count
    /// it and report it (outside the lock).
    pub(crate) fn abandon(&self, key: &TaskKey<K>, due: i64, task: Task, why: Abandon) {
        // A periodic task is counted by its stand-in or itself, once.
        self.counters.abandoned(why);
        let periodic = task.is_periodic();
        task.abandon(why);
        #[cfg(feature = "tracing")]
        self.trace_removed(key, why);
        self.report_removed(key, due, periodic, why);
    }
}

impl<K: Send + 'static> Wake for Shared<K> {
    /// Step 9: a manual clock moved. Notify under the lock, so the wake
    /// cannot fall between the leader's clock read and its wait.
    fn wake(&self) {
        let _st = (!self.faults.has(Fault::WakeWithoutLock)).then(|| self.state.lock());
        self.leader_cv.notify_one();
        self.handoff.nudge();
    }
}

/// A task asking for its key reaches the pool through this (`context.rs`).
impl<K: Key> RunningKey for Shared<K> {
    fn key_into(&self, index: usize, out: &mut dyn std::any::Any) {
        let Some(out) = out.downcast_mut::<Option<K>>() else {
            return;
        };
        let Some(hold) = self.holds.get(index) else {
            return;
        };
        // The key's `Clone` is the task's own call: a panic in it unwinds
        // into the task (the guard unlocks the slot on the way).
        if let Some(TaskKey::Keyed(k)) = &hold.lock().running {
            *out = Some(k.clone());
        }
    }
}

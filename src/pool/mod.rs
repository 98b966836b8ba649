//! The pool: N workers, one leader at a time, one outcome per task.
//!
//! # Ground rules
//!
//! - `Shared::state` guards the heap, the mode and the keyless counter. User
//!   code never runs under it: closures that are replaced, cancelled or shut
//!   down are dropped after the lock is released, and tasks run on workers
//!   that hold no pool lock.
//! - `Shared::leader_cv` has at most one waiter, the leader. It is notified,
//!   under the lock, when the earliest due time changes, when the mode
//!   changes, and when a manual clock moves.
//! - The protocol between leader and workers is in `docs/protocol.md`.

mod builder;
#[cfg(loom)]
mod fault;
mod leader;
mod outcome;
mod periodic;
mod stats;
mod task;
mod worker;

pub use builder::{Builder, MAX_SPIN, MAX_WORKERS};
pub use outcome::{Outcome, TaskHandle, Timing};
pub use periodic::{MissedTicks, OnPanic, PeriodicHandle, Repeat};
pub use stats::{Lateness, Stats};

use crate::clock::{Clock, Wake, Waker};
use crate::heap::{Entry, IndexedHeap, Inserted};
use crate::sync::{thread, unbounded, Arc, Condvar, Mutex, MutexGuard, Receiver, Sender, Weak};
use crate::Error;
#[cfg(loom)]
use fault::Fault;
use outcome::{Abandon, OutcomeSlot};
use periodic::{PeriodicCtl, PeriodicJob};
use stats::Counters;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};
use task::{drop_quietly, BoxJob, Detached, OneShot};
use worker::Msg;

/// Due time of a periodic task's stand-in: never (the clock is clamped below).
pub(crate) const NEVER: i64 = i64::MAX;

/// A task's identity in the heap: the caller's key, or a sequence number for
/// keyless submissions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum TaskKey<K> {
    /// Scheduled under a caller's key.
    Keyed(K),
    /// Submitted without a key.
    Anon(u64),
}

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
    /// Pending tasks, one per key.
    pub(crate) heap: IndexedHeap<TaskKey<K>, BoxJob<K>>,
    /// Exclusive keys only: keys whose task is claimed or running.
    pub(crate) busy: HashSet<TaskKey<K>>,
    /// Exclusive keys only: due tasks waiting for their key's running task
    /// to finish. A key is in `heap` or in `held`, never both.
    pub(crate) held: HashMap<TaskKey<K>, Entry<TaskKey<K>, BoxJob<K>>>,
    /// Next keyless sequence number.
    next_anon: u64,
    /// Most pending tasks.
    capacity: usize,
    /// Running, draining or stopped.
    pub(crate) mode: Mode,
    /// Times the leader returned from a wait (notify, timeout or spurious).
    pub(crate) wakeups: u64,
}

impl<K: Hash + Eq + Clone> State<K> {
    /// Pending tasks, in the heap or held.
    pub(crate) fn pending(&self) -> usize {
        self.heap.len() + self.held.len()
    }

    /// True when the leader may stop: nothing pending anywhere.
    pub(crate) fn drained(&self) -> bool {
        self.heap.is_empty() && self.held.is_empty()
    }

    /// Remove `key`'s pending task, from the heap or from `held`; only the
    /// one stamped `seq`, if given.
    fn remove_pending(
        &mut self,
        key: &TaskKey<K>,
        seq: Option<u64>,
    ) -> Option<Entry<TaskKey<K>, BoxJob<K>>> {
        let in_heap = match seq {
            Some(seq) => self.heap.remove_seq(key, seq),
            None => self.heap.remove(key),
        };
        if in_heap.is_some() || self.held.is_empty() {
            return in_heap;
        }
        match self.held.get(key) {
            Some(e) if seq.map_or(true, |s| s == e.seq) => self.held.remove(key),
            _ => None,
        }
    }

    /// Exclusive keys: `key`'s task finished; let a held successor be claimed.
    pub(crate) fn release_key(&mut self, key: &TaskKey<K>) {
        self.busy.remove(key);
        if let Some(entry) = self.held.remove(key) {
            if let Err(entry) = self.heap.restore(entry) {
                // Unreachable: a held key is never in the heap. Keep the task.
                self.held.insert(entry.key.clone(), entry);
            }
        }
    }
}

/// What the workers, the handles and the pool object share.
pub(crate) struct Shared<K> {
    /// Heap, mode, counters.
    pub(crate) state: Mutex<State<K>>,
    /// The leader's timed wait; notified when the head or mode changes.
    pub(crate) leader_cv: Condvar,
    /// The pool's time source.
    clock: Arc<dyn Clock>,
    /// `clock.now()` when the pool started; due times are nanoseconds since.
    epoch: Instant,
    /// Hand-off channel: claimed tasks, the lead token, the exit pill.
    pub(crate) tx: Sender<Msg<K>>,
    /// Receiving end, shared by all workers.
    pub(crate) rx: Receiver<Msg<K>>,
    /// Most tasks one leadership claims.
    pub(crate) claim_batch: usize,
    /// Worker threads, so a claimed batch is split in at most that many parts.
    pub(crate) workers: usize,
    /// How long before a due time the leader stops sleeping and yields.
    pub(crate) spin_before_due: Duration,
    /// Whether the leader wakes early by its measured wake-up latency.
    pub(crate) adaptive_wake: bool,
    /// Whether a one-shot task due on arrival is claimed by its scheduling
    /// call (see [`Builder::claim_on_submit`]).
    claim_on_submit: bool,
    /// A keyed task never starts while its key's previous task runs.
    pub(crate) exclusive: bool,
    /// Skip runs that would start more than this many nanoseconds late.
    pub(crate) expire_after: Option<i64>,
    /// Counters and lateness histograms.
    pub(crate) counters: Counters,
    /// The protocol step the loom models asked to break, if any.
    #[cfg(loom)]
    pub(crate) fault: Option<Fault>,
}

impl<K> Shared<K> {
    /// The clock's reading in nanoseconds since the pool's epoch, kept below
    /// [`NEVER`].
    pub(crate) fn now_ns(&self) -> i64 {
        self.now_pair().1
    }

    /// The clock's reading, as an instant and as nanoseconds since the epoch.
    pub(crate) fn now_pair(&self) -> (Instant, i64) {
        let now = self.clock.now();
        let ns = nanos_i64(now.saturating_duration_since(self.epoch)).unwrap_or(NEVER);
        (now, ns.min(NEVER - 1))
    }

    /// The instant of `due` on the pool's clock.
    pub(crate) fn instant_of(&self, due: i64) -> Option<Instant> {
        self.epoch
            .checked_add(Duration::from_nanos(due.max(0) as u64))
    }

    /// The real instant the leader may sleep until while waiting for `due`;
    /// `None`: until notified.
    pub(crate) fn real_deadline(&self, due: i64) -> Option<Instant> {
        self.clock.sleep_deadline(self.instant_of(due)?)
    }

    /// Messages waiting in the hand-off queue.
    pub(crate) fn backlog(&self) -> usize {
        self.rx.len()
    }

    /// After tasks were claimed on arrival: wake the leader if it waits, so
    /// it helps run them (`leader::lead`). Every follower may be busy with a
    /// long task, and a waiting leader would otherwise leave them queued.
    fn call_leader(&self) {
        #[cfg(loom)]
        if self.faulty(Fault::ClaimNoCallLeader) {
            return;
        }
        self.leader_cv.notify_one();
    }

    /// The real instant now (for timing the leader's own waits, never for
    /// deciding whether a task is due).
    pub(crate) fn real_now(&self) -> Instant {
        Instant::now()
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> Shared<K> {
    /// Insert a job under `key` (or a fresh keyless number), replacing a
    /// pending one under the same key. Returns the heap key and stamp.
    fn insert(&self, key: Option<K>, due: i64, job: BoxJob<K>) -> Result<(TaskKey<K>, u64), Error> {
        let mut st = self.state.lock();
        if st.mode != Mode::Running {
            drop(st);
            drop_quietly(job);
            return Err(Error::ShutDown);
        }
        #[cfg(loom)]
        if self.faulty(Fault::IntakeOutsideLock) {
            drop(st);
            st = self.state.lock();
        }
        let key = match key {
            Some(k) => TaskKey::Keyed(k),
            None => {
                st.next_anon += 1;
                TaskKey::Anon(st.next_anon)
            }
        };
        let handle_key = key.clone();
        if !job.is_periodic() {
            if let Some((claimed_at, _)) = self.claimable(&st, due) {
                let seq = self.claim_on_arrival(st, key, due, claimed_at, job);
                return Ok((handle_key, seq));
            }
        }
        // A held task (exclusive keys) is pending too: a schedule replaces it.
        let held = if st.held.is_empty() {
            None
        } else {
            st.held.remove(&key)
        };
        #[cfg(loom)]
        let key = if self.faulty(Fault::ReplaceKeepsOld) && st.heap.contains_key(&key) {
            st.next_anon += 1;
            TaskKey::Anon(st.next_anon)
        } else {
            key
        };
        job.set_seq(st.heap.next_seq());
        let head = st.heap.peek_due();
        let capacity = st.capacity;
        let limit = capacity.saturating_sub(st.held.len());
        let result = st.heap.try_insert(key, due, job, limit);
        #[cfg(loom)]
        let head = if self.faulty(Fault::NoNotifyOnNewHead) {
            st.heap.peek_due()
        } else {
            head
        };
        if st.heap.peek_due() != head {
            self.leader_cv.notify_one();
        }
        if result.is_ok() {
            // Counted before the task can be claimed, so the counters never
            // show an outcome of a task not yet counted as scheduled.
            self.counters.scheduled(1);
        }
        drop(st);
        let (seq, old) = match result {
            Ok(Inserted::New { seq }) => (seq, held.map(|e| e.value)),
            // A key in the heap is never also held.
            Ok(Inserted::Replaced { seq, old, .. }) => (seq, Some(old)),
            Err((_, job)) => {
                drop_quietly(job);
                if let Some(e) = held {
                    // The held task was replaced before the capacity check.
                    self.abandon(e.value, Abandon::Replaced);
                }
                return Err(Error::CapacityReached { capacity });
            }
        };
        if let Some(old) = old {
            self.abandon(old, Abandon::Replaced);
        }
        Ok((handle_key, seq))
    }

    /// The clock's reading if a task due at `due` may be claimed by the call
    /// that schedules it: the pool claims on submission, the task is due,
    /// and nothing pending is due (so the hand-off queue stays in due
    /// order). Claimed tasks are not pending, so capacity does not count
    /// them.
    fn claimable(&self, st: &State<K>, due: i64) -> Option<(Instant, i64)> {
        if !self.claim_on_submit {
            return None;
        }
        let (now_at, now) = self.now_pair();
        let head_due = st.heap.peek_due().is_some_and(|d| d <= now);
        (due <= now && !head_due).then_some((now_at, now))
    }

    /// Claim a task as it arrives: replace the key's pending task, stamp
    /// it, and send it to the workers while still holding the lock, so it is
    /// in the channel before any exit pill a later shutdown makes the leader
    /// send. Releases the lock; returns the stamp.
    fn claim_on_arrival(
        &self,
        mut st: MutexGuard<'_, State<K>>,
        key: TaskKey<K>,
        due: i64,
        claimed: Instant,
        job: BoxJob<K>,
    ) -> u64 {
        let old = match key {
            TaskKey::Keyed(_) => st.heap.remove(&key),
            TaskKey::Anon(_) => None,
        };
        let seq = st.heap.take_seq();
        self.counters.scheduled(1);
        let msg = Msg::One(worker::Claimed {
            job,
            key,
            due,
            claimed,
        });
        #[cfg(loom)]
        let st = if self.faulty(Fault::ClaimSendAfterUnlock) {
            drop(st);
            None
        } else {
            Some(st)
        };
        let _ = self.tx.send(msg);
        self.call_leader();
        drop(st);
        if let Some(old) = old {
            self.abandon(old.value, Abandon::Replaced);
        }
        seq
    }

    /// Give a removed task its outcome, and count it.
    fn abandon(&self, job: BoxJob<K>, why: Abandon) {
        // A periodic task is counted by its stand-in or itself, once.
        self.counters.abandoned(why);
        job.abandon(why);
    }

    /// Insert keyed jobs under one lock, all or none; see
    /// [`TimerPool::schedule_batch_at`]. Returns each job's stamp.
    fn insert_batch(&self, jobs: Vec<(K, i64, BoxJob<K>)>) -> Result<Vec<u64>, Error> {
        let mut st = self.state.lock();
        let pending = st.heap.len().saturating_add(st.held.len());
        let refused = if st.mode != Mode::Running {
            Some(Error::ShutDown)
        } else if pending.saturating_add(jobs.len()) > st.capacity {
            Some(Error::CapacityReached {
                capacity: st.capacity,
            })
        } else {
            None
        };
        if let Some(e) = refused {
            drop(st);
            for (_, _, job) in jobs {
                drop_quietly(job);
            }
            return Err(e);
        }
        let head = st.heap.peek_due();
        let mut seqs = Vec::with_capacity(jobs.len());
        let mut replaced = Vec::new();
        // Due tasks are claimed as they arrive while nothing pending is due
        // (the first one that enters the heap ends that, keeping due order).
        let mut claim = match jobs.first() {
            Some((_, due, _)) => self.claimable(&st, *due),
            None => None,
        };
        let mut claimed = Vec::new();
        for (key, due, job) in jobs {
            let key = TaskKey::Keyed(key);
            // A held task (exclusive keys) is pending too: this replaces it.
            if !st.held.is_empty() {
                if let Some(e) = st.held.remove(&key) {
                    replaced.push(e.value);
                }
            }
            if let Some((now_at, now)) = claim {
                if due <= now {
                    if let Some(old) = st.heap.remove(&key) {
                        replaced.push(old.value);
                    }
                    seqs.push(st.heap.take_seq());
                    claimed.push(worker::Claimed {
                        job,
                        key,
                        due,
                        claimed: now_at,
                    });
                    continue;
                }
                claim = None;
            }
            job.set_seq(st.heap.next_seq());
            match st.heap.insert(key, due, job) {
                Inserted::New { seq } => seqs.push(seq),
                Inserted::Replaced { seq, old, .. } => {
                    seqs.push(seq);
                    replaced.push(old);
                }
            }
        }
        if st.heap.peek_due() != head {
            self.leader_cv.notify_one();
        }
        self.counters.scheduled(seqs.len() as u64);
        if !claimed.is_empty() {
            // Sent under the lock, ahead of any exit pill (see
            // `claim_on_arrival`).
            for part in leader::split(claimed, self.workers) {
                let _ = self.tx.send(Msg::Run(part));
            }
            self.call_leader();
        }
        drop(st);
        for old in replaced {
            self.abandon(old, Abandon::Replaced);
        }
        Ok(seqs)
    }

    /// Cancel `key`'s pending task, whichever it is.
    fn cancel(&self, key: &TaskKey<K>) -> bool {
        #[cfg(loom)]
        if self.faulty(Fault::CancelCheckThenRemove) {
            return self.cancel_check_then_remove(key, None);
        }
        self.cancel_pending(key, || None)
    }

    /// Cancel `key`'s pending task only if it is the one stamped `seq`.
    pub(crate) fn cancel_exact(&self, key: &TaskKey<K>, seq: u64) -> bool {
        #[cfg(loom)]
        if self.faulty(Fault::CancelCheckThenRemove) {
            return self.cancel_check_then_remove(key, Some(seq));
        }
        self.cancel_pending(key, || Some(seq))
    }

    /// Cancel a periodic task by its handle: its current entry, whether the
    /// task itself or its stand-in.
    pub(crate) fn cancel_periodic(&self, key: &TaskKey<K>, ctl: &PeriodicCtl) -> bool {
        self.cancel_pending(key, || Some(ctl.seq()))
    }

    /// Remove `key`'s pending task (only the one with the stamp `seq` gives,
    /// read under the lock, if any) and give it `Cancelled`.
    fn cancel_pending(&self, key: &TaskKey<K>, seq: impl FnOnce() -> Option<u64>) -> bool {
        let (removed, retired) = {
            let mut st = self.state.lock();
            let removed = st.remove_pending(key, seq());
            if removed.is_some() {
                self.notify_if_drained(&st);
            }
            (removed, st.heap.take_retired())
        };
        // Buffers the heap shrank away are freed outside the lock.
        drop(retired);
        match removed {
            Some(entry) => {
                self.abandon(entry.value, Abandon::Cancelled);
                true
            }
            None => false,
        }
    }

    /// A draining leader waits for the last pending task; when a removal
    /// (not a claim) takes it, the leader must hear of it or it would sleep
    /// until that task's due time, or for ever if it waits untimed.
    pub(crate) fn notify_if_drained(&self, st: &State<K>) {
        if st.mode != Mode::Running && st.drained() {
            self.leader_cv.notify_one();
        }
    }
}

impl<K: Send + 'static> Wake for Shared<K> {
    fn wake(&self) {
        #[cfg(loom)]
        if self.faulty(Fault::WakeWithoutLock) {
            self.leader_cv.notify_one();
            return;
        }
        // Under the lock, so the wake cannot fall between the leader's clock
        // read and its wait.
        let _st = self.state.lock();
        self.leader_cv.notify_one();
    }
}

/// Nanoseconds of `d` as an `i64`, if they fit.
fn nanos_i64(d: Duration) -> Option<i64> {
    i64::try_from(d.as_nanos()).ok()
}

/// A pool of worker threads that runs keyed and keyless tasks at their due
/// time, never before, with exactly one [`Outcome`] per task.
///
/// One worker at a time leads: it alone sleeps until the earliest due time
/// (or until an earlier task preempts it), claims what is due and hands it to
/// the other workers. Scheduling a pending key replaces its task atomically.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Outcome, TimerPool};
///
/// let pool = TimerPool::<&str>::builder().workers(2).build().unwrap();
/// let offer = pool
///     .schedule_after("trip-42", Duration::from_secs(15), || "re-dispatch")
///     .unwrap();
/// let moved = pool
///     .schedule_after("trip-42", Duration::from_millis(1), || "moved")
///     .unwrap();
/// assert_eq!(offer.wait(), Outcome::Replaced);
/// assert_eq!(moved.wait(), Outcome::Completed("moved"));
/// pool.shutdown();
/// ```
pub struct TimerPool<K: Hash + Eq + Clone + Send + 'static> {
    /// State shared with workers and handles.
    shared: Arc<Shared<K>>,
    /// Worker join handles, taken by the first shutdown that joins.
    workers: Mutex<Vec<thread::JoinHandle<()>>>,
    /// Worker thread ids, to recognise a call from inside a task.
    worker_ids: Vec<thread::ThreadId>,
}

impl<K: Hash + Eq + Clone + Send + 'static> fmt::Debug for TimerPool<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.shared.state.lock();
        f.debug_struct("TimerPool")
            .field("workers", &self.worker_ids.len())
            .field("pending", &st.pending())
            .field("mode", &st.mode)
            .finish()
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> TimerPool<K> {
    /// A builder with the defaults: `num_cpus::get()` workers, the system
    /// clock, capacity `u32::MAX`.
    pub fn builder() -> Builder<K> {
        Builder::new()
    }

    /// A pool with the default settings.
    ///
    /// # Errors
    ///
    /// [`Error::Spawn`] if the operating system refused a thread.
    pub fn new() -> Result<Self, Error> {
        Self::builder().build()
    }

    fn start(config: builder::Config) -> Result<Self, Error> {
        let (tx, rx) = unbounded();
        let epoch = config.clock.now();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                heap: IndexedHeap::new(),
                busy: HashSet::new(),
                held: HashMap::new(),
                next_anon: 0,
                capacity: config.capacity,
                mode: Mode::Running,
                wakeups: 0,
            }),
            leader_cv: Condvar::new(),
            clock: config.clock,
            epoch,
            tx,
            rx,
            claim_batch: config.claim_batch,
            workers: config.workers,
            spin_before_due: config.spin_before_due,
            adaptive_wake: config.adaptive_wake,
            claim_on_submit: config.claim_on_submit && !config.exclusive_keys,
            exclusive: config.exclusive_keys,
            expire_after: config.expire_after,
            counters: Counters::new(config.workers),
            #[cfg(loom)]
            fault: config.fault,
        });
        let weak: Weak<dyn Wake> = Arc::downgrade(&shared) as Weak<dyn Wake>;
        shared.clock.register(Waker::new(weak));

        let mut handles = Vec::with_capacity(config.workers);
        let mut ids = Vec::with_capacity(config.workers);
        for i in 0..config.workers {
            let worker_shared = shared.clone();
            let spawned = thread::Builder::new()
                .name(format!("{}-{i}", config.thread_name))
                .spawn(move || worker::work(&worker_shared, i));
            match spawned {
                Ok(h) => {
                    ids.push(h.thread().id());
                    handles.push(h);
                }
                Err(e) => {
                    shared.state.lock().mode = Mode::Stopped;
                    let _ = shared.tx.send(Msg::Exit);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(Error::Spawn(e.to_string()));
                }
            }
        }
        let _ = shared.tx.send(Msg::Lead(leader::Lead::first()));
        Ok(TimerPool {
            shared,
            workers: Mutex::new(handles),
            worker_ids: ids,
        })
    }

    /// Run `f` at `at` (never before) under `key`. A pending task under `key`
    /// is replaced atomically: its outcome becomes [`Outcome::Replaced`]. If
    /// `key`'s task is already running, this adds new pending work.
    ///
    /// An `at` before the pool started counts as due at once.
    ///
    /// # Errors
    ///
    /// [`Error::ShutDown`] after a shutdown, [`Error::CapacityReached`] for a
    /// new key at capacity, [`Error::TimeOutOfRange`] if `at` is more than
    /// about 292 years after the pool started. On error `f` is dropped and
    /// nothing changes.
    pub fn schedule_at<F, T>(&self, key: K, at: Instant, f: F) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let due = self.due_at(at);
        self.add(Some(key), due, f)
    }

    /// Run `f` after `delay` (never before) under `key`; see
    /// [`schedule_at`](Self::schedule_at).
    ///
    /// # Errors
    ///
    /// As [`schedule_at`](Self::schedule_at); `Duration::MAX` and any delay
    /// past the clock's range give [`Error::TimeOutOfRange`].
    pub fn schedule_after<F, T>(
        &self,
        key: K,
        delay: Duration,
        f: F,
    ) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let due = self.due_after(delay);
        self.add(Some(key), due, f)
    }

    /// Run `f` at `at` without a key. Keyless tasks with equal due times run
    /// in submission order.
    ///
    /// # Errors
    ///
    /// As [`schedule_at`](Self::schedule_at).
    pub fn submit_at<F, T>(&self, at: Instant, f: F) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let due = self.due_at(at);
        self.add(None, due, f)
    }

    /// Run `f` after `delay` without a key; see [`submit_at`](Self::submit_at).
    ///
    /// # Errors
    ///
    /// As [`schedule_after`](Self::schedule_after).
    pub fn submit_after<F, T>(&self, delay: Duration, f: F) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let due = self.due_after(delay);
        self.add(None, due, f)
    }

    /// Run `f` at `first`, then every `period` after `first`, under `key`,
    /// with the default policies ([`MissedTicks::Skip`], [`OnPanic::Stop`]).
    /// A run never overlaps the previous run of the same task.
    ///
    /// # Errors
    ///
    /// As [`schedule_at`](Self::schedule_at), and [`Error::ZeroPeriod`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{Clock, ManualClock, Outcome, TimerPool};
    ///
    /// let clock = ManualClock::new();
    /// let pool = TimerPool::<&str>::builder().workers(1).clock(clock.clone()).build()?;
    /// let tick = pool.schedule_at_fixed_rate("heartbeat", clock.now(), Duration::from_secs(1), || {})?;
    /// while tick.runs() < 1 {
    ///     std::thread::yield_now();
    /// }
    /// assert!(tick.cancel());
    /// assert_eq!(tick.wait(), Outcome::Cancelled);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_at_fixed_rate<F>(
        &self,
        key: K,
        first: Instant,
        period: Duration,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        self.schedule_repeating(key, first, Repeat::fixed_rate(period), f)
    }

    /// Run `f` at `first`, then `delay` after each run finishes, under `key`
    /// ([`OnPanic::Stop`] on panic).
    ///
    /// # Errors
    ///
    /// As [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    pub fn schedule_with_fixed_delay<F>(
        &self,
        key: K,
        first: Instant,
        delay: Duration,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        self.schedule_repeating(key, first, Repeat::fixed_delay(delay), f)
    }

    /// Keyless [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    ///
    /// # Errors
    ///
    /// As [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    pub fn submit_at_fixed_rate<F>(
        &self,
        first: Instant,
        period: Duration,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        self.add_repeating(None, first, Repeat::fixed_rate(period), f)
    }

    /// Keyless [`schedule_with_fixed_delay`](Self::schedule_with_fixed_delay).
    ///
    /// # Errors
    ///
    /// As [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    pub fn submit_with_fixed_delay<F>(
        &self,
        first: Instant,
        delay: Duration,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        self.add_repeating(None, first, Repeat::fixed_delay(delay), f)
    }

    /// Run `f` at `first` and then as `repeat` says, under `key`. Scheduling
    /// a pending key replaces its task, periodic or not; scheduling any task
    /// under the key of a periodic task stops it (outcome `Replaced`), even
    /// while it runs.
    ///
    /// # Errors
    ///
    /// As [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    pub fn schedule_repeating<F>(
        &self,
        key: K,
        first: Instant,
        repeat: Repeat,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        self.add_repeating(Some(key), first, repeat, f)
    }

    /// Keyless [`schedule_repeating`](Self::schedule_repeating).
    ///
    /// # Errors
    ///
    /// As [`schedule_at_fixed_rate`](Self::schedule_at_fixed_rate).
    pub fn submit_repeating<F>(
        &self,
        first: Instant,
        repeat: Repeat,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        self.add_repeating(None, first, repeat, f)
    }

    /// The pool's counters and lateness percentiles.
    pub fn stats(&self) -> Stats {
        let (pending, wakeups) = {
            let st = self.shared.state.lock();
            (st.pending(), st.wakeups)
        };
        self.shared.counters.snapshot(pending, wakeups)
    }

    /// [`schedule_at`](Self::schedule_at) without a handle: for timeouts
    /// whose outcome nobody waits for. The task is replaced, cancelled and
    /// counted in [`stats`](Self::stats) like any other; skipping the handle
    /// saves its allocation and the outcome delivery. Returns nothing on
    /// success.
    ///
    /// # Errors
    ///
    /// As [`schedule_at`](Self::schedule_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<u64>::builder().workers(1).build()?;
    /// pool.schedule_detached_at(42, Instant::now() + Duration::from_secs(15), || {
    ///     // re-dispatch trip 42
    /// })?;
    /// assert!(pool.cancel(&42));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_detached_at<F>(&self, key: K, at: Instant, f: F) -> Result<(), Error>
    where
        F: FnOnce() + Send + 'static,
    {
        let due = match self.due_at(at) {
            Ok(d) => d,
            Err(e) => return Err(self.refuse(f, e)),
        };
        self.insert_counted(Some(key), due, Box::new(Detached::new(f)))
            .map(|_| ())
    }

    /// [`schedule_batch_at`](Self::schedule_batch_at) without handles: many
    /// keyed tasks under one acquisition of the pool's lock, in order, all or
    /// none. Returns how many were scheduled. The cheapest way to hand the
    /// pool a burst of work.
    ///
    /// # Errors
    ///
    /// As [`schedule_batch_at`](Self::schedule_batch_at).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Instant;
    /// use timerpool::TimerPool;
    ///
    /// let pool = TimerPool::<u64>::builder().workers(2).build()?;
    /// let sum = Arc::new(AtomicU64::new(0));
    /// let now = Instant::now();
    /// let n = pool.schedule_batch_detached_at((1..=100u64).map(|k| {
    ///     let sum = sum.clone();
    ///     (k, now, move || {
    ///         sum.fetch_add(k, Ordering::Relaxed);
    ///     })
    /// }))?;
    /// assert_eq!(n, 100);
    /// pool.shutdown(); // runs everything pending, joins the workers
    /// assert_eq!(sum.load(Ordering::Relaxed), 5050);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_batch_detached_at<I, F>(&self, tasks: I) -> Result<usize, Error>
    where
        I: IntoIterator<Item = (K, Instant, F)>,
        F: FnOnce() + Send + 'static,
    {
        let tasks = tasks.into_iter();
        let mut jobs = Vec::with_capacity(tasks.size_hint().0);
        let mut bad_time = false;
        for (key, at, f) in tasks {
            let due = self.due_at(at).unwrap_or_else(|_| {
                bad_time = true;
                0
            });
            jobs.push((key, due, Box::new(Detached::new(f)) as BoxJob<K>));
        }
        let n = jobs.len();
        self.insert_batch_checked(jobs, bad_time)?;
        Ok(n)
    }

    /// Insert a batch, or refuse it whole (counting each task refused) if a
    /// due time was out of range or the pool refuses it.
    fn insert_batch_checked(
        &self,
        jobs: Vec<(K, i64, BoxJob<K>)>,
        bad_time: bool,
    ) -> Result<Vec<u64>, Error> {
        let n = jobs.len();
        let refused = |e: Error| {
            for _ in 0..n {
                self.shared.counters.refused();
            }
            e
        };
        if bad_time {
            for (_, _, job) in jobs {
                drop_quietly(job);
            }
            return Err(refused(Error::TimeOutOfRange));
        }
        self.shared.insert_batch(jobs).map_err(refused)
    }

    /// Schedule many keyed tasks under one acquisition of the pool's lock:
    /// each `(key, at, f)` as [`schedule_at`](Self::schedule_at) would, in
    /// order. A key that appears twice is replaced by its later entry (the
    /// earlier handle reports [`Outcome::Replaced`]) while the earlier one
    /// is pending; an earlier entry already claimed on arrival
    /// ([`Builder::claim_on_submit`]) runs, and so does the later one. All or
    /// none: on error nothing is scheduled and every closure is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::TimeOutOfRange`] if any `at` is out of range,
    /// [`Error::ShutDown`] after a shutdown, and [`Error::CapacityReached`]
    /// if the pending tasks plus the batch's length exceed the capacity
    /// (counted before replacements, so a batch of replacements at capacity
    /// is refused; schedule those one by one).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// use timerpool::{Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<u64>::builder().workers(2).build()?;
    /// let now = Instant::now();
    /// let handles = pool.schedule_batch_at((0..100u64).map(|k| (k, now, move || k * 2)))?;
    /// assert_eq!(handles.into_iter().map(|h| h.wait()).filter(Outcome::ran).count(), 100);
    /// pool.shutdown();
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn schedule_batch_at<I, F, T>(&self, tasks: I) -> Result<Vec<TaskHandle<T, K>>, Error>
    where
        I: IntoIterator<Item = (K, Instant, F)>,
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let tasks = tasks.into_iter();
        let mut jobs = Vec::with_capacity(tasks.size_hint().0);
        let mut slots = Vec::with_capacity(tasks.size_hint().0);
        let mut bad_time = false;
        for (key, at, f) in tasks {
            let due = match self.due_at(at) {
                Ok(d) => d,
                Err(_) => {
                    bad_time = true;
                    0
                }
            };
            let at = self.shared.instant_of(due).unwrap_or(self.shared.epoch);
            let slot = Arc::new(OutcomeSlot::new(at));
            jobs.push((
                key,
                due,
                Box::new(OneShot::new(f, slot.clone())) as BoxJob<K>,
            ));
            slots.push(slot);
        }
        let keys: Vec<K> = jobs.iter().map(|(k, _, _)| k.clone()).collect();
        let seqs = self.insert_batch_checked(jobs, bad_time)?;
        let pool = Arc::downgrade(&self.shared);
        Ok(slots
            .into_iter()
            .zip(keys)
            .zip(seqs)
            .map(|((slot, key), seq)| TaskHandle::new(slot, pool.clone(), TaskKey::Keyed(key), seq))
            .collect())
    }

    /// Cancel `key`'s pending task. True iff one was pending: it will never
    /// run and its outcome is [`Outcome::Cancelled`]. A task already claimed
    /// by the leader (about to run, or running) cannot be cancelled.
    pub fn cancel(&self, key: &K) -> bool {
        self.shared.cancel(&TaskKey::Keyed(key.clone()))
    }

    /// The earliest pending due time.
    pub fn next_due(&self) -> Option<Instant> {
        let due = self.shared.state.lock().heap.peek_due()?;
        if due == NEVER {
            return None; // only running periodic tasks' stand-ins
        }
        self.shared.instant_of(due)
    }

    /// Number of pending (not yet claimed) tasks; a periodic task counts
    /// while it is live.
    pub fn len(&self) -> usize {
        self.shared.state.lock().pending()
    }

    /// True when no task is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pool's current time, as its clock reads it.
    pub fn now(&self) -> Instant {
        self.shared.clock.now()
    }

    /// Stop taking new tasks, let every pending task run at its due time,
    /// then join the workers.
    ///
    /// Called from inside one of the pool's tasks, it starts the shutdown but
    /// does not wait (a worker cannot join itself).
    pub fn shutdown(&self) {
        #[cfg(loom)]
        if self.shared.faulty(Fault::ShutdownNoNotify) {
            let mut st = self.shared.state.lock();
            if st.mode == Mode::Running {
                st.mode = Mode::Draining;
            }
            drop(st);
            self.join();
            return;
        }
        let stopped = {
            let mut st = self.shared.state.lock();
            if st.mode == Mode::Running {
                st.mode = Mode::Draining;
            }
            // Periodic tasks never drain by themselves: stop them.
            let mut stopped = st.heap.remove_where(|job| job.is_periodic());
            let held: Vec<_> = st
                .held
                .iter()
                .filter(|(_, e)| e.value.is_periodic())
                .map(|(k, _)| k.clone())
                .collect();
            stopped.extend(held.iter().filter_map(|k| st.held.remove(k)));
            self.shared.leader_cv.notify_one();
            stopped
        };
        for entry in stopped {
            self.shared.abandon(entry.value, Abandon::Shutdown);
        }
        self.join();
    }

    /// Stop taking new tasks, remove every pending task unrun (outcome
    /// [`Outcome::Shutdown`]), let claimed and running tasks finish, join the
    /// workers, and return the keys of the removed keyed tasks in due order.
    ///
    /// Called from inside one of the pool's tasks, it does not wait for the
    /// workers.
    pub fn shutdown_now(&self) -> Vec<K> {
        let drained = {
            let mut st = self.shared.state.lock();
            st.mode = Mode::Stopped;
            // Held tasks are already due: they come first.
            let mut drained: Vec<_> = st.held.drain().map(|(_, e)| e).collect();
            drained.sort_by_key(|e| (e.due, e.seq));
            drained.extend(st.heap.drain());
            self.shared.leader_cv.notify_one();
            drained
        };
        let mut keys = Vec::new();
        for entry in drained {
            if let TaskKey::Keyed(k) = entry.key {
                // A running periodic task's stand-in is stopped, not returned.
                if !entry.value.is_stand_in() {
                    keys.push(k);
                }
            }
            self.shared.abandon(entry.value, Abandon::Shutdown);
        }
        self.join();
        keys
    }

    /// True once `shutdown` or `shutdown_now` has been called.
    pub fn is_shutdown(&self) -> bool {
        self.shared.state.lock().mode != Mode::Running
    }

    /// Join every worker, unless called from one of them.
    fn join(&self) {
        let me = thread::current().id();
        if self.worker_ids.contains(&me) {
            return;
        }
        let mut handles = self.workers.lock();
        for h in handles.drain(..) {
            let _ = h.join();
        }
    }

    fn due_at(&self, at: Instant) -> Result<i64, Error> {
        nanos_i64(at.saturating_duration_since(self.shared.epoch))
            .filter(|&d| d < NEVER)
            .ok_or(Error::TimeOutOfRange)
    }

    fn due_after(&self, delay: Duration) -> Result<i64, Error> {
        let delay = nanos_i64(delay).ok_or(Error::TimeOutOfRange)?;
        self.shared
            .now_ns()
            .checked_add(delay)
            .filter(|&d| d < NEVER)
            .ok_or(Error::TimeOutOfRange)
    }

    fn add<F, T>(
        &self,
        key: Option<K>,
        due: Result<i64, Error>,
        f: F,
    ) -> Result<TaskHandle<T, K>, Error>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let due = match due {
            Ok(d) => d,
            Err(e) => return Err(self.refuse(f, e)),
        };
        let at = self.shared.instant_of(due).unwrap_or(self.shared.epoch);
        let slot = Arc::new(OutcomeSlot::new(at));
        let job: BoxJob<K> = Box::new(OneShot::new(f, slot.clone()));
        let (key, seq) = self.insert_counted(key, due, job)?;
        Ok(TaskHandle::new(
            slot,
            Arc::downgrade(&self.shared),
            key,
            seq,
        ))
    }

    /// Insert `job`, counting a refusal (the pool then dropped the job).
    fn insert_counted(
        &self,
        key: Option<K>,
        due: i64,
        job: BoxJob<K>,
    ) -> Result<(TaskKey<K>, u64), Error> {
        self.shared
            .insert(key, due, job)
            .inspect_err(|_| self.shared.counters.refused())
    }

    /// Refuse a call before its task was built: count it, drop the closure
    /// (containing a panic from its `Drop`), and give the error back.
    fn refuse<F>(&self, f: F, e: Error) -> Error {
        self.shared.counters.refused();
        drop_quietly(f);
        e
    }

    fn add_repeating<F>(
        &self,
        key: Option<K>,
        first: Instant,
        repeat: Repeat,
        f: F,
    ) -> Result<PeriodicHandle<K>, Error>
    where
        F: FnMut() + Send + 'static,
    {
        let checked = repeat
            .every_ns()
            .and_then(|every| Ok((every, self.due_at(first)?)));
        let (every, due) = match checked {
            Ok(v) => v,
            Err(e) => return Err(self.refuse(f, e)),
        };
        let at = self.shared.instant_of(due).unwrap_or(self.shared.epoch);
        let ctl = Arc::new(PeriodicCtl::new(at));
        let job: BoxJob<K> = Box::new(PeriodicJob::new(f, ctl.clone(), repeat, every));
        let (key, _) = self.insert_counted(key, due, job)?;
        Ok(PeriodicHandle::new(ctl, Arc::downgrade(&self.shared), key))
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> Drop for TimerPool<K> {
    /// Dropping the pool is [`shutdown_now`](TimerPool::shutdown_now): pending
    /// tasks get [`Outcome::Shutdown`], claimed ones finish, workers are
    /// joined (not when dropped from inside one of the pool's own tasks).
    fn drop(&mut self) {
        if std::thread::panicking() && cfg!(loom) {
            return;
        }
        self.shutdown_now();
    }
}

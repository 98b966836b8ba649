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
mod task;
mod worker;

pub use builder::{Builder, MAX_WORKERS};
pub use outcome::{Outcome, TaskHandle};

use crate::clock::{Clock, Wake, Waker};
use crate::heap::{IndexedHeap, Inserted};
use crate::sync::{thread, unbounded, Arc, Condvar, Mutex, Receiver, Sender, Weak};
use crate::Error;
#[cfg(loom)]
use fault::Fault;
use outcome::{Abandon, OutcomeSlot};
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, Instant};
use task::{drop_quietly, BoxJob, OneShot};
use worker::Msg;

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
    pub(crate) heap: IndexedHeap<TaskKey<K>, BoxJob>,
    /// Next keyless sequence number.
    next_anon: u64,
    /// Most pending tasks.
    capacity: usize,
    /// Running, draining or stopped.
    pub(crate) mode: Mode,
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
    pub(crate) tx: Sender<Msg>,
    /// Receiving end, shared by all workers.
    pub(crate) rx: Receiver<Msg>,
    /// Most tasks one leadership claims.
    pub(crate) claim_batch: usize,
    /// The protocol step the loom models asked to break, if any.
    #[cfg(loom)]
    pub(crate) fault: Option<Fault>,
}

impl<K> Shared<K> {
    /// The clock's reading in nanoseconds since the pool's epoch.
    pub(crate) fn now_ns(&self) -> i64 {
        nanos_i64(self.clock.now().saturating_duration_since(self.epoch)).unwrap_or(i64::MAX)
    }

    /// The instant of `due` on the pool's clock.
    fn instant_of(&self, due: i64) -> Option<Instant> {
        self.epoch
            .checked_add(Duration::from_nanos(due.max(0) as u64))
    }

    /// The real instant the leader may sleep until while waiting for `due`;
    /// `None`: until notified.
    pub(crate) fn real_deadline(&self, due: i64) -> Option<Instant> {
        self.clock.sleep_deadline(self.instant_of(due)?)
    }
}

impl<K: Hash + Eq + Clone + Send + 'static> Shared<K> {
    /// Insert a job under `key` (or a fresh keyless number), replacing a
    /// pending one under the same key. Returns the heap key and stamp.
    fn insert(&self, key: Option<K>, due: i64, job: BoxJob) -> Result<(TaskKey<K>, u64), Error> {
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
        #[cfg(loom)]
        let key = if self.faulty(Fault::ReplaceKeepsOld) && st.heap.contains_key(&key) {
            st.next_anon += 1;
            TaskKey::Anon(st.next_anon)
        } else {
            key
        };
        let head = st.heap.peek_due();
        let capacity = st.capacity;
        let result = st.heap.try_insert(key, due, job, capacity);
        #[cfg(loom)]
        let head = if self.faulty(Fault::NoNotifyOnNewHead) {
            st.heap.peek_due()
        } else {
            head
        };
        if st.heap.peek_due() != head {
            self.leader_cv.notify_one();
        }
        drop(st);
        match result {
            Ok(Inserted::New { seq }) => Ok((handle_key, seq)),
            Ok(Inserted::Replaced { seq, old, .. }) => {
                old.abandon(Abandon::Replaced);
                Ok((handle_key, seq))
            }
            Err((_, job)) => {
                drop_quietly(job);
                Err(Error::CapacityReached { capacity })
            }
        }
    }

    /// Cancel `key`'s pending task, whichever it is.
    fn cancel(&self, key: &TaskKey<K>) -> bool {
        #[cfg(loom)]
        if self.faulty(Fault::CancelCheckThenRemove) {
            return self.cancel_check_then_remove(key, None);
        }
        let removed = self.state.lock().heap.remove(key);
        match removed {
            Some(entry) => {
                entry.value.abandon(Abandon::Cancelled);
                true
            }
            None => false,
        }
    }

    /// Cancel `key`'s pending task only if it is the one stamped `seq`.
    pub(crate) fn cancel_exact(&self, key: &TaskKey<K>, seq: u64) -> bool {
        #[cfg(loom)]
        if self.faulty(Fault::CancelCheckThenRemove) {
            return self.cancel_check_then_remove(key, Some(seq));
        }
        let removed = self.state.lock().heap.remove_seq(key, seq);
        match removed {
            Some(entry) => {
                entry.value.abandon(Abandon::Cancelled);
                true
            }
            None => false,
        }
    }
}

impl<K: Send + 'static> Wake for Shared<K> {
    fn wake(&self) {
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
///     .schedule_after("trip-42", Duration::from_millis(5), || "re-dispatch")
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
            .field("pending", &st.heap.len())
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

    fn start(
        workers: usize,
        capacity: usize,
        thread_name: String,
        clock: Arc<dyn Clock>,
        claim_batch: usize,
        #[cfg(loom)] fault: Option<Fault>,
    ) -> Result<Self, Error> {
        let (tx, rx) = unbounded();
        let epoch = clock.now();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                heap: IndexedHeap::new(),
                next_anon: 0,
                capacity,
                mode: Mode::Running,
            }),
            leader_cv: Condvar::new(),
            clock,
            epoch,
            tx,
            rx,
            claim_batch,
            #[cfg(loom)]
            fault,
        });
        let weak: Weak<dyn Wake> = Arc::downgrade(&shared) as Weak<dyn Wake>;
        shared.clock.register(Waker::new(weak));

        let mut handles = Vec::with_capacity(workers);
        let mut ids = Vec::with_capacity(workers);
        for i in 0..workers {
            let worker_shared = shared.clone();
            let spawned = thread::Builder::new()
                .name(format!("{thread_name}-{i}"))
                .spawn(move || worker::work(&worker_shared));
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

    /// Cancel `key`'s pending task. True iff one was pending: it will never
    /// run and its outcome is [`Outcome::Cancelled`]. A task already claimed
    /// by the leader (about to run, or running) cannot be cancelled.
    pub fn cancel(&self, key: &K) -> bool {
        self.shared.cancel(&TaskKey::Keyed(key.clone()))
    }

    /// The earliest pending due time.
    pub fn next_due(&self) -> Option<Instant> {
        let due = self.shared.state.lock().heap.peek_due()?;
        self.shared.instant_of(due)
    }

    /// Number of pending (not yet claimed) tasks.
    pub fn len(&self) -> usize {
        self.shared.state.lock().heap.len()
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
        {
            let mut st = self.shared.state.lock();
            if st.mode == Mode::Running {
                st.mode = Mode::Draining;
            }
            self.shared.leader_cv.notify_one();
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
            let drained = st.heap.drain();
            self.shared.leader_cv.notify_one();
            drained
        };
        let mut keys = Vec::new();
        for entry in drained {
            if let TaskKey::Keyed(k) = entry.key {
                keys.push(k);
            }
            entry.value.abandon(Abandon::Shutdown);
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
        nanos_i64(at.saturating_duration_since(self.shared.epoch)).ok_or(Error::TimeOutOfRange)
    }

    fn due_after(&self, delay: Duration) -> Result<i64, Error> {
        let delay = nanos_i64(delay).ok_or(Error::TimeOutOfRange)?;
        self.shared
            .now_ns()
            .checked_add(delay)
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
            Err(e) => {
                drop_quietly(f);
                return Err(e);
            }
        };
        let slot = Arc::new(OutcomeSlot::new());
        let job: BoxJob = Box::new(OneShot::new(f, slot.clone()));
        let (key, seq) = self.shared.insert(key, due, job)?;
        Ok(TaskHandle::new(
            slot,
            Arc::downgrade(&self.shared),
            key,
            seq,
        ))
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

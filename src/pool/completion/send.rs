//! The completion stream: a record of every task's end, as it happens, sent
//! to a bounded channel and handed to a listener, when the pool was built
//! with either ([`Builder::completions`], [`Builder::on_completion`]).
//!
//! # Ground rules
//!
//! - A record is made and sent by the thread that ended the task, after the
//!   task's handle (if any) got its outcome and outside every pool lock: a
//!   worker after a run, or the caller of `cancel`, of a replacing
//!   `schedule`, or of `shutdown`/`shutdown_now`/drop for a removed task.
//! - A run is reported before it is counted in [`Stats`](crate::Stats),
//!   so once `settle` returns, or the workers are joined, every run it
//!   waited for has been reported.
//! - Sending never blocks: a full channel drops the record and counts it in
//!   [`Stats::completions_dropped`](crate::Stats::completions_dropped).
//!   Blocking would stall a worker behind a slow consumer, and would
//!   deadlock a consumer that itself cancels or schedules.
//! - The key is cloned only here, only when a stream is configured; making
//!   the record, the listener and dropping the record are user code, each
//!   contained (counted in `contained_panics`).
//! - Unconfigured (`Shared::completions` is `None`), the pool pays a
//!   branch per ended task and makes no record; the hooks' plumbing costs
//!   about 50 instructions a task in all (`docs/benchmarks.md`, "Tracing
//!   and the completion stream").
//! - The channel's stream ends once the pool has shut down and no record
//!   can follow (`receiver.rs`): every caller-side section that may end a
//!   task (cancel, a schedule that may replace, a shutdown, the pool's
//!   drop) holds it open with [`Shared::sending`] from before it takes the
//!   pool's lock until its records are sent; the workers hold it open
//!   until the last of them exits ([`Shared::workers_exited`]). Without a
//!   channel a section pays a branch.

use super::receiver::{CompletionReceiver, Outlet};
use super::record::{Completion, CompletionKind};
use crate::contain::{catch, drop_quietly, forget_payload};
use crate::pool::builder::Builder;
use crate::pool::outcome::{Abandon, Outcome, Ran, RunCtx, Timing};
use crate::pool::shared::{Key, Shared};
use crate::pool::task::TaskKey;
use crate::pool::time::NEVER;
use crate::sync::Arc;
use std::hash::Hash;
use std::time::Instant;

impl<K: Hash + Eq + Clone + Send + 'static> Builder<K> {
    /// Send a [`Completion`] record of every task's end (one-shot tasks with
    /// a handle or detached, periodic runs and ends, tasks cancelled,
    /// replaced, shut down or expired) to a channel holding `capacity`
    /// records at most; [`TimerPool::completions`](crate::TimerPool::completions)
    /// gives its receiver. Default: no channel.
    ///
    /// A full channel never blocks the pool: the record is dropped and
    /// counted in [`Stats::completions_dropped`](crate::Stats::completions_dropped).
    /// Size it for the bursts the consumer must absorb.
    ///
    /// `build` fails with [`Error::ZeroCapacity`](crate::Error::ZeroCapacity)
    /// for a capacity of 0.
    ///
    /// ```
    /// use std::time::Duration;
    /// use timerpool::{CompletionKind, Outcome, TimerPool};
    ///
    /// let pool = TimerPool::<&str>::builder().workers(1).completions(1024).build()?;
    /// let done = pool.completions().unwrap();
    /// pool.schedule_detached("ping", Duration::ZERO, || panic!("no route"))?;
    /// let record = done.recv_timeout(Duration::from_secs(10)).unwrap();
    /// assert_eq!(record.key, Some("ping"));
    /// assert_eq!(record.kind, CompletionKind::OneShot);
    /// assert_eq!(record.outcome, Outcome::Panicked("no route".into()));
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn completions(mut self, capacity: usize) -> Self {
        self.observe_mut().capacity = Some(capacity);
        self
    }

    /// Call `listener` with a [`Completion`] record of every task's end, on
    /// the thread that ended it, outside every pool lock: a worker after a
    /// run, or the caller of `cancel`, of a replacing `schedule`, or of a
    /// shutdown for a removed task. Default: none.
    ///
    /// A slow listener slows that thread (a worker serves no other task
    /// meanwhile). A panic in it is contained and counted in
    /// [`Stats::contained_panics`](crate::Stats::contained_panics). It must
    /// not wait for work of the same pool to finish.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use timerpool::TimerPool;
    ///
    /// let ended = Arc::new(AtomicU64::new(0));
    /// let seen = ended.clone();
    /// let pool = TimerPool::<u32>::builder()
    ///     .workers(1)
    ///     .on_completion(move |_| { seen.fetch_add(1, Ordering::Relaxed); })
    ///     .build()?;
    /// pool.schedule_detached(1, Duration::ZERO, || ())?;
    /// pool.schedule_detached(2, Duration::from_secs(60), || ())?;
    /// assert!(pool.cancel(&2));
    /// pool.shutdown();
    /// assert_eq!(ended.load(Ordering::Relaxed), 2);
    /// # Ok::<(), timerpool::Error>(())
    /// ```
    pub fn on_completion(
        mut self,
        listener: impl Fn(&Completion<K>) + Send + Sync + 'static,
    ) -> Self {
        self.observe_mut().listener = Some(Arc::new(listener));
        self
    }
}

/// A record's timing fields: due, started, finished.
type Times = (Option<Instant>, Option<Instant>, Option<Instant>);

impl<K: Key> Shared<K> {
    /// Make a record with `make` and send it, if a stream is configured.
    fn emit(&self, make: impl FnOnce() -> Completion<K>) {
        let Some(sink) = &self.completions else {
            return;
        };
        let record = match catch(make) {
            Ok(record) => record,
            Err(payload) => {
                // The key's `Clone` panicked: no record.
                forget_payload(payload);
                self.counters.contained();
                self.counters.completion_dropped();
                return;
            }
        };
        if let Some(listener) = &sink.listener {
            if let Err(payload) = catch(|| listener(&record)) {
                forget_payload(payload);
                self.counters.contained();
            }
        }
        let unsent = match &sink.channel {
            Some((outlet, _)) => match outlet.send(record) {
                Ok(()) => return,
                Err(r) => {
                    // Full, or (a section that did not hold the stream
                    // open) after the stream ended.
                    self.counters.completion_dropped();
                    r
                }
            },
            None => record,
        };
        drop_quietly(unsent);
    }

    /// Report a run (or a stale run skipped) of the task under `key`.
    // Kept out of the worker's run path, which pays only its branch.
    #[inline(never)]
    pub(crate) fn report_run(
        &self,
        key: Result<TaskKey<K>, ()>,
        ctx: &RunCtx,
        ran: Ran,
        panic: Option<String>,
        periodic: bool,
    ) {
        let outcome = match (ran, panic) {
            // A calendar task reading the wall clock ran nothing.
            (Ran::Waited, _) => return,
            (Ran::Completed, _) => Outcome::Completed(()),
            (Ran::Panicked, msg) => Outcome::Panicked(msg.unwrap_or_default()),
            (Ran::Expired, _) => Outcome::Expired,
        };
        let finished = (ran != Ran::Expired).then(|| self.time.now().at);
        let started = (ran != Ran::Expired).then_some(ctx.started);
        let kind = if periodic {
            CompletionKind::PeriodicRun
        } else {
            CompletionKind::OneShot
        };
        let Ok(key) = key else {
            // The key's `Clone` panicked when the run started: no record.
            self.counters.completion_dropped();
            return;
        };
        let key = match key {
            TaskKey::Keyed(k) => Some(k),
            TaskKey::Anon(_) => None,
        };
        let times = (Some(ctx.due_at), started, finished);
        self.emit(|| Completion::new(key, kind, outcome, times));
    }

    /// Report the end of a periodic task that stopped by itself after the
    /// run timed `last_run`.
    pub(crate) fn report_end(
        &self,
        key: &TaskKey<K>,
        outcome: Outcome<()>,
        last_run: Option<Timing>,
    ) {
        let times = last_run.map_or((None, None, None), |t| (Some(t.due), t.started, t.finished));
        self.emit(|| record(key, CompletionKind::PeriodicEnd, outcome, times));
    }

    /// Report a task removed unrun (due at `due`, `NEVER` for a stand-in).
    pub(crate) fn report_removed(&self, key: &TaskKey<K>, due: i64, periodic: bool, why: Abandon) {
        if self.completions.is_none() {
            return;
        }
        let due = (due != NEVER).then(|| self.time.instant_of(due));
        let kind = if periodic {
            CompletionKind::PeriodicEnd
        } else {
            CompletionKind::OneShot
        };
        self.emit(|| record(key, kind, why.into(), (due, None, None)));
    }

    /// A receiver of the completion channel, if the pool has one.
    pub(crate) fn completion_receiver(&self) -> Option<CompletionReceiver<K>> {
        self.completions.as_ref().and_then(|s| s.receiver())
    }

    /// True when a stream is configured (records and panic messages are
    /// worth making).
    pub(crate) fn reports(&self) -> bool {
        self.completions.is_some()
    }

    /// True when a started task's key must be copied for its run: a
    /// completion stream reports it, or tracing names keys.
    #[inline]
    pub(crate) fn shows_keys(&self) -> bool {
        #[cfg(feature = "tracing")]
        if self.formats_keys() {
            return true;
        }
        self.reports()
    }
}

impl<K> Shared<K> {
    /// Hold the completion stream open for a section that may end tasks
    /// from outside the workers; taken before the section takes the
    /// pool's lock, dropped once its records are sent.
    #[inline]
    pub(crate) fn sending(&self) -> Sending<'_, K> {
        let outlet = self.completions.as_ref().and_then(|s| s.outlet());
        if let Some(outlet) = outlet {
            outlet.hold();
        }
        Sending(outlet.map(|o| &**o))
    }

    /// Run `f`, a section that may end tasks from outside the workers,
    /// holding the stream open ([`sending`](Self::sending)). Without a
    /// channel it is `f` behind a branch: no guard, no unwinding path.
    #[inline]
    pub(crate) fn sending_while<R>(&self, f: impl FnOnce() -> R) -> R {
        match self.completions.as_ref().and_then(|s| s.outlet()) {
            None => f(),
            Some(outlet) => held(outlet, f),
        }
    }

    /// [`sending`](Self::sending) for a section that outlives the borrow:
    /// the pool's drop, whose removals its crew makes after it.
    pub(crate) fn sending_owned(&self) -> StreamHold<K> {
        let outlet = self.completions.as_ref().and_then(|s| s.outlet());
        if let Some(outlet) = outlet {
            outlet.hold();
        }
        StreamHold(outlet.cloned())
    }

    /// The last worker exited: the workers' hold on the stream ends.
    pub(crate) fn workers_exited(&self) {
        if let Some(outlet) = self.completions.as_ref().and_then(|s| s.outlet()) {
            outlet.release();
        }
    }
}

/// `f` run while `outlet`'s stream is held open; out of line, so the
/// sections of a pool without a channel carry no guard.
#[inline(never)]
fn held<K, R>(outlet: &Outlet<K>, f: impl FnOnce() -> R) -> R {
    outlet.hold();
    let _sending = Sending(Some(outlet));
    f()
}

/// A section holding the completion stream open ([`Shared::sending`]).
pub(crate) struct Sending<'a, K>(Option<&'a Outlet<K>>);

impl<K> Drop for Sending<'_, K> {
    fn drop(&mut self) {
        // A failed loom model unwinds through here: no loom operation then.
        if cfg!(loom) && std::thread::panicking() {
            return;
        }
        if let Some(outlet) = self.0 {
            outlet.release();
        }
    }
}

/// An owned [`Sending`] ([`Shared::sending_owned`]); holds nothing by
/// default.
pub(crate) struct StreamHold<K>(Option<Arc<Outlet<K>>>);

impl<K> Default for StreamHold<K> {
    fn default() -> Self {
        StreamHold(None)
    }
}

impl<K> Drop for StreamHold<K> {
    fn drop(&mut self) {
        // A failed loom model unwinds through here: no loom operation then.
        if cfg!(loom) && std::thread::panicking() {
            return;
        }
        if let Some(outlet) = &self.0 {
            outlet.release();
        }
    }
}

/// A record; clones the key (user code: the caller contains it).
fn record<K: Clone>(
    key: &TaskKey<K>,
    kind: CompletionKind,
    outcome: Outcome<()>,
    times: Times,
) -> Completion<K> {
    Completion::new(key.keyed().cloned(), kind, outcome, times)
}

impl<K> Completion<K> {
    /// A record of a task under `key` (`None`: keyless).
    fn new(
        key: Option<K>,
        kind: CompletionKind,
        outcome: Outcome<()>,
        (due, started, finished): Times,
    ) -> Self {
        Completion {
            key,
            kind,
            outcome,
            due,
            started,
            finished,
        }
    }
}

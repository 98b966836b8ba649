//! The task record: what a heap entry can be, and what a worker runs.
//!
//! A heap entry's value is a [`Task`]: a one-shot task, a periodic task
//! between runs, or the stand-in a running periodic task leaves under its
//! key. The heap's stamp of the entry is the task's one stamp: handles and a
//! periodic task's shared state record it after the insert, under the pool
//! lock. Running, expiring or abandoning a task consumes it, so it delivers
//! exactly one outcome.

use super::context::{RunKind, Running};
use super::fault::Faults;
use super::outcome::{Abandon, Outcome, OutcomeSlot, Ran, ReadSlot, RunCtx, Stamps, LOST};
use super::periodic::{PeriodicCtl, PeriodicJob};
use super::time::Now;
use crate::contain::{catch, drop_quietly, forget_payload, panic_message};
use crate::heap::Entry;
use crate::sync::Arc;
use hashbrown::Equivalent;
use std::any::Any;
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

/// A task's identity in the heap: the caller's key, or a sequence number for
/// keyless submissions.
///
/// Its `Hash` is the caller's key's own (no variant tag), so that a
/// borrowed form of the key ([`Keyed`]) hashes as the `TaskKey` it names
/// and a lookup by `&str` finds a `String` key without building one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TaskKey<K> {
    /// Scheduled under a caller's key.
    Keyed(K),
    /// Submitted without a key.
    Anon(u64),
}

impl<K: Hash> Hash for TaskKey<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            TaskKey::Keyed(k) => k.hash(state),
            // A `u64` key writes the number alone; the trailing byte keeps
            // keyless number `n` from sharing key `n`'s hash (equal hashes
            // would only cost comparisons: `Eq` tells the variants apart).
            TaskKey::Anon(n) => {
                state.write_u64(*n);
                state.write_u8(0xA5);
            }
        }
    }
}

/// A borrowed form `Q` of a caller's key, looked up as the
/// [`TaskKey::Keyed`] it names: it hashes as `Q` (which, by `Borrow`'s
/// contract, is as the key hashes) and matches a keyed entry whose key
/// borrows as an equal `Q`, never a keyless one. Building it allocates
/// nothing.
pub(crate) struct Keyed<'a, Q: ?Sized>(pub(crate) &'a Q);

impl<Q: ?Sized + Hash> Hash for Keyed<'_, Q> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl<K: Borrow<Q>, Q: ?Sized + Eq> Equivalent<TaskKey<K>> for Keyed<'_, Q> {
    fn equivalent(&self, key: &TaskKey<K>) -> bool {
        matches!(key, TaskKey::Keyed(k) if k.borrow() == self.0)
    }
}

/// What a pool lookup takes: a [`TaskKey`] itself, or a [`Keyed`] borrowed
/// form of a caller's key.
pub(crate) trait Lookup<K>: Hash + Equivalent<TaskKey<K>> {}

impl<K, Q: ?Sized + Hash + Equivalent<TaskKey<K>>> Lookup<K> for Q {}

impl<K> TaskKey<K> {
    /// The caller's key, if any.
    pub(crate) fn keyed(&self) -> Option<&K> {
        match self {
            TaskKey::Keyed(k) => Some(k),
            TaskKey::Anon(_) => None,
        }
    }
}

/// An entry of the pool's heap.
pub(crate) type PoolEntry<K> = Entry<TaskKey<K>, Task>;

/// What a heap entry holds.
pub(crate) enum Task {
    /// A one-shot task without a handle.
    Once(Job),
    /// A one-shot task made with a handle (which may be gone since).
    Watched(Watched),
    /// A periodic task waiting for its next run.
    Periodic(Box<PeriodicJob>),
    /// Left under a running periodic task's key (due never), so that cancel,
    /// replace and shutdown still find the task; it delivers the task's
    /// final outcome if it is removed.
    StandIn(Arc<PeriodicCtl>),
}

impl Task {
    /// True for periodic tasks and their stand-ins.
    pub(crate) fn is_periodic(&self) -> bool {
        !matches!(self, Task::Once(_) | Task::Watched(_))
    }

    /// The wall-clock tick a calendar task waits for, if it is one (see
    /// `PeriodicJob::pending_tick`).
    pub(crate) fn pending_tick(&self) -> Option<jiff::Timestamp> {
        match self {
            Task::Periodic(job) => job.pending_tick(),
            _ => None,
        }
    }

    /// True for a stand-in.
    pub(crate) fn is_stand_in(&self) -> bool {
        matches!(self, Task::StandIn(_))
    }

    /// True for a retried one-shot task or its stand-in.
    pub(crate) fn is_retry(&self) -> bool {
        match self {
            Task::Once(_) | Task::Watched(_) => false,
            Task::Periodic(job) => job.ctl().is_retry(),
            Task::StandIn(ctl) => ctl.is_retry(),
        }
    }

    /// The shared state of a periodic task or stand-in.
    fn periodic_ctl(&self) -> Option<Arc<PeriodicCtl>> {
        match self {
            Task::Once(_) | Task::Watched(_) => None,
            Task::Periodic(job) => Some(job.ctl().clone()),
            Task::StandIn(ctl) => Some(ctl.clone()),
        }
    }

    /// Drop the task unrun because user code the pool ran for it (its key's
    /// traits) panicked: it is told `Panicked` ([`LOST`]).
    pub(crate) fn lose(self) {
        match self {
            // Its delivery tells it LOST when dropped.
            Task::Once(job) => drop_quietly(job),
            Task::Watched(job) => drop_quietly(job),
            Task::Periodic(job) => job.lose(),
            Task::StandIn(ctl) => ctl.lose(),
        }
    }

    /// Drop the task unrun and deliver `why` as its (final) outcome.
    pub(crate) fn abandon(self, why: Abandon) {
        match self {
            Task::Once(mut job) => job.abandon(why),
            Task::Watched(job) => job.abandon(why),
            Task::Periodic(job) => job.abandon(why),
            Task::StandIn(ctl) => ctl.abandon(why),
        }
    }
}

/// Run `step` on `entry`, which consumes it, containing a panic of the user
/// code it runs (the entry's key): the task, dropped inside, is then told
/// `Panicked` ([`LOST`]) and `None` comes back.
pub(crate) fn or_lose<K, R>(
    entry: PoolEntry<K>,
    step: impl FnOnce(PoolEntry<K>) -> R,
) -> Option<R> {
    let periodic = entry.value.periodic_ctl();
    match catch(move || step(entry)) {
        Ok(r) => Some(r),
        Err(payload) => {
            // A one-shot task's delivery told it when it was dropped.
            forget_payload(payload);
            if let Some(ctl) = periodic {
                ctl.lose();
            }
            None
        }
    }
}

/// A claimed task, ready to run: a stand-in is never claimed.
pub(crate) enum Runnable {
    /// A one-shot task without a handle.
    Once(Job),
    /// A one-shot task made with a handle.
    Watched(Watched),
    /// One run of a periodic task.
    Periodic(Box<PeriodicJob>),
}

/// A one-shot task as the pool sees it; each method consumes it and
/// delivers its outcome. `Any`, so a refused task can give its closure
/// back (`refused.rs`).
pub(crate) trait OnceJob: Send {
    /// Run on a worker, catching a panic; `finish` reads the pool's clock
    /// once the run returned. A panic's message goes to `panic` when
    /// `ctx.keep_panic` asks for it.
    fn run(&mut self, ctx: &RunCtx, finish: &dyn Fn() -> Now, panic: &mut Option<String>) -> Ran;
    /// Skip the run because it is stale.
    fn expire(&mut self, claimed: Instant);
    /// Drop the task unrun and deliver `why`.
    fn abandon(&mut self, why: Abandon);
    /// The closure back, unrun, boxed as `Option<F>`.
    fn take_closure(&mut self) -> Box<dyn Any + Send>;
}

/// A one-shot task without a handle, as a heap entry holds it: a closure
/// of up to two words (an `Arc` and a key, a channel's sender) is stored
/// in the entry itself, a larger one in an allocation of its own.
///
/// A `Box` per task cost the handle-less burst about a fifth of its CPU:
/// the producer allocates every closure and a worker frees it on another
/// CPU, so glibc's malloc found its thread cache empty each time and took
/// the chunk back from the arena, a cache miss on each side (`perf`:
/// `_int_malloc` 15% and `_int_free` 7% of the burst's samples). Kept in
/// the entry, the closure travels in the cache lines the worker reads
/// anyway (`docs/benchmarks.md`, "Closures kept in the entry"). The entry
/// grows by 16 bytes for every task; a closure that fits saves the 32-byte
/// chunk glibc gives the smallest allocation.
pub(crate) type Job = smallbox::SmallBox<dyn OnceJob, smallbox::space::S2>;

/// A [`Job`] running `f`.
pub(crate) fn once_job<F: FnOnce() + Send + 'static>(f: F) -> Job {
    // SAFETY: `smallbox!` (the crate's documented constructor of an
    // unsized `SmallBox` on stable Rust) expands to an `unsafe` call of
    // `SmallBox::new_unchecked(val, ptr)`, whose contract is that `ptr`
    // points at `val` itself, so that the `dyn OnceJob` metadata it
    // carries (the vtable) is `Detached<F>`'s. The macro takes that
    // pointer from the value it was given and moves the value in with it;
    // nothing here can make them disagree. This is the crate's only
    // `unsafe` (`lib.rs` denies it everywhere else).
    smallbox::smallbox!(Detached::new(f))
}

/// The message of a panic nobody holds a handle for, if a completion stream
/// wants it (`ctx.keep_panic`); the payload is disposed of either way.
fn kept_message(ctx: &RunCtx, payload: Box<dyn std::any::Any + Send>) -> Option<String> {
    if ctx.keep_panic {
        Some(panic_message(payload))
    } else {
        forget_payload(payload);
        None
    }
}

/// A one-shot task without a handle: its outcome is only counted (and
/// reported to a completion stream, if the pool has one).
pub(crate) struct Detached<F>(Option<F>);

impl<F> Detached<F> {
    /// A task running `f`.
    pub(crate) fn new(f: F) -> Self {
        Detached(Some(f))
    }
}

impl<F> OnceJob for Detached<F>
where
    F: FnOnce() + Send + 'static,
{
    fn run(&mut self, ctx: &RunCtx, _: &dyn Fn() -> Now, panic: &mut Option<String>) -> Ran {
        let Some(f) = self.0.take() else {
            debug_assert!(false, "a task ran twice");
            return Ran::Completed;
        };
        let running = Running::enter(ctx, RunKind::Once, 1);
        let result = catch_unwind(AssertUnwindSafe(f));
        drop(running);
        match result {
            Ok(()) => Ran::Completed,
            Err(payload) => {
                *panic = kept_message(ctx, payload);
                Ran::Panicked
            }
        }
    }

    fn expire(&mut self, _: Instant) {
        drop_quietly(self.0.take());
    }

    fn abandon(&mut self, _: Abandon) {
        drop_quietly(self.0.take());
    }

    fn take_closure(&mut self) -> Box<dyn Any + Send> {
        Box::new(self.0.take())
    }
}

/// A one-shot task made with a handle, as the pool holds it: its closure
/// and its outcome slot live in one allocation ([`Joint`]) that the handle
/// shares, so such a task costs one allocation, not two. Consumed once (run,
/// expire, abandon); dropped unconsumed, it tells the handle `Panicked`
/// ([`LOST`]), so that no handle waits for ever.
pub(crate) struct Watched(Option<Arc<dyn WatchedJob>>);

/// A task's shared allocation as its pool-side holder drives it. `watched`
/// says whether a handle is still there to read the outcome: when it is
/// not, nothing is delivered (no lock, no stamps, no wake-up).
pub(crate) trait WatchedJob: Send + Sync {
    /// Run the closure, catching a panic; see [`OnceJob::run`].
    fn run(
        &self,
        ctx: &RunCtx,
        finish: &dyn Fn() -> Now,
        panic: &mut Option<String>,
        watched: &dyn Fn() -> bool,
    ) -> Ran;
    /// Drop the closure unrun and deliver `outcome` with `stamps`, if
    /// `watched`.
    fn end(&self, outcome: Abandoned, stamps: Stamps, watched: bool);
    /// The allocation as `Any`, to take a refused task's closure back.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// How a watched task ends without running.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Abandoned {
    /// Skipped as stale.
    Expired,
    /// Removed for this reason.
    Removed(Abandon),
    /// Dropped before it delivered.
    Lost,
}

/// The outcome slot a handle reads, behind the allocation it shares with
/// the task.
pub(crate) trait SlotOf<T>: Send + Sync {
    /// The slot.
    fn slot(&self) -> &dyn ReadSlot<T>;
}

/// The one allocation of a task made with a handle: its outcome slot,
/// which holds the closure until it is taken out to run or drop it, and
/// then the outcome, in the same space under the same lock.
pub(crate) struct Joint<F, T> {
    /// The closure, then the outcome.
    slot: OutcomeSlot<T, F>,
}

impl<F, T> Joint<F, T> {
    /// A task running `f`, due at `due`.
    pub(crate) fn new(f: F, due: Instant, faults: Faults) -> Self {
        Joint {
            slot: OutcomeSlot::with_job(f, due, faults),
        }
    }

    /// The closure, the first time.
    fn take(&self) -> Option<F> {
        self.slot.take_job()
    }
}

impl<F: Send, T: Send> SlotOf<T> for Joint<F, T> {
    fn slot(&self) -> &dyn ReadSlot<T> {
        &self.slot
    }
}

impl<F, T> WatchedJob for Joint<F, T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    fn run(
        &self,
        ctx: &RunCtx,
        finish: &dyn Fn() -> Now,
        panic: &mut Option<String>,
        watched: &dyn Fn() -> bool,
    ) -> Ran {
        let Some(f) = self.take() else {
            debug_assert!(false, "a task ran twice");
            return Ran::Completed;
        };
        let running = Running::enter(ctx, RunKind::Once, 1);
        let result = catch_unwind(AssertUnwindSafe(f));
        drop(running);
        if !watched() {
            // Skip delivering the outcome, and the clock read that would
            // date it.
            return match result {
                Ok(v) => {
                    drop_quietly(v);
                    Ran::Completed
                }
                Err(payload) => {
                    *panic = kept_message(ctx, payload);
                    Ran::Panicked
                }
            };
        }
        let (ran, outcome) = match result {
            Ok(v) => (Ran::Completed, Outcome::Completed(v)),
            Err(payload) => {
                let msg = panic_message(payload);
                if ctx.keep_panic {
                    *panic = Some(msg.clone());
                }
                (Ran::Panicked, Outcome::Panicked(msg))
            }
        };
        let stamps = Stamps::ran(ctx.started, finish().at);
        self.slot.set(outcome, stamps);
        ran
    }

    fn end(&self, how: Abandoned, stamps: Stamps, watched: bool) {
        drop_quietly(self.take());
        if watched {
            let outcome = match how {
                Abandoned::Expired => Outcome::Expired,
                Abandoned::Removed(why) => why.into(),
                Abandoned::Lost => Outcome::Panicked(LOST.to_string()),
            };
            self.slot.set(outcome, stamps);
        }
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

impl Watched {
    /// The pool's side of `joint`.
    pub(crate) fn new<F, T>(joint: Arc<Joint<F, T>>) -> Self
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        Watched(Some(joint))
    }

    /// Run it; see [`OnceJob::run`].
    pub(crate) fn run(
        mut self,
        ctx: &RunCtx,
        finish: &dyn Fn() -> Now,
        panic: &mut Option<String>,
    ) -> Ran {
        let Some(job) = self.0.take() else {
            return Ran::Completed;
        };
        let ran = job.run(ctx, finish, panic, &|| Arc::strong_count(&job) > 1);
        // The last holder drops the slot, and with it an outcome nobody
        // took: user code.
        drop_quietly(job);
        ran
    }

    /// Skip the run because it is stale.
    pub(crate) fn expire(mut self, claimed: Instant) {
        self.end(Abandoned::Expired, Stamps::claimed(claimed));
    }

    /// Drop the task unrun and deliver `why`.
    pub(crate) fn abandon(mut self, why: Abandon) {
        self.end(Abandoned::Removed(why), Stamps::unclaimed());
    }

    /// End it unrun, delivering only if a handle is still there.
    fn end(&mut self, how: Abandoned, stamps: Stamps) {
        if let Some(job) = self.0.take() {
            let watched = Arc::strong_count(&job) > 1;
            job.end(how, stamps, watched);
            drop_quietly(job);
        }
    }

    /// The closure back, unrun, delivering nothing: for a task refused
    /// before its handle was made.
    pub(crate) fn into_closure<F, T>(mut self) -> Option<F>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let job = self.0.take()?.into_any();
        job.downcast::<Joint<F, T>>().ok()?.take()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.end(Abandoned::Lost, Stamps::unclaimed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    fn ctx() -> RunCtx {
        let now = Instant::now();
        RunCtx {
            due: 0,
            due_at: now,
            started: now,
            started_ns: 0,
            keep_panic: true,
        }
    }

    fn finish() -> Now {
        Now {
            at: Instant::now(),
            ns: 0,
        }
    }

    #[test]
    fn a_borrowed_key_hashes_and_matches_as_the_keyed_task_key() {
        use std::hash::BuildHasher;
        let state = foldhash::fast::RandomState::default();
        let owned: TaskKey<String> = TaskKey::Keyed("lease".to_string());
        assert_eq!(state.hash_one(&owned), state.hash_one(Keyed("lease")));
        assert!(Keyed("lease").equivalent(&owned));
        assert!(!Keyed("other").equivalent(&owned));
        // A keyless task is never a key, even with the same number.
        let anon: TaskKey<u64> = TaskKey::Anon(7);
        assert!(!Keyed(&7u64).equivalent(&anon));
        assert!(Keyed(&7u64).equivalent(&TaskKey::Keyed(7)));
        assert_ne!(state.hash_one(&anon), state.hash_one(TaskKey::Keyed(7u64)));
    }

    #[test]
    fn a_two_word_closure_is_kept_inline_and_a_larger_one_boxed_each_run_once() {
        let runs = Arc::new(AtomicUsize::new(0));
        let (r, key) = (runs.clone(), 7usize);
        let mut small = once_job(move || {
            r.fetch_add(key, SeqCst);
        });
        let (r, wide) = (runs.clone(), [1usize; 4]);
        let mut large = once_job(move || {
            r.fetch_add(wide.iter().sum(), SeqCst);
        });
        assert!(!small.is_heap(), "an Arc and a word fit the entry");
        assert!(large.is_heap(), "five words do not");
        let mut panic = None;
        assert_eq!(small.run(&ctx(), &finish, &mut panic), Ran::Completed);
        assert_eq!(large.run(&ctx(), &finish, &mut panic), Ran::Completed);
        assert_eq!(runs.load(SeqCst), 11);
        // Each closure, with its clone of the Arc, is gone once it ran.
        assert_eq!(Arc::strong_count(&runs), 1);
        drop((small, large));
        assert_eq!(Arc::strong_count(&runs), 1);
    }

    #[test]
    fn an_inline_closure_dropped_unrun_or_panicking_is_dropped_once() {
        let held = Arc::new(());
        let h = held.clone();
        let mut abandoned = once_job(move || drop(h));
        let h = held.clone();
        let mut panicking = once_job(move || {
            let _h = h;
            panic!("inline");
        });
        let h = held.clone();
        let unrun = once_job(move || drop(h));
        assert_eq!(Arc::strong_count(&held), 4);
        abandoned.abandon(Abandon::Cancelled);
        assert_eq!(Arc::strong_count(&held), 3);
        let mut panic = None;
        assert_eq!(panicking.run(&ctx(), &finish, &mut panic), Ran::Panicked);
        assert_eq!(panic.as_deref(), Some("inline"));
        assert_eq!(Arc::strong_count(&held), 2);
        drop((abandoned, panicking, unrun));
        assert_eq!(Arc::strong_count(&held), 1);
    }

    #[test]
    fn a_job_gives_its_closure_back_unrun_inline_or_boxed() {
        fn back<F: FnOnce() + Send + 'static>(f: F) -> F {
            let mut job = once_job(f);
            let f = job.take_closure().downcast::<Option<F>>();
            f.ok().and_then(|f| *f).expect("its own closure")
        }
        let sum = Arc::new(AtomicUsize::new(0));
        let s = sum.clone();
        back(move || {
            s.fetch_add(3, SeqCst);
        })();
        let (s, wide) = (sum.clone(), [2usize; 6]);
        back(move || {
            s.fetch_add(wide.iter().sum(), SeqCst);
        })();
        assert_eq!(sum.load(SeqCst), 15);
        assert_eq!(Arc::strong_count(&sum), 1);
    }
}

//! Worker threads: block on the hand-off channel and serve what arrives.
//!
//! # Ground rules
//!
//! - A worker that is not leading never looks at a clock to decide
//!   anything: it blocks in `recv` and runs each task it receives outside
//!   every pool lock. Receiving the [`Lead`](super::handoff::Lead) token
//!   makes it the leader until it passes the token on (`leader.rs`).
//! - After a run it takes the lock only when the run leaves something to
//!   settle: a periodic task to put back (step 10) or an exclusive key to
//!   release (step 11). See `docs/protocol.md`.
//! - A task's own panic is caught in its run. Any other user code a worker
//!   runs (a key's traits while settling, the `Drop` of a key) is contained
//!   too: a panic there is counted and the worker keeps serving; keys are
//!   dropped only after the lock is released.

use super::fault::Fault;
use super::handoff::{Claimed, Msg};
use super::leader;
use super::outcome::{Outcome, Ran, RunCtx};
use super::periodic::{After, PeriodicJob};
use super::shared::{Key, Shared, State};
use super::task::{PoolEntry, Runnable, Task, TaskKey};
use crate::contain::{catch, drop_quietly, forget_payload};
use crate::heap::Inserted;

/// What a run leaves to settle under the lock.
enum Finished {
    /// Nothing: a one-shot task delivered its outcome.
    Done,
    /// A periodic task to put back at this due time.
    Again(i64, Box<PeriodicJob>),
    /// A periodic task that stops by itself with this outcome.
    Stop(Box<PeriodicJob>, Outcome<()>),
}

/// What settling leaves to do once the lock is released.
enum Leftover<K> {
    /// Nothing.
    Nothing,
    /// What the heap handed back when the task went back in for its
    /// stand-in (the stand-in and the spare key), to drop outside the lock.
    Replaced(Task, TaskKey<K>),
    /// A periodic task whose stand-in was removed: whoever removed it
    /// delivered the outcome, so it is only dropped.
    Drop(Box<PeriodicJob>),
    /// A periodic task stopping by itself, with its removed stand-in entry.
    Finish(Box<PeriodicJob>, Outcome<()>, PoolEntry<K>),
}

/// A worker's whole life; `index` picks its counters.
pub(crate) fn work<K: Key>(shared: &Shared<K>, index: usize) {
    loop {
        match shared.rx.recv() {
            Ok(Msg::One(c)) => contain(shared, || execute(shared, index, c)),
            Ok(Msg::Run(part)) => {
                for c in part {
                    contain(shared, || execute(shared, index, c));
                }
            }
            Ok(Msg::Free(buffers)) => drop(buffers),
            // After sending the exit pill the former leader keeps serving:
            // tasks claimed on arrival may be queued ahead of the pill, and
            // with one worker nobody else would run them.
            Ok(Msg::Lead(token)) => contain(shared, || leader::lead(shared, token)),
            Ok(Msg::Exit) | Err(_) => {
                // Every worker passes the pill on, so one Exit stops them all;
                // the runs queued before it are served first (FIFO).
                let _ = shared.tx.send(Msg::Exit);
                return;
            }
        }
    }
}

/// Run `step`, containing a panic of user code outside a task's run (which
/// catches its own): it is counted and the worker keeps serving.
fn contain<K>(shared: &Shared<K>, step: impl FnOnce()) {
    if let Err(payload) = catch(step) {
        forget_payload(payload);
        shared.counters.contained();
    }
}

/// Run one claimed task, then settle what the run left.
fn execute<K: Key>(shared: &Shared<K>, index: usize, c: Claimed<K>) {
    let finished = run_claimed(shared, index, c.task, c.due, c.claimed);
    let exclusive = shared.config.exclusive_keys && matches!(c.key, TaskKey::Keyed(_));
    if matches!(finished, Finished::Done) && !exclusive {
        return drop_key(shared, c.key);
    }
    settle(shared, index, c.key, finished, exclusive);
}

/// Drop a key (user code) outside every lock, containing its panic.
fn drop_key<K>(shared: &Shared<K>, key: TaskKey<K>) {
    if let TaskKey::Keyed(_) = key {
        if let Err(payload) = catch(move || drop(key)) {
            forget_payload(payload);
            shared.counters.contained();
        }
    }
}

/// Run (or, past the staleness tolerance, expire) a claimed task outside
/// every lock, and count the run.
fn run_claimed<K>(
    shared: &Shared<K>,
    index: usize,
    task: Runnable,
    due: i64,
    claimed: std::time::Instant,
) -> Finished {
    let started = shared.time.now();
    let ctx = RunCtx {
        due,
        due_at: shared.time.instant_of(due),
        claimed,
        started: started.at,
        started_ns: started.ns,
    };
    let late = started.ns.saturating_sub(due);
    let stale = shared.config.expire_after.is_some_and(|t| late > t);
    let finish = || shared.time.now();
    let (ran, finished) = match task {
        Runnable::Once(job) if stale => {
            job.expire(claimed);
            (Ran::Expired, Finished::Done)
        }
        Runnable::Once(job) => (job.run(&ctx, &finish), Finished::Done),
        Runnable::Periodic(mut job) => {
            let (ran, after) = if stale {
                (Ran::Expired, job.expire(&ctx))
            } else {
                job.run(&ctx, &finish)
            };
            let finished = match after {
                After::Again(next) => Finished::Again(next, job),
                After::Stop(outcome) => Finished::Stop(job, outcome),
            };
            (ran, finished)
        }
    };
    let periodic = !matches!(finished, Finished::Done);
    shared
        .counters
        .ran(index, (!stale).then_some(late), ran, periodic);
    finished
}

/// Steps 10 and 11, under the lock: put a periodic task back (or stop it),
/// release an exclusive key, and notify the leader if either moved the head
/// or emptied a draining pool.
fn settle<K: Key>(
    shared: &Shared<K>,
    index: usize,
    key: TaskKey<K>,
    finished: Finished,
    exclusive: bool,
) {
    let mut let_go = Vec::new();
    let leftover = {
        let mut guard = shared.state.lock();
        let st = &mut *guard;
        let head = st.heap.peek_due();
        let leftover = put_back(shared, st, &key, finished);
        let put_back_moved = st.heap.peek_due() != head;
        let head = st.heap.peek_due();
        if exclusive {
            let_go = st.exclusive.release(&key, &mut st.heap);
        }
        let release_moved = st.heap.peek_due() != head;
        shared.notify_if_drained(st);
        if (put_back_moved && !shared.faults.has(Fault::ReinsertNoNotify))
            || (release_moved && !shared.faults.has(Fault::ExclusiveReleaseNoNotify))
        {
            shared.leader_cv.notify_one();
        }
        leftover
    };
    drop_key(shared, key);
    let_go.into_iter().for_each(|k| drop_key(shared, k));
    match leftover {
        Leftover::Nothing => {}
        Leftover::Replaced(old, key) => {
            drop_quietly(old);
            drop_key(shared, key);
        }
        Leftover::Drop(job) => drop_quietly(job),
        Leftover::Finish(job, outcome, stand_in) => {
            drop_quietly(stand_in);
            shared
                .counters
                .stopped(index, matches!(outcome, Outcome::Panicked(_)));
            job.finish(outcome);
        }
    }
}

/// Step 10: swap a periodic task back in for its stand-in at its next due
/// time, only if the stand-in is still there (same stamp); a task that
/// stops by itself removes its stand-in, if it is still there.
fn put_back<K: Key>(
    shared: &Shared<K>,
    st: &mut State<K>,
    key: &TaskKey<K>,
    finished: Finished,
) -> Leftover<K> {
    match finished {
        Finished::Done => Leftover::Nothing,
        Finished::Again(due, job) => {
            let stand_in = st.heap.get(key).map(|(_, seq)| seq);
            let found = stand_in == Some(job.ctl().seq());
            if !found && !shared.faults.has(Fault::ReinsertWithoutStandInCheck) {
                return Leftover::Drop(job);
            }
            let ctl = job.ctl().clone();
            match st.heap.insert(key.clone(), due, Task::Periodic(job)) {
                Inserted::New { seq } => {
                    ctl.set_seq(seq);
                    Leftover::Nothing
                }
                Inserted::Replaced { seq, old, key, .. } => {
                    ctl.set_seq(seq);
                    Leftover::Replaced(old, key)
                }
            }
        }
        Finished::Stop(job, outcome) => match st.heap.remove_seq(key, job.ctl().seq()) {
            Some(stand_in) => Leftover::Finish(job, outcome, stand_in),
            None => Leftover::Drop(job),
        },
    }
}

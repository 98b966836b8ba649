//! Worker threads: block on the hand-off channel and serve what arrives.
//!
//! A worker that is not leading never looks at a clock: it blocks in `recv`
//! and runs each task it receives outside every pool lock. Receiving the
//! [`Lead`](super::leader::Lead) token makes it the leader until it passes the
//! token on. See `docs/protocol.md`.

#[cfg(loom)]
use super::fault::Fault;
use super::leader::{self, Lead};
use super::task::{drop_quietly, BoxJob, Next, Ran, RunCtx};
use super::{Shared, TaskKey};
use std::hash::Hash;
use std::time::Instant;

/// A task the leader claimed, with what the worker needs to run it.
pub(crate) struct Claimed<K> {
    /// The task.
    pub(crate) job: BoxJob<K>,
    /// Its key (for periodic re-insertion and exclusive keys).
    pub(crate) key: TaskKey<K>,
    /// Its due time, nanoseconds since the pool's epoch.
    pub(crate) due: i64,
    /// When the leader claimed it.
    pub(crate) claimed: Instant,
}

/// What travels through the hand-off channel.
pub(crate) enum Msg<K> {
    /// Claimed tasks, in due order: run each and deliver its outcome.
    Run(Vec<Claimed<K>>),
    /// One task claimed by the call that scheduled it.
    One(Claimed<K>),
    /// The leadership token: exactly one exists while the pool runs.
    Lead(Lead),
    /// Stop: pass it on to the next worker, then exit.
    Exit,
    /// Buffers the heap gave up, to free outside every lock. Sent last in a
    /// hand-off, so the worker that receives it has nothing else to do.
    Free(Box<dyn std::any::Any + Send>),
}

/// A worker's whole life; `index` picks its lateness histogram.
pub(crate) fn work<K: Hash + Eq + Clone + Send + 'static>(shared: &Shared<K>, index: usize) {
    loop {
        match shared.rx.recv() {
            Ok(Msg::One(c)) => {
                execute(shared, index, c);
            }
            Ok(Msg::Run(claimed)) => {
                for c in claimed {
                    execute(shared, index, c);
                }
            }
            Ok(Msg::Free(buffers)) => drop(buffers),
            // After sending the exit pill the former leader keeps serving:
            // tasks claimed on arrival may be queued ahead of the pill, and
            // with one worker nobody else would run them.
            Ok(Msg::Lead(token)) => leader::lead(shared, token),
            Ok(Msg::Exit) | Err(_) => {
                // Every worker passes the pill on, so one Exit stops them all;
                // the Runs queued before it are served first (FIFO).
                let _ = shared.tx.send(Msg::Exit);
                return;
            }
        }
    }
}

/// Run (or expire) one claimed task outside every lock, then put a periodic
/// task back and release an exclusive key under the lock.
fn execute<K: Hash + Eq + Clone + Send + 'static>(shared: &Shared<K>, index: usize, c: Claimed<K>) {
    let (started, started_ns) = shared.now_pair();
    let ctx = RunCtx {
        due: c.due,
        due_at: shared.instant_of(c.due).unwrap_or(started),
        claimed: c.claimed,
        started,
        started_ns,
    };
    let late = started_ns.saturating_sub(c.due);
    let stale = matches!(shared.expire_after, Some(tolerance) if late > tolerance);
    let (ran, next) = if stale {
        (Ran::Expired, c.job.expire(&ctx))
    } else {
        c.job.run(&ctx, &|| shared.now_pair())
    };
    let periodic = !matches!(next, Next::Done);
    let late = (!stale).then_some(late);
    shared.counters.ran(index, late, ran, periodic);
    let exclusive = shared.exclusive && matches!(c.key, TaskKey::Keyed(_));
    if matches!(next, Next::Done) && !exclusive {
        return;
    }

    let mut to_drop: Option<BoxJob<K>> = None;
    let mut to_finish = None;
    {
        let mut st = shared.state.lock();
        let head = st.heap.peek_due();
        match next {
            Next::Done => {}
            Next::Again { due, job } => {
                // Put the task back only in place of its own stand-in; if the
                // stand-in is gone, whoever removed it delivered the outcome.
                let stand_in = st.heap.get(&c.key).map(|(_, seq)| seq);
                #[cfg(loom)]
                let stand_in = if shared.faulty(Fault::ReinsertWithoutStandInCheck) {
                    Some(job.seq())
                } else {
                    stand_in
                };
                if stand_in == Some(job.seq()) {
                    job.set_seq(st.heap.next_seq());
                    let _ = st.heap.insert(c.key.clone(), due, job);
                } else {
                    to_drop = Some(job);
                }
            }
            Next::Stop { job, outcome } => {
                if st.heap.remove_seq(&c.key, job.seq()).is_some() {
                    to_finish = Some((job, outcome));
                } else {
                    to_drop = Some(job);
                }
            }
        }
        #[cfg(loom)]
        let head = if shared.faulty(Fault::ReinsertNoNotify) {
            st.heap.peek_due()
        } else {
            head
        };
        if exclusive {
            st.release_key(&c.key);
        }
        shared.notify_if_drained(&st);
        #[cfg(loom)]
        let head = if shared.faulty(Fault::ExclusiveReleaseNoNotify) {
            st.heap.peek_due()
        } else {
            head
        };
        if st.heap.peek_due() != head {
            shared.leader_cv.notify_one();
        }
    }
    if let Some(job) = to_drop {
        drop_quietly(job);
    }
    if let Some((job, outcome)) = to_finish {
        shared.counters.stopped_by_panic(index);
        job.finish(outcome);
    }
}

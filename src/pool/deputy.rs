//! Deputies: free workers that wait until a due time they saw pending,
//! beside the leader, protocol steps 3a and 4a (`docs/protocol.md`).
//!
//! # Ground rules
//!
//! - A deputy is a follower whose receive has a deadline: shortly past the
//!   real instant of the earliest due time it saw pending when it last
//!   looked at the heap (step 4), as the wake policy says
//!   (`wake::deputy_until`). The mailbox admits it under its own lock,
//!   against the number of deputies the wake policy allows
//!   (`wake::deputies`); past that number a free worker waits untimed.
//! - A deputy is the leader's backup: a leader that finds work due while a
//!   deputy will wake within the backup's delay passes the lead quietly
//!   (step 5), and the deputy takes it if the leader has not come back for
//!   it by then.
//! - A deputy never waits on the leader's condition variable: the leader
//!   stays the one thread a new earlier task, a cancel and a shutdown wake.
//!   When its deadline passes it starts what is due as any worker does
//!   (step 4), so a due task does not wait for the leader's thread while
//!   another is free.
//! - Its deadline is a due time it saw pending, never a period: an idle
//!   pool's deputies wait untimed, and so do all free workers under a
//!   clock moved by hand (no real deadline) and under loom.
//! - The leader asks for a deputy (`Msg::Watch`, step 3a) at most once per
//!   head, with the state lock released, when none stands over the head it
//!   is about to wait for.

use super::handoff::Msg;
use super::shared::{Key, Shared, State};
use super::time::NEVER;
use super::wake::{self, WakePlan};
use std::time::{Duration, Instant};

/// What a deputy watches over: the earliest due time it saw pending (the
/// end of the head's batch), and how far past it to wake (`wake::backup`),
/// both read under the state lock when it last looked at the heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Watch {
    /// The due time, on the pool's clock.
    pub(crate) due: i64,
    /// How far past its real instant the deputy wakes.
    pub(crate) backup: Duration,
}

/// What a free worker's wait brought.
pub(crate) enum Received {
    /// A message.
    Msg(Msg),
    /// The deputy's deadline passed: start what is due.
    Rescue,
}

/// Step 4a, a free worker's wait: for the next message; and, for a worker
/// the mailbox admits as a deputy, only until the real instant of `watch`,
/// the earliest due time it saw pending.
pub(crate) fn receive<K>(shared: &Shared<K>, watch: Option<Watch>) -> Received {
    let limit = wake::deputies(shared.config.workers);
    let deadline = watch.filter(|w| w.due < NEVER && limit > 0).and_then(|w| {
        Some(wake::deputy_until(
            shared.time.sleep_deadline(w.due)?,
            w.backup,
        ))
    });
    match shared.handoff.recv_watching(deadline, limit) {
        Some(msg) => Received::Msg(msg),
        None => Received::Rescue,
    }
}

/// Step 3a: before a timed wait, whether the leader asks a free worker to
/// stand deputy over the head (`Msg::Watch`): the pool has deputies, the
/// head's batch has a real `deadline` (read by the leader's check in the
/// same critical section) that no deputy stands over (one watching a
/// later due time, such as the head a new earlier task preempted, does not
/// count), this leadership has not asked over this head yet (`asked`,
/// updated), and the due time is sparse by the wake policy (on dense due
/// times a worker back from a run stands deputy within a due time or two).
/// Otherwise a deputy's watch comes only from a look at the heap after a
/// run, so after an idle spell none would stand.
pub(crate) fn asks_for_one<K: Key>(
    shared: &Shared<K>,
    st: &State<K>,
    plan: &WakePlan,
    deadline: Option<Instant>,
    asked: &mut Option<i64>,
) -> bool {
    let head = st.pending.peek_due();
    if wake::deputies(shared.config.workers) == 0 || *asked == head {
        return false;
    }
    let Some(deadline) = deadline else {
        return false;
    };
    if plan.dense(deadline, shared.latest_start(st))
        || shared
            .handoff
            .watched_by(wake::deputy_until(deadline, shared.backup(st)))
    {
        return false;
    }
    *asked = head;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::completion::Observe;
    use crate::pool::intake::Arrival;
    use crate::pool::task::{once_job, Task, TaskKey};
    use crate::pool::wake::Precision;
    use std::time::Duration;

    /// Step 3a as the leader's check calls it: over the head's batch as
    /// that check reads it.
    fn ask(
        shared: &Shared<u64>,
        st: &State<u64>,
        plan: &WakePlan,
        asked: &mut Option<i64>,
    ) -> bool {
        let deadline = shared
            .batch(st)
            .and_then(|b| shared.time.sleep_deadline(b.due));
        asks_for_one(shared, st, plan, deadline, asked)
    }

    /// A pool's engine without threads, for `workers` workers, with one
    /// task pending an hour from now.
    fn engine_with_far_task(workers: usize) -> Shared<u64> {
        engine_with_tasks(workers, &[0])
    }

    /// A pool's engine without threads, for `workers` workers, with a task
    /// pending an hour from now plus each of `after` (nanoseconds).
    fn engine_with_tasks(workers: usize, after: &[i64]) -> Shared<u64> {
        let config = crate::TimerPool::<u64>::builder()
            .workers(workers)
            .validate();
        let shared = Shared::new(config.expect("valid"), None, Observe::default());
        let hour = shared.time.now().ns + 3_600_000_000_000;
        let arrivals = after.iter().enumerate().map(|(k, ns)| Arrival {
            key: TaskKey::Keyed(k as u64 + 1),
            due: hour + ns,
            task: Task::Once(once_job(|| ())),
        });
        shared.admit(arrivals, |_, _| ()).expect("admitted");
        shared
    }

    #[test]
    fn the_leader_and_the_deputies_wait_for_the_end_of_the_heads_batch() {
        // Due 40 and 90 µs after the head, then nothing for a second.
        let shared = engine_with_tasks(3, &[0, 40_000, 90_000, 1_000_000_000]);
        let st = shared.state.lock();
        let head = st.pending.peek_due().expect("a head");
        let batch = shared.batch(&st).expect("a batch");
        assert_eq!((batch.due, batch.lone), (head + 90_000, false));
        // The deputy asked for stands over the batch's end, not the head.
        let at = shared
            .time
            .sleep_deadline(batch.due)
            .expect("a real deadline");
        shared
            .handoff
            .pretend_watching(wake::deputy_until(at, shared.backup(&st)));
        let plan = WakePlan::new(Precision::Frugal, None);
        assert!(
            !ask(&shared, &st, &plan, &mut None),
            "one stands over the batch"
        );
    }

    #[test]
    fn a_leader_asks_for_a_deputy_once_per_head_and_only_when_none_stands_over_it() {
        let shared = engine_with_far_task(3);
        let plan = WakePlan::new(Precision::Frugal, None);
        let st = shared.state.lock();
        let mut asked = None;
        assert!(ask(&shared, &st, &plan, &mut asked));
        assert_eq!(asked, st.pending.peek_due());
        assert!(!ask(&shared, &st, &plan, &mut asked), "once per head");
        // A deputy watching a later due time does not cover this head; one
        // watching it (or an earlier one) does.
        let head = st.pending.peek_due().expect("a head");
        let at = shared.time.sleep_deadline(head).expect("a real deadline");
        shared.handoff.pretend_watching(at + Duration::from_secs(1));
        assert!(ask(&shared, &st, &plan, &mut None), "a later watch");
        shared
            .handoff
            .pretend_watching(wake::deputy_until(at, shared.backup(&st)));
        assert!(
            !ask(&shared, &st, &plan, &mut None),
            "one stands over it, as the leader's backup"
        );
        drop(st);
        // A lone worker has no deputy to ask.
        let shared = engine_with_far_task(1);
        let st = shared.state.lock();
        assert!(!ask(&shared, &st, &plan, &mut None), "one worker");
    }

    #[test]
    fn a_leader_does_not_ask_for_a_deputy_over_a_dense_due_time() {
        let shared = engine_with_far_task(3);
        let plan = WakePlan::new(Precision::Frugal, Some(Duration::from_micros(100)));
        let mut st = shared.state.lock();
        // A task due just before the head was started a moment ago.
        let head = st.pending.peek_due().expect("a head");
        st.latest_start = Some(head - 1_000);
        assert!(!ask(&shared, &st, &plan, &mut None), "dense");
        st.latest_start = None;
        assert!(ask(&shared, &st, &plan, &mut None), "sparse");
    }

    /// `receive` on another thread with `watch`: true if it waited untimed
    /// (counted as such by the mailbox) and then took the message sent.
    fn waits_untimed(shared: Shared<u64>, watch: Option<i64>) -> bool {
        let watch = watch.map(|due| Watch {
            due,
            backup: wake::BACKUP,
        });
        let shared = std::sync::Arc::new(shared);
        let receiver = shared.clone();
        let waiter = std::thread::spawn(move || {
            matches!(receive(&receiver, watch), Received::Msg(Msg::Exit))
        });
        let bound = std::time::Instant::now() + Duration::from_secs(30);
        while shared.handoff.untimed() != 1 {
            assert!(std::time::Instant::now() < bound, "never waited untimed");
            std::thread::yield_now();
        }
        shared.handoff.send(Msg::Exit);
        waiter.join().expect("the receiver returns")
    }

    #[test]
    fn free_workers_stand_deputy_only_over_a_real_due_time_and_with_deputies() {
        let shared = engine_with_far_task(3);
        let watch = |due| {
            Some(Watch {
                due,
                backup: wake::BACKUP,
            })
        };
        let soon = shared.time.now().ns + 2_000_000;
        assert!(matches!(receive(&shared, watch(soon)), Received::Rescue));
        assert_eq!(shared.handoff.deputies(), 0, "it stood down");
        // A message ends the wait at once.
        shared.handoff.send(Msg::Exit);
        let far = shared.time.now().ns + 3_600_000_000_000;
        assert!(matches!(
            receive(&shared, watch(far)),
            Received::Msg(Msg::Exit)
        ));
        // A stand-in's due time is no deadline, nor is a passed watch on
        // one worker, which has no deputies.
        assert!(waits_untimed(engine_with_far_task(3), Some(NEVER)));
        assert!(waits_untimed(engine_with_far_task(1), Some(0)));
    }
}

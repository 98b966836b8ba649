//! The leader: the one worker in a timed wait on the heap, protocol steps
//! 1-3, 5 and 8 (`docs/protocol.md`).
//!
//! # Ground rules
//!
//! - Only the holder of the [`Lead`] token waits on `Shared::leader_cv`; so
//!   `notify_one` always reaches the leader, and no follower ever sleeps on a
//!   clock.
//! - The head, the clock and the mode are read under the state lock in the
//!   same critical section that decides to wait ([`check`]), and re-read
//!   after every wake: nothing is carried across a wait. A spin round is a
//!   wait too: the lock is released, the thread spins, and the leader
//!   starts over from the check.
//! - How it waits is the wake policy's answer (`wake.rs`), given the facts
//!   read under the lock; the policy starts nothing, so only step 4, after
//!   a worker finds `due <= now` under the lock, starts a task.
//! - Before a timed wait with no deputy standing over the head, the leader
//!   may ask a free worker to stand deputy (step 3a, `deputy.rs`), with the
//!   lock released, then checks again.
//! - The leader never runs a task while it holds the token. When the head is
//!   due it passes the token on first (step 5), so the next free worker
//!   leads (or, finding work due, passes it on and starts work too), then
//!   it starts due tasks itself as any worker does (`worker::start_one`).
//!   The pass may be quiet (no one woken) while a deputy will wake soon:
//!   then the token waits in the mailbox for whichever comes first, this
//!   worker back from its run or the deputy.
//! - User code runs here: the clock, contained in `time.rs`. Should anything
//!   unwind out of the leader, [`Holding`] puts the token back into the
//!   channel, so the pool never loses its leader.

use super::broken::FirstReading;
use super::deputy;
use super::fault::Fault;
use super::handoff::{Lead, Msg};
use super::shared::{Key, Mode, Shared, State};
use super::wake::{Wait, WakePlan};
use crate::sync::{spin_loop, MutexGuard};
use std::time::Instant;

/// What the leader does next, decided under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The pool stops: end the token, send the exit pill (step 8).
    Exit,
    /// The head is due: pass the token on and start due tasks (step 5).
    Start,
    /// Wait as the wake policy says (step 3), for the head's batch due at
    /// this real instant, if it has one (step 3a asks over it).
    Wait(Wait, Option<Instant>),
}

/// The token while its leader holds it. If the leader unwinds, dropping
/// this sends the token back into the channel for the next worker.
struct Holding<'a, K> {
    /// Where the token goes back to.
    shared: &'a Shared<K>,
    /// The token, until the leader passes it on or ends it.
    token: Option<Lead>,
}

impl<K> Holding<'_, K> {
    /// The token, to pass on or end.
    fn take(mut self) -> Lead {
        self.token.take().expect("a held token")
    }
}

impl<K> std::ops::Deref for Holding<'_, K> {
    type Target = Lead;
    fn deref(&self) -> &Lead {
        self.token.as_ref().expect("a held token")
    }
}

impl<K> std::ops::DerefMut for Holding<'_, K> {
    fn deref_mut(&mut self) -> &mut Lead {
        self.token.as_mut().expect("a held token")
    }
}

impl<K> Drop for Holding<'_, K> {
    fn drop(&mut self) {
        // Under loom an unwind means a failed model: leave it alone.
        if cfg!(loom) && std::thread::panicking() {
            return;
        }
        if let Some(token) = self.token.take() {
            self.shared.handoff.send(Msg::Lead(token));
        }
    }
}

/// How a leadership ended.
pub(crate) enum Led {
    /// The pool stopped; the exit pill is sent.
    Stopped,
    /// Work is due and the token was passed on: start due tasks. With
    /// `Fault::RunBeforePass` the token comes back instead, to be passed on
    /// only after a run.
    Start(Option<Lead>),
}

/// Step 1: lead until work is due (then the token is passed on and the
/// caller starts due tasks) or the pool stops (then the exit pill goes
/// behind everything queued).
pub(crate) fn lead<K: Key>(shared: &Shared<K>, token: Lead) -> Led {
    let mut token = Holding {
        shared,
        token: Some(token),
    };
    let mut st = shared.state.lock();
    let mut first = FirstReading::default();
    // The head this leadership asked a free worker to stand deputy over.
    let mut asked = None;
    loop {
        let mut now = shared.time.now();
        if shared.faults.has(Fault::StaleClock) {
            now = first.keep(now);
        }
        st.seen_now = st.seen_now.max(now.ns);
        match check(shared, &st, now.ns, &mut token.plan) {
            Step::Exit => {
                exit(shared, st, token.take());
                return Led::Stopped;
            }
            Step::Start => return pass(shared, st, token.take()),
            Step::Wait(Wait::Spin(until), _) => {
                MutexGuard::unlocked(&mut st, || spin_until(shared, until));
                token.plan.spun(shared.time.real_now());
            }
            Step::Wait(wait, deadline) => {
                if deputy::asks_for_one(shared, &st, &token.plan, deadline, &mut asked) {
                    // With the lock released, then back to the check:
                    // nothing is carried across the release.
                    MutexGuard::unlocked(&mut st, || shared.handoff.send(Msg::Watch));
                    continue;
                }
                sleep(shared, &mut st, wait, &mut token.plan);
            }
        }
    }
}

/// Step 2: under the lock, read the mode and the head against `now` (the
/// pool's clock, read in this critical section) and decide; how to wait
/// is the wake policy's answer.
fn check<K: Key>(shared: &Shared<K>, st: &State<K>, now: i64, plan: &mut WakePlan) -> Step {
    match st.mode {
        Mode::Stopped => return Step::Exit,
        Mode::Draining if shared.drained(st) => return Step::Exit,
        _ => {}
    }
    let head = st.pending.peek_due();
    // A task waiting in a worker's hold is due (step 4c): a free worker
    // takes it.
    if head.is_some_and(|due| due <= now) || st.pending.held_waiting() {
        return Step::Start;
    }
    // No real deadline: nothing pending, or a clock moved by hand.
    let batch = shared.batch(st);
    let deadline = batch.and_then(|b| shared.time.sleep_deadline(b.due));
    let lone = batch.is_some_and(|b| b.lone);
    let last = shared.latest_start(st);
    let wait = plan.leader_wait(deadline, lone, last, shared.time.real_now());
    Step::Wait(wait, deadline)
}

/// Step 3, a spin round: spin, the lock released, until `until` (the wake
/// policy bounds it by a round and the head's due time). A spin, not a
/// loop of `sched_yield`: beside other busy threads a yield hands the CPU
/// over for the rest of a time slice.
fn spin_until<K>(shared: &Shared<K>, until: Instant) {
    while shared.time.real_now() < until {
        spin_loop();
    }
}

/// Step 3: wait (the lock is released atomically) as `wait` says, or until
/// notified; count the wake. A timed wait that timed out teaches the plan
/// how late this machine wakes, if it is a lesson.
fn sleep<K>(
    shared: &Shared<K>,
    st: &mut MutexGuard<'_, State<K>>,
    wait: Wait,
    plan: &mut WakePlan,
) {
    if shared.faults.has(Fault::UnlockBeforeWait) && !super::broken::relock_still_running(st) {
        return;
    }
    match wait {
        Wait::Until { at, learn } => {
            if shared.leader_cv.wait_until(st, at).timed_out() && learn {
                plan.woke(at, shared.time.real_now());
            }
        }
        Wait::Untimed => shared.leader_cv.wait(st),
        // The caller spins; returning goes back to the check.
        Wait::Spin(_) => {}
    }
    st.wakeups += 1;
}

/// Step 5: with the lock released, pass the token on to the next free
/// worker, and the buffers the heap gave up while shrinking behind it (a
/// free can stall for milliseconds; a worker with nothing else to do frees
/// them). The pass is quiet while a deputy will wake within the wake
/// policy's backup delay (`Mailbox::hand_over`): this worker takes the
/// token back itself after a short run, and the deputy takes it if the run
/// is long; a change the leader must see meanwhile wakes a free worker to
/// take it (`Shared::notify_leader`).
fn pass<K: Key>(shared: &Shared<K>, mut st: MutexGuard<'_, State<K>>, token: Lead) -> Led {
    let retired = st.pending.take_retired();
    let backup = shared.backup(&st);
    drop(st);
    if shared.faults.has(Fault::RunBeforePass) {
        return Led::Start(Some(token));
    }
    if !shared.faults.has(Fault::DropLead) {
        shared.handoff.hand_over(Msg::Lead(token), backup);
    }
    // Behind the token: the next free worker leads first.
    shared.free_elsewhere(retired);
    Led::Start(None)
}

/// Step 8: the token ends here; the exit pill goes behind everything queued.
fn exit<K>(shared: &Shared<K>, st: MutexGuard<'_, State<K>>, token: Lead) {
    drop(st);
    let Lead { .. } = token;
    shared.handoff.send(Msg::Exit);
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    #[test]
    fn after_an_idle_spell_a_free_worker_stands_deputy_over_the_first_head() {
        // Without step 3a the free workers would wait untimed until the
        // leader woke one at the due time, an hour from now.
        let pool = crate::TimerPool::<u64>::builder()
            .workers(3)
            .build()
            .expect("a pool");
        pool.schedule_detached(1, Duration::from_secs(3600), || ())
            .expect("scheduled");
        let bound = Instant::now() + Duration::from_secs(30);
        while pool.shared.handoff.deputies() == 0 {
            assert!(Instant::now() < bound, "no deputy stood");
            std::thread::yield_now();
        }
    }
}

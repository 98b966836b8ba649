//! The leader: the one worker in a timed wait on the heap, protocol steps
//! 2-5 (`docs/protocol.md`, which also sketches the proof).
//!
//! # Ground rules
//!
//! - Only the holder of the [`Lead`] token waits on `Shared::leader_cv`; so
//!   `notify_one` always reaches the leader, and no follower ever sleeps on a
//!   clock.
//! - The head, the clock and the mode are read under the state lock in the
//!   same critical section that decides to wait ([`check`]), and re-read
//!   after every wake: nothing is carried across a wait. A yield round of the
//!   spin window is a wait too: the lock is released, the thread yields, and
//!   the leader starts over from the check.
//! - The leader yields instead of sleeping only while the head's real due
//!   instant is within the spin window (the builder's `spin_before_due`, or
//!   the measured wake-up latency when adaptive wake is on, whichever is
//!   longer). No due time in the window means a plain wait, so an idle pool
//!   never spins.
//! - Claimed tasks leave the heap under the lock and are sent, with the
//!   token after them, only once the lock is released.
//! - User code runs here: the clock (contained in `time.rs`) and a claimed
//!   key's `Hash`, `Eq` and `Clone` (exclusive keys, a periodic task's
//!   stand-in). A panic of a key is contained per task: that task is told
//!   `Panicked` and the claim goes on. Should anything else unwind out of
//!   the leader, [`Holding`] puts the token back into the channel, so the
//!   pool never loses its leader.

use super::broken::FirstReading;
use super::fault::Fault;
use super::handoff::{Claimed, Few, Lead, Msg};
use super::shared::{Key, Mode, Shared, State};
use super::task::{or_lose, PoolEntry, Runnable, Task, TaskKey};
use super::time::{Now, NEVER};
use crate::heap::{Inserted, Retired};
use crate::sync::{thread, MutexGuard};
use std::time::{Duration, Instant};

/// What the leader does next, decided under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The pool stops: end the token, send the exit pill (step 8).
    Exit,
    /// Nothing is due and claimed tasks wait in the channel: pass the token
    /// on behind them and help run them (step 2).
    Help,
    /// The head is due: claim (step 4).
    Claim,
    /// Sleep until this real instant, or until notified if `None` (step 3).
    Sleep(Option<Instant>),
    /// The head's due time is inside the spin window: yield once (step 3).
    Yield,
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
            let _ = self.shared.tx.send(Msg::Lead(token));
        }
    }
}

/// Step 1: lead until there is due work to hand off, tasks queued to help
/// with, or the pool stops (then the exit pill goes behind everything
/// queued, and the caller serves the queue until a pill reaches it).
pub(crate) fn lead<K: Key>(shared: &Shared<K>, token: Lead) {
    let mut token = Holding {
        shared,
        token: Some(token),
    };
    let mut st = shared.state.lock();
    let mut first = FirstReading::default();
    loop {
        let mut now = shared.time.now();
        if shared.faults.has(Fault::StaleClock) {
            now = first.keep(now);
        }
        match check(shared, &st, now.ns, &token) {
            Step::Exit => return exit(shared, st, token.take()),
            Step::Help => return help(shared, st, token.take()),
            Step::Claim => {
                let batch = claim(shared, &mut st, now);
                if batch.is_empty() {
                    continue; // everything due was held for its key
                }
                let retired = st.heap.take_retired();
                drop(st);
                return hand_off(shared, batch, token.take(), retired);
            }
            Step::Sleep(until) => sleep(shared, &mut st, until, &mut token),
            Step::Yield => {
                token.yielded();
                MutexGuard::unlocked(&mut st, thread::yield_now);
            }
        }
    }
}

/// Step 2: under the lock, read the mode and the head against `now` (the
/// pool's clock, read in this critical section) and decide.
fn check<K: Key>(shared: &Shared<K>, st: &State<K>, now: i64, token: &Lead) -> Step {
    match st.mode {
        Mode::Stopped => return Step::Exit,
        Mode::Draining if shared.drained(st) => return Step::Exit,
        _ => {}
    }
    let head = st.heap.peek_due();
    if head.is_some_and(|due| due <= now) {
        return Step::Claim;
    }
    if shared.backlog() > 0 {
        return Step::Help;
    }
    let Some(deadline) = head.and_then(|due| shared.time.sleep_deadline(due)) else {
        return Step::Sleep(None); // nothing pending, or a clock moved by hand
    };
    match deadline.checked_sub(spin_window(shared, token)) {
        Some(wake_at) if wake_at > shared.time.real_now() => Step::Sleep(Some(wake_at)),
        // Within the window: a yield, not a pure spin, since on a busy
        // machine the workers that must run the task need that CPU.
        _ => Step::Yield,
    }
}

/// How long before a due time the leader stops sleeping.
fn spin_window<K>(shared: &Shared<K>, token: &Lead) -> Duration {
    let window = shared.config.spin_before_due;
    if shared.config.adaptive_wake {
        window.max(token.early())
    } else {
        window
    }
}

/// Step 3: wait (the lock is released atomically) until `until`, or until
/// notified; count the wake. A timed wait that timed out teaches the token
/// how late this machine wakes.
fn sleep<K>(
    shared: &Shared<K>,
    st: &mut MutexGuard<'_, State<K>>,
    until: Option<Instant>,
    token: &mut Lead,
) {
    if shared.faults.has(Fault::UnlockBeforeWait) && !super::broken::relock_still_running(st) {
        return;
    }
    match until {
        None => shared.leader_cv.wait(st),
        Some(wake_at) => {
            if shared.leader_cv.wait_until(st, wake_at).timed_out() {
                let late = shared.time.real_now().saturating_duration_since(wake_at);
                token.observe(late);
            }
        }
    }
    st.wakeups += 1;
}

/// Step 4: pop at most `claim_batch` due entries. From here `cancel`
/// returns false for them. Exclusive keys hold a task whose key is busy
/// (step 11). A task whose key panics on the way is told `Panicked`.
fn claim<K: Key>(shared: &Shared<K>, st: &mut State<K>, now: Now) -> Few<Claimed<K>> {
    let mut batch = Few::new();
    while batch.len() < shared.config.claim_batch {
        let Some(entry) = st.heap.pop_due(now.ns) else {
            break;
        };
        match or_lose(entry, |entry| claim_one(st, entry, now.at)) {
            Some(claimed) => batch.extend(claimed),
            None => shared.counters.lost_to_a_panic(),
        }
    }
    batch
}

/// Claim one due entry, unless exclusive keys hold it for its busy key. A
/// periodic task leaves its stand-in under its key (step 10); a stand-in is
/// due never, so it is never claimed.
fn claim_one<K: Key>(st: &mut State<K>, entry: PoolEntry<K>, at: Instant) -> Option<Claimed<K>> {
    let entry = st.exclusive.claim(entry)?;
    let task = match entry.value {
        Task::Once(job) => Runnable::Once(job),
        Task::Periodic(job) => {
            let stand_in = Task::StandIn(job.ctl().clone());
            let (Inserted::New { seq } | Inserted::Replaced { seq, .. }) =
                st.heap.insert(entry.key.clone(), NEVER, stand_in);
            job.ctl().set_seq(seq);
            Runnable::Periodic(job)
        }
        Task::StandIn(ctl) => {
            debug_assert!(false, "a stand-in was due");
            let _ = st.heap.insert(entry.key, NEVER, Task::StandIn(ctl));
            return None;
        }
    };
    Some(Claimed {
        task,
        key: entry.key,
        due: entry.due,
        claimed: at,
    })
}

/// Step 5: with the lock released, send the claimed tasks, the token behind
/// them, and last the buffers the heap gave up while shrinking (a free can
/// stall for milliseconds, so a worker with nothing else to do frees them).
fn hand_off<K: Key>(
    shared: &Shared<K>,
    batch: Few<Claimed<K>>,
    token: Lead,
    retired: Retired<TaskKey<K>, Task>,
) {
    batch.send(&shared.tx, shared.config.workers);
    if shared.faults.has(Fault::DropLead) {
        return;
    }
    let _ = shared.tx.send(Msg::Lead(token));
    if !retired.is_empty() {
        let _ = shared.tx.send(Msg::Free(Box::new(retired)));
    }
}

/// Step 2, help: pass the token on behind the tasks queued in the channel.
fn help<K>(shared: &Shared<K>, st: MutexGuard<'_, State<K>>, token: Lead) {
    drop(st);
    let _ = shared.tx.send(Msg::Lead(token));
}

/// Step 8: the token ends here; the exit pill goes behind everything queued.
fn exit<K>(shared: &Shared<K>, st: MutexGuard<'_, State<K>>, token: Lead) {
    drop(st);
    let Lead { .. } = token;
    let _ = shared.tx.send(Msg::Exit);
}

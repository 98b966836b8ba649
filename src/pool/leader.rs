//! The leader: the one worker in a timed wait on the heap, protocol steps
//! 1-3 and 5 (`docs/protocol.md`, which also sketches the proof).
//!
//! # Ground rules
//!
//! - Only the holder of the [`Lead`] token waits on `Shared::leader_cv`; so
//!   `notify_one` always reaches the leader, and no follower ever sleeps on a
//!   clock.
//! - The head, the clock and the mode are read under the state lock in the
//!   same critical section that decides to wait ([`check`]), and re-read
//!   after every wake: nothing is carried across a wait. A round of the spin
//!   window is a wait too: the lock is released, the thread spins (20 µs at
//!   most), and the leader starts over from the check.
//! - The leader spins instead of sleeping only while the head's real due
//!   instant is within the spin window (the builder's `spin_before_due`, or
//!   the measured wake-up latency when adaptive wake is on, whichever is
//!   longer). No due time in the window means a plain wait, so an idle pool
//!   never spins.
//! - Before a timed wait with no deputy standing over the head, the leader
//!   asks a free worker to stand deputy over it (`Msg::Watch`, step 3a),
//!   once per head and with the lock released, then checks again.
//! - The leader never runs a task while it holds the token. When the head is
//!   due it passes the token on first (step 5), so the next free worker
//!   leads (or, finding work due, passes it on and starts work too), then
//!   it starts due tasks itself as any worker does (`worker::start_one`).
//! - User code runs here: the clock, contained in `time.rs`. Should anything
//!   unwind out of the leader, [`Holding`] puts the token back into the
//!   channel, so the pool never loses its leader.

use super::broken::FirstReading;
use super::fault::Fault;
use super::handoff::{Lead, Msg, BACKUP_AFTER};
use super::shared::{Key, Mode, Shared, State};
use crate::sync::{spin_loop, MutexGuard};
use std::time::{Duration, Instant};

/// What the leader does next, decided under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The pool stops: end the token, send the exit pill (step 8).
    Exit,
    /// The head is due: pass the token on and start due tasks (step 5).
    Start,
    /// Sleep until this real instant, or until notified if `None` (step 3).
    Sleep(Option<Instant>),
    /// The head's due time, this real instant, is inside the spin window:
    /// spin one round towards it (step 3).
    Spin(Instant),
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
    // When the last spin round ended: a run of rounds is paid for whole
    // (its checks too), not only the time inside the spin.
    let mut spinning_since = None;
    // The head this leadership asked a free worker to stand deputy over.
    let mut asked = None;
    loop {
        let mut now = shared.time.now();
        if shared.faults.has(Fault::StaleClock) {
            now = first.keep(now);
        }
        st.seen_now = st.seen_now.max(now.ns);
        let head = st.heap.peek_due();
        token.looked(head.map(|due| (due, shared.time.instant_of(due))), now.ns);
        match check(shared, &st, now.ns, &mut token) {
            Step::Exit => {
                exit(shared, st, token.take());
                return Led::Stopped;
            }
            Step::Start => {
                token.found_due(shared.time.real_now());
                return pass(shared, st, token.take());
            }
            Step::Sleep(until) => {
                spinning_since = None;
                if until.is_some() && asks_for_deputy(shared, &st, &token, &mut asked) {
                    // With the lock released, then back to the check:
                    // nothing is carried across the release.
                    MutexGuard::unlocked(&mut st, || shared.handoff.send(Msg::Watch));
                    continue;
                }
                sleep(shared, &mut st, until, &mut token);
            }
            Step::Spin(deadline) => {
                token.spun();
                let began = spinning_since.unwrap_or_else(|| shared.time.real_now());
                MutexGuard::unlocked(&mut st, || spin_round(shared, deadline));
                let ended = shared.time.real_now();
                token.spent(began, ended);
                spinning_since = Some(ended);
            }
        }
    }
}

/// Step 2: under the lock, read the mode and the head against `now` (the
/// pool's clock, read in this critical section) and decide.
fn check<K: Key>(shared: &Shared<K>, st: &State<K>, now: i64, token: &mut Lead) -> Step {
    match st.mode {
        Mode::Stopped => return Step::Exit,
        Mode::Draining if shared.drained(st) => return Step::Exit,
        _ => {}
    }
    let head = st.heap.peek_due();
    // A task waiting in a worker's hold is due (step 4c): a free worker
    // takes it.
    if head.is_some_and(|due| due <= now) || st.heap.held_waiting() {
        return Step::Start;
    }
    let Some(deadline) = head.and_then(|due| shared.time.sleep_deadline(due)) else {
        return Step::Sleep(None); // nothing pending, or a clock moved by hand
    };
    let real_now = shared.time.real_now();
    match deadline.checked_sub(spin_window(shared, token, real_now, deadline)) {
        Some(wake_at) if wake_at > real_now => Step::Sleep(Some(wake_at)),
        _ => Step::Spin(deadline),
    }
}

/// The longest round of step 3's spin: the leader checks the heap, the
/// mode and its notifications at least this often while it spins.
const SPIN_ROUND: Duration = Duration::from_micros(20);

/// Step 3, inside the spin window: spin, the lock released, until the
/// head's due time at `deadline` or for [`SPIN_ROUND`], whichever comes
/// first. A spin, not a loop of `sched_yield`: on a machine whose CPUs
/// other processes keep busy, a yield hands the CPU over for the rest of
/// a time slice (milliseconds), and the task the leader woke early for
/// started that late.
fn spin_round<K>(shared: &Shared<K>, deadline: Instant) {
    let end = deadline.min(shared.time.real_now() + SPIN_ROUND);
    while shared.time.real_now() < end {
        spin_loop();
    }
}

/// How long before a due time at `deadline` the leader stops sleeping:
/// the builder's window, or the measured wake latency while the adaptive
/// wake's spin budget lasts. A spent budget means no early wake at all,
/// not an early wake and a second wait: each of those is a wake-up, the
/// larger cost.
fn spin_window<K>(
    shared: &Shared<K>,
    token: &mut Lead,
    now: Instant,
    deadline: Instant,
) -> Duration {
    let window = shared.config.spin_before_due;
    if shared.config.adaptive_wake && token.may_spin(now, deadline) {
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
        Some(wake_at) => match warm_up(shared, wake_at, shared.time.real_now()) {
            // No lesson for the estimate: the check that follows waits the
            // rest, and that short wait is the one the estimate is for.
            Some(warm) => {
                let _ = shared.leader_cv.wait_until(st, warm);
            }
            None => {
                if shared.leader_cv.wait_until(st, wake_at).timed_out() {
                    let late = shared.time.real_now().saturating_duration_since(wake_at);
                    token.observe(late);
                }
            }
        },
    }
    st.wakeups += 1;
}

/// Waits longer than this end with a warm-up first ([`warm_up`]).
const WARM_AFTER: Duration = Duration::from_millis(4);

/// How long before the end of a long wait its warm-up wakes.
const WARM_AHEAD: Duration = Duration::from_micros(500);

/// Step 3's warm-up: with the adaptive wake on, a timed wait until
/// `wake_at` longer than [`WARM_AFTER`] first ends [`WARM_AHEAD`] before
/// it, and the check that follows waits the rest. How late a timed wait
/// ends grows with its length, as the idle CPU sinks into deeper sleep
/// states (on this project's guest, a lone wait of 250 µs ended 85 µs
/// late at the median, of 5 ms 107, of 50 ms 160, of 300 ms 149-216; the
/// same waits with a wake-up 250-500 µs before the end, 85-94): one more
/// wake-up for each such wait, so that the one that ends at the due time
/// is short. Dense due times never wait this long.
fn warm_up<K>(shared: &Shared<K>, wake_at: Instant, now: Instant) -> Option<Instant> {
    if !shared.config.adaptive_wake || wake_at.saturating_duration_since(now) <= WARM_AFTER {
        return None;
    }
    wake_at.checked_sub(WARM_AHEAD)
}

/// Step 5: with the lock released, pass the token on to the next free
/// worker, and the buffers the heap gave up while shrinking behind it (a
/// free can stall for milliseconds; a worker with nothing else to do frees
/// them).
fn pass<K: Key>(shared: &Shared<K>, mut st: MutexGuard<'_, State<K>>, token: Lead) -> Led {
    let retired = st.heap.take_retired();
    drop(st);
    if shared.faults.has(Fault::RunBeforePass) {
        return Led::Start(Some(token));
    }
    if !shared.faults.has(Fault::DropLead) {
        shared.handoff.hand_over(Msg::Lead(token));
    }
    // Behind the token: the next free worker leads first.
    shared.free_elsewhere(retired);
    Led::Start(None)
}

/// Step 3a: before a timed sleep, whether to ask a free worker to stand
/// deputy over the head (`Msg::Watch`): the pool has deputies and more
/// than one worker, none stands over this head now (deputies watching a
/// later due time, the one a new earlier task preempted, do not count),
/// this leadership has not asked over this head yet (`asked`, updated),
/// and due times are sparse (`token`). A deputy's watch otherwise comes
/// only from a look at the heap after a run, so after an idle spell none
/// stands, and the first due time cost a follower's wake-up between the
/// leader's wake and the task's start; and a task that preempted a far
/// head had no deputy: in the preemption workload, re-arming one took the
/// p99 from 107-112 µs to 40-81, the max from 648-725 to 88-123, at 6.5%
/// of a core against 8-9.4 (`docs/benchmarks.md`). Not
/// on dense due times: there a worker back from a run stands deputy
/// within a due time or two, and asking at each of the leader's short
/// sleeps only added wake-ups (`docs/benchmarks.md`).
fn asks_for_deputy<K: Key>(
    shared: &Shared<K>,
    st: &State<K>,
    token: &Lead,
    asked: &mut Option<i64>,
) -> bool {
    let head = st.heap.peek_due();
    if !shared.config.deputy || shared.config.workers < 2 || *asked == head {
        return false;
    }
    if token.dense(shared.time.real_now()) {
        return false;
    }
    // A deputy that watches a sparse due time stands a little past it, as
    // the leader's backup (`handoff::BACKUP_AFTER`): it stands over it too.
    let deadline = head.and_then(|due| shared.time.sleep_deadline(due));
    if deadline.is_some_and(|at| shared.handoff.watched_by(at + BACKUP_AFTER)) {
        return false;
    }
    *asked = head;
    true
}

/// Step 8: the token ends here; the exit pill goes behind everything queued.
fn exit<K>(shared: &Shared<K>, st: MutexGuard<'_, State<K>>, token: Lead) {
    drop(st);
    let Lead { .. } = token;
    shared.handoff.send(Msg::Exit);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::completion::Observe;
    use crate::pool::intake::Arrival;
    use crate::pool::task::{once_job, Task, TaskKey};

    /// A pool's engine without threads, for `workers` workers, with one
    /// task pending an hour from now; `deputy` as the builder's.
    fn engine_with_far_task(workers: usize, deputy: bool) -> Shared<u64> {
        let config = crate::TimerPool::<u64>::builder()
            .workers(workers)
            .deputy(deputy)
            .validate();
        let shared = Shared::new(config.expect("valid"), None, Observe::default());
        let arrival = Arrival {
            key: TaskKey::Keyed(1),
            due: shared.time.now().ns + 3_600_000_000_000,
            task: Task::Once(once_job(|| ())),
        };
        shared
            .admit(std::iter::once(arrival), |_, _| ())
            .expect("admitted");
        shared
    }

    #[test]
    fn a_leader_asks_for_a_deputy_once_per_head_and_only_when_none_stands_over_it() {
        let shared = engine_with_far_task(2, true);
        let token = Lead::first();
        let st = shared.state.lock();
        let mut asked = None;
        assert!(asks_for_deputy(&shared, &st, &token, &mut asked));
        assert_eq!(asked, st.heap.peek_due());
        assert!(
            !asks_for_deputy(&shared, &st, &token, &mut asked),
            "once per head"
        );
        // A deputy watching a later due time does not cover this head; one
        // watching it (or an earlier one) does.
        let head = st.heap.peek_due().expect("a head");
        let at = shared.time.sleep_deadline(head).expect("a real deadline");
        shared.handoff.pretend_watching(at + Duration::from_secs(1));
        assert!(
            asks_for_deputy(&shared, &st, &token, &mut None),
            "a later watch"
        );
        shared.handoff.pretend_watching(at + BACKUP_AFTER);
        assert!(
            !asks_for_deputy(&shared, &st, &token, &mut None),
            "one stands over it, as the leader's backup"
        );
        shared.handoff.pretend_watching(at);
        assert!(
            !asks_for_deputy(&shared, &st, &token, &mut None),
            "one stands over it"
        );
        drop(st);
        for (workers, deputy) in [(1, true), (2, false)] {
            let shared = engine_with_far_task(workers, deputy);
            let st = shared.state.lock();
            assert!(
                !asks_for_deputy(&shared, &st, &token, &mut None),
                "{workers} {deputy}"
            );
        }
        // Due times found a moment ago, a wake latency learned: dense.
        let shared = engine_with_far_task(2, true);
        let mut busy = Lead::first();
        busy.observe(Duration::from_micros(100));
        busy.found_due(Instant::now());
        let st = shared.state.lock();
        assert!(!asks_for_deputy(&shared, &st, &busy, &mut None), "dense");
        assert!(asks_for_deputy(&shared, &st, &token, &mut None), "sparse");
    }

    #[test]
    fn only_a_long_wait_with_the_adaptive_wake_on_warms_up() {
        let now = Instant::now();
        let adaptive = engine_with_far_task(2, true);
        let long = now + WARM_AFTER + Duration::from_millis(1);
        assert_eq!(warm_up(&adaptive, long, now), Some(long - WARM_AHEAD));
        assert_eq!(warm_up(&adaptive, now + WARM_AFTER, now), None, "short");
        let config = crate::TimerPool::<u64>::builder()
            .workers(2)
            .adaptive_wake(false)
            .validate();
        let plain = Shared::<u64>::new(config.expect("valid"), None, Observe::default());
        assert_eq!(warm_up(&plain, long, now), None, "plain waits");
    }

    #[test]
    fn after_an_idle_spell_a_free_worker_stands_deputy_over_the_first_head() {
        // Without step 3a the free worker would wait untimed until the
        // leader woke it at the due time, an hour from now.
        let pool = crate::TimerPool::<u64>::builder()
            .workers(2)
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

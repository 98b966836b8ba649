//! The wake policy: when the threads that wait for due times wake, and how
//! long a free worker stands deputy. Every timing choice of the pool is
//! here; the protocol (`leader.rs`, `deputy.rs`) asks and obeys.
//!
//! # Ground rules
//!
//! - Pure: it reads no shared state, takes no lock and starts no task. The
//!   protocol passes it facts read under the state lock (the head's real
//!   due instant, the due time of the latest task a worker started) and
//!   gets back instants. Only step 4 starts a task, after finding
//!   `due <= now` under the lock, so no answer given here can start a task
//!   early or lose one: a wrong answer costs a late start or a wasted
//!   wake-up, never safety. The loom models never reach it (their clock
//!   moves only by hand, so no wait is timed); `tests/timing.rs` and the
//!   tests below do.
//! - The [`WakePlan`] travels inside the lead token, so only the leader
//!   reads or changes it, and it needs no lock of its own.
//!
//! # The policy
//!
//! What the pool waits for is the head's *batch* ([`batch`]): under
//! [`Precision::Frugal`], when the due times from the head on form a
//! batch (each within [`BATCH_GAP`] of the one before, the last within
//! [`BATCH_SPAN`] of the head) followed by a spell of [`BATCH_GAP`] with
//! nothing due, the wait is for the batch's last due time, so one wake-up
//! starts them all; due times with no such spell (a stream) are waited for
//! one at a time. The protocol reads the due times (facts under the lock)
//! and both the leader and the deputies wait for the same answer.
//!
//! The leader waits for the batch in a timed wait ([`Wait::Until`]). Under
//! [`Precision::Frugal`] a lone due time (a batch of one) gets an *early
//! wake*: the leader ends its wait by the measured lateness of timed waits
//! before the due time and spins the rest ([`Wait::Spin`]), paid from a
//! budget of a small share of one core, and only if it is sparse too (a
//! due time close after the last one started would pay a spin per task,
//! and dense streams start on time anyway, since some thread is awake).
//! A long wait first wakes a little before its end (the *warm-up*),
//! because a timed wait ends later the deeper its CPU slept; relaxed mode
//! skips it.
//! [`Precision::Spin`] adds a fixed window spun before every due time and
//! asks the kernel to end timed waits at their deadline.
//! [`Precision::Slack`] waits until its slack past the head, so everything
//! due by then starts on one wake-up, with no early wake.
//!
//! Free workers stand deputy (all but the leader, up to
//! [`MAX_DEPUTIES`]): each waits until a backup past the
//! batch it saw pending ([`backup`]), so that a leader whose CPU is held
//! up, or that is running a task, does not delay due work for longer
//! while another thread is free. The backup is close ([`BACKUP`]) for a
//! while after a task ran long, and relaxed ([`SHORT_RUNS_BACKUP`]) while
//! every run is short, where a close one would cost a deputy wake-up per
//! due time and start nothing. Because one will wake that soon anyway, the
//! leader that finds work due passes the lead quietly, without waking
//! anyone, and takes it back itself after a short run: a stream of due
//! times then costs one wake-up each (the leader's), not two, and a
//! batch one.
//!
//! # Constants
//!
//! | constant | value | what it buys | evidence (`docs/bench/lab-notes.md`) |
//! | --- | --- | --- | --- |
//! | [`SPIN_ROUND`] | 20 µs | the longest the leader spins without looking at the heap, its notifications and shutdown | "Spin rounds instead of yields" |
//! | [`MAX_EARLY`] | 1 ms | bounds the early wake; a machine whose waits end later than this is not helped by spinning | "The adaptive early wake" |
//! | [`ROUNDS_PER_DECAY`] | 64 | lets the estimate shrink while every due time falls inside the window (no timed wait teaches it) | "The adaptive early wake" |
//! | [`DENSE_GAPS`] | 4 | due times closer than four wake latencies need no early wake | sparse and lateness workloads |
//! | [`SPIN_SHARE`] | 10 | the early wake spends at most a tenth of one core | lateness and sparse workloads |
//! | [`MAX_SAVED`] | 2 ms | the most spinning saved up while idle, one burst of sparse timers | sparse workload |
//! | [`WARM_AFTER`], [`WARM_AHEAD`] | 4 ms, 500 µs | a long wait ends in a short one, which ends closer to its deadline | "Warm-up before long waits" |
//! | [`MAX_DEPUTIES`] | 3 | free workers watching a due time beside the leader | mixed-lengths workload, four workers |
//! | [`BATCH_SPAN`], [`BATCH_GAP`] | 250 µs, 250 µs | a frugal pool wakes once for a batch of due times followed by a quiet spell, not once per due time; a stream with no such spell is waited for due time by due time | "One wake-up per batch" (session workload; the lateness workload's stream unchanged) |
//! | [`BATCH_LOOK`] | 128 | bounds the due times read under the lock to find a batch's end; more than this within the window is a stream | "One wake-up per batch" |
//! | [`BACKUP`] | 100 µs | bounds how long a due task waits for a leader running a long task (or held up); the quiet pass saves a wake-up per due time | mixed lengths |
//! | [`SHORT_RUNS_BACKUP`] | 2 ms | while no recent run outlasted it, a deputy wake-up per 2 ms instead of one per due time; still bounds the wait behind a first long task; a run (or a time slice lent to another thread) shorter than this is not long | "Deputies that back up long runs" (session, lateness) |
//! | [`LONG_RUN_MEMORY`] | 1 s | a task that ran longer than [`SHORT_RUNS_BACKUP`] keeps the close backup this long: tasks that run long now and then meet it again | mixed lengths |

use super::time::NEVER;
use std::time::{Duration, Instant};

/// How closely a pool watches the clock: what it spends so that tasks
/// start close to their due time. Tasks never start before it in any
/// mode; set with [`Builder::precision`](crate::Builder::precision).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::{Precision, TimerPool};
///
/// // The default: timed waits, an early wake for isolated timers.
/// let frugal = TimerPool::<u64>::builder().precision(Precision::Frugal).build()?;
/// // Within microseconds of the due time, at up to one busy core while a
/// // due time is less than 200 µs away.
/// let precise = TimerPool::<u64>::builder()
///     .precision(Precision::Spin(Duration::from_micros(200)))
///     .build()?;
/// // Session timeouts: up to a millisecond late, one wake-up a millisecond
/// // however many expire.
/// let relaxed = TimerPool::<u64>::builder()
///     .precision(Precision::Slack(Duration::from_millis(1)))
///     .build()?;
/// # drop((frugal, precise, relaxed));
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Precision {
    /// The default. The leader sleeps in timed waits until the earliest due
    /// time, or until the last of a batch of due times close together (at
    /// most 250 µs after the first), which then start on one wake-up; an
    /// isolated timer gets a short early wake paid from a small spin
    /// budget; free workers stand deputy so that a held-up leader does not
    /// delay a due task; an idle pool uses no CPU. Tasks start about as
    /// late as the operating system's timed waits end (tens of
    /// microseconds on an idle Linux machine), a batch's first ones up to
    /// its span later.
    #[default]
    Frugal,
    /// Precision mode: the leader stops sleeping this long before each due
    /// time and spins the rest, re-checking the heap every 20 µs at most,
    /// and the workers' timed waits end at their deadline (no timer slack).
    /// Tasks start within a few microseconds of their due time, at the cost
    /// of up to one busy core while a due time is this close. It never
    /// spins while no due time is that close. At most [`MAX_WINDOW`].
    ///
    /// [`MAX_WINDOW`]: crate::MAX_WINDOW
    Spin(Duration),
    /// Relaxed mode: tasks may start up to this long after their due time
    /// (plus the operating system's wake-up latency). The leader sleeps
    /// until this slack past the earliest due time and starts everything
    /// due by then on that one wake-up, so due times close together cost a
    /// wake-up per slack rather than one each; no early wake, no warm-up,
    /// no spinning.
    /// For timeouts where a millisecond does not matter (sessions, leases,
    /// retries). Never early, as in every mode. At most [`MAX_WINDOW`].
    ///
    /// [`MAX_WINDOW`]: crate::MAX_WINDOW
    Slack(Duration),
}

/// The longest spin window ([`Precision::Spin`]) or slack
/// ([`Precision::Slack`]) a pool accepts: one second.
pub const MAX_WINDOW: Duration = Duration::from_secs(1);

impl Precision {
    /// The precision-mode window spun before each due time; zero in the
    /// other modes.
    fn window(self) -> Duration {
        match self {
            Precision::Frugal | Precision::Slack(_) => Duration::ZERO,
            Precision::Spin(window) => window,
        }
    }

    /// The spin window or the slack, whichever this mode has.
    pub(crate) fn span(self) -> Duration {
        match self {
            Precision::Frugal => Duration::ZERO,
            Precision::Spin(window) | Precision::Slack(window) => window,
        }
    }

    /// Whether a long wait ends with a warm-up: not in relaxed mode, which
    /// asks for no precision; there the warm-up's wake-up would start
    /// nothing (a slack shorter than it) or cut the batch short.
    fn warms(self) -> bool {
        !matches!(self, Precision::Slack(_))
    }

    /// Precision mode: the workers' timed waits should end at their
    /// deadline, not a timer slack later.
    pub(crate) fn tight_timers(self) -> bool {
        matches!(self, Precision::Spin(_))
    }
}

/// The longest round of the leader's spin: it looks at the heap, its
/// notifications and shutdown at least this often while it spins.
pub(crate) const SPIN_ROUND: Duration = Duration::from_micros(20);

/// The most the early wake moves a wait forward.
const MAX_EARLY: Duration = Duration::from_millis(1);

/// Spin rounds in a row that count as one on-time wait for the estimate.
const ROUNDS_PER_DECAY: u32 = 64;

/// Due times closer together than this many wake latencies are dense: no
/// early wake for them.
const DENSE_GAPS: u32 = 4;

/// The early wake may spend one part in `SPIN_SHARE` of real time spinning.
const SPIN_SHARE: u32 = 10;

/// The most spinning time the budget saves up while none is spent.
const MAX_SAVED: Duration = Duration::from_millis(2);

/// Waits longer than this end with a warm-up first.
const WARM_AFTER: Duration = Duration::from_millis(4);

/// How long before the end of a long wait its warm-up wakes.
const WARM_AHEAD: Duration = Duration::from_micros(500);

/// The most free workers that stand deputy at once.
pub(crate) const MAX_DEPUTIES: usize = 3;

/// The most a batch delays its first due time.
const BATCH_SPAN: Duration = Duration::from_micros(250);

/// A spell this long with nothing due ends a batch.
const BATCH_GAP: Duration = Duration::from_micros(250);

/// The most due times [`batch`] reads to find a batch's end.
const BATCH_LOOK: usize = 128;

/// What the pool waits for (step 3): the due time of the last task of the
/// head's batch, on the pool's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Batch {
    /// The due time to wait for: the head's, or a later one of its batch.
    pub(crate) due: i64,
    /// Nothing else is due within [`BATCH_GAP`] after the head: an
    /// isolated due time, which may get the early wake.
    pub(crate) lone: bool,
}

/// Step 3: the batch of the head due at `head` under `precision`.
/// `dues(upto, out)` writes the due times of the pending tasks due at or
/// before `upto` into `out` (in any order) and says how many, or `None` if
/// more than `out` holds. Precision mode waits for every due time itself;
/// relaxed mode waits until its slack past the head.
pub(crate) fn batch(
    precision: Precision,
    head: i64,
    dues: impl FnOnce(i64, &mut [i64]) -> Option<usize>,
) -> Batch {
    let stream = Batch {
        due: head,
        lone: false,
    };
    match precision {
        Precision::Frugal => {}
        Precision::Spin(_) => {
            return Batch {
                due: head,
                lone: true,
            }
        }
        // Everything due within the slack starts on one wake-up. A due time
        // on the pool's clock stays one (short of `NEVER`, which means no
        // deadline), and a head with none stays without.
        Precision::Slack(slack) => {
            return Batch {
                due: head.saturating_add(nanos(slack)).min(NEVER - 1).max(head),
                lone: false,
            }
        }
    }
    let (span, gap) = (nanos(BATCH_SPAN), nanos(BATCH_GAP));
    let mut buf = [0i64; BATCH_LOOK];
    let Some(n) = dues(head.saturating_add(span + gap), &mut buf) else {
        return stream;
    };
    let found = &mut buf[..n];
    found.sort_unstable();
    let mut end = head;
    for &due in found.iter() {
        if due.saturating_sub(end) > gap {
            break;
        }
        end = end.max(due);
    }
    if end.saturating_sub(head) > span {
        return stream;
    }
    Batch {
        due: end,
        lone: end == head,
    }
}

/// A short policy duration in the pool clock's nanoseconds.
fn nanos(d: Duration) -> i64 {
    d.as_nanos() as i64
}

/// How the leader waits next (step 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Until notified: nothing pending, or a clock moved by hand.
    Untimed,
    /// A timed wait until `at` (or a notification). `learn`: how late it
    /// ends teaches the estimate (not so for a warm-up).
    Until {
        /// When the wait ends.
        at: Instant,
        /// Whether its lateness is a lesson.
        learn: bool,
    },
    /// Spin, the lock released, until this instant (a round's end or the
    /// head's due time, whichever comes first), then check again.
    Spin(Instant),
}

/// What the leaders have learnt about this machine's timed waits, and what
/// the early wake may still spend. Carried in the lead token.
#[derive(Debug)]
pub(crate) struct WakePlan {
    /// The pool's setting.
    precision: Precision,
    /// How late timed waits return, smoothed.
    latency: WakeLatency,
    /// What the early wake may still spend on spinning.
    budget: SpinBudget,
    /// The due time the current run of spin rounds spins toward: paid for
    /// when it began, so it is not cut short.
    spinning_toward: Option<Instant>,
    /// When the current run's last round ended (or the run began): what
    /// the next round pays from, so the checks between rounds count too.
    spinning_since: Option<Instant>,
}

impl WakePlan {
    /// A plan for `precision`, its estimate starting from `prior` (how late
    /// a lone timed wait ends on this machine, as far as the platform
    /// tells: its timer slack) rather than from nothing, so a new pool's
    /// first due time gets the early wake too.
    pub(crate) fn new(precision: Precision, prior: Option<Duration>) -> Self {
        WakePlan {
            precision,
            latency: prior.map_or_else(WakeLatency::default, WakeLatency::assuming),
            budget: SpinBudget::default(),
            spinning_toward: None,
            spinning_since: None,
        }
    }

    /// Step 3: how the leader waits, at `now`, for a batch whose real due
    /// instant is `deadline` (`None`: nothing to wait for by the clock) and
    /// that is `lone` or not, the latest task started having been due at
    /// `last_started`.
    pub(crate) fn leader_wait(
        &mut self,
        deadline: Option<Instant>,
        lone: bool,
        last_started: Option<Instant>,
        now: Instant,
    ) -> Wait {
        let Some(deadline) = deadline else {
            self.spinning_toward = None;
            return Wait::Untimed;
        };
        let window = if lone {
            self.window(deadline, last_started, now)
        } else {
            self.precision.window()
        };
        match deadline.checked_sub(window) {
            Some(wake_at) if wake_at > now => {
                self.spinning_toward = None;
                timed(wake_at, now, self.precision.warms())
            }
            _ => {
                if self.spinning_toward != Some(deadline) {
                    self.spinning_toward = Some(deadline);
                    self.spinning_since = Some(now);
                }
                Wait::Spin(deadline.min(now + SPIN_ROUND))
            }
        }
    }

    /// A timed wait until `at` ended at `ended` by its deadline (not by a
    /// notification): learn how late this machine's waits end.
    pub(crate) fn woke(&mut self, at: Instant, ended: Instant) {
        self.latency.rounds = 0;
        self.latency.observe(ended.saturating_duration_since(at));
    }

    /// A spin round ended at `ended`: pay for the run of rounds so far, and
    /// let a long run shrink the estimate (only timed waits teach it).
    pub(crate) fn spun(&mut self, ended: Instant) {
        if let Some(since) = self.spinning_since.replace(ended) {
            self.budget.spend(ended.saturating_duration_since(since));
        }
        let w = &mut self.latency;
        w.rounds += 1;
        if w.rounds >= ROUNDS_PER_DECAY {
            w.rounds = 0;
            w.observe(Duration::ZERO);
        }
    }

    /// True when a head due at `deadline` follows the latest task started
    /// (due at `last_started`) by less than [`DENSE_GAPS`] wake latencies:
    /// some thread is awake about then anyway.
    pub(crate) fn dense(&self, deadline: Instant, last_started: Option<Instant>) -> bool {
        last_started.is_some_and(|at| {
            deadline.saturating_duration_since(at) < self.latency.early() * DENSE_GAPS
        })
    }

    /// How long before `deadline` the leader stops sleeping: the precision
    /// window, or the estimate for a sparse due time while the budget lasts.
    /// A spent budget means no early wake at all, not an early wake and a
    /// second wait: each of those is a wake-up, the larger cost.
    fn window(
        &mut self,
        deadline: Instant,
        last_started: Option<Instant>,
        now: Instant,
    ) -> Duration {
        let fixed = self.precision.window();
        let early = self.latency.early();
        if early <= fixed || self.dense(deadline, last_started) {
            return fixed;
        }
        // A run of rounds under way was paid for when it began.
        if self.spinning_toward == Some(deadline) || self.budget.affords(now, early) {
            early
        } else {
            fixed
        }
    }

    /// How much earlier than a due time to end a timed wait, for tests.
    #[cfg(test)]
    fn early(&self) -> Duration {
        self.latency.early()
    }
}

/// A timed wait until `wake_at`, at `now`. Where the mode `warms`, a long
/// one ends with a warm-up [`WARM_AHEAD`] before it, which teaches nothing
/// (the short wait after it is the one the estimate is for); where it does
/// not (relaxed mode), no wait teaches the estimate, which only the early
/// wake reads.
fn timed(wake_at: Instant, now: Instant, warms: bool) -> Wait {
    if warms && wake_at.saturating_duration_since(now) > WARM_AFTER {
        if let Some(at) = wake_at.checked_sub(WARM_AHEAD) {
            return Wait::Until { at, learn: false };
        }
    }
    Wait::Until {
        at: wake_at,
        learn: warms,
    }
}

/// Step 4a: how many free workers stand deputy at once in a pool of
/// `workers`: all but the leader, up to [`MAX_DEPUTIES`].
pub(crate) fn deputies(workers: usize) -> usize {
    workers.saturating_sub(1).min(MAX_DEPUTIES)
}

/// Step 4a: until when a deputy that saw a due time at `deadline` waits:
/// `backup` ([`backup`]) past it, as the leader's backup.
pub(crate) fn deputy_until(deadline: Instant, backup: Duration) -> Instant {
    deadline + backup
}

/// Steps 3a, 4a and 5: how far past a due time a deputy wakes, at `now`
/// (the pool's clock), the latest long run ([`ran_long`]) having been seen
/// at `long_run`: [`BACKUP`] while a task has run longer than that within
/// [`LONG_RUN_MEMORY`], so a leader running such a task delays due work by
/// little more than the backup; otherwise [`SHORT_RUNS_BACKUP`], which
/// still bounds the delay, for a deputy wake-up per that span rather than
/// one per due time while every run ends before the next due time needs
/// it. A pass is quiet (step 5) while a deputy wakes within the same delay.
pub(crate) fn backup(now: i64, long_run: Option<i64>) -> Duration {
    match long_run {
        Some(at) if now.saturating_sub(at) < nanos(LONG_RUN_MEMORY) => BACKUP,
        _ => SHORT_RUNS_BACKUP,
    }
}

/// Step 4: whether a task started at `started` and followed by a start or
/// a look at the heap at `now` (the pool's clock) ran long: longer than
/// [`SHORT_RUNS_BACKUP`], so a deputy at that backup would have started
/// due work in its place. A shorter gap ends before such a deputy helps:
/// a short task, or a worker whose CPU the scheduler lent to another
/// thread for a time slice (on a busy machine, many gaps a second), which
/// must not cost a deputy wake-up per due time for the next second.
pub(crate) fn ran_long(started: i64, now: i64) -> bool {
    now.saturating_sub(started) > nanos(SHORT_RUNS_BACKUP)
}

/// How far past a due time a deputy wakes while long runs are recent.
pub(crate) const BACKUP: Duration = Duration::from_micros(100);

/// How far past a due time a deputy wakes while every recent run was short.
pub(crate) const SHORT_RUNS_BACKUP: Duration = Duration::from_millis(2);

/// How long a long run keeps the deputies at [`BACKUP`].
const LONG_RUN_MEMORY: Duration = Duration::from_secs(1);

/// A token bucket of spinning time: earns `1 / SPIN_SHARE` of the real
/// time that passes, up to [`MAX_SAVED`].
#[derive(Debug, Clone, Copy)]
struct SpinBudget {
    /// Spinning time saved up.
    saved: Duration,
    /// When it was last topped up; `None` before the first look.
    topped: Option<Instant>,
}

impl Default for SpinBudget {
    fn default() -> Self {
        SpinBudget {
            saved: MAX_SAVED,
            topped: None,
        }
    }
}

impl SpinBudget {
    /// Top up for the time since the last look; true if what is saved
    /// covers a spin of `cost`. (Any balance above zero would not do: the
    /// time between two looks always earns a little, so a budget that only
    /// had to be above zero never ran dry.)
    fn affords(&mut self, now: Instant, cost: Duration) -> bool {
        if let Some(topped) = self.topped {
            let earned = now.saturating_duration_since(topped) / SPIN_SHARE;
            self.saved = (self.saved + earned).min(MAX_SAVED);
        }
        self.topped = Some(now);
        self.saved >= cost
    }

    /// Pay for `took` of spinning.
    fn spend(&mut self, took: Duration) {
        self.saved = self.saved.saturating_sub(took);
    }
}

/// A smoothed estimate of how late a timed wait returns after its deadline:
/// mean plus twice the mean deviation (the round-trip estimator of TCP), so
/// that most wakes land before the due time and the rest is spun away.
#[derive(Debug, Default, Clone, Copy)]
struct WakeLatency {
    /// Smoothed lateness, nanoseconds.
    mean: u64,
    /// Smoothed absolute deviation, nanoseconds.
    dev: u64,
    /// Spin rounds since the last timed wait.
    rounds: u32,
}

impl WakeLatency {
    /// An estimate that expects waits to return `prior` late, give or take
    /// half of it (how TCP's estimator starts from its first sample).
    fn assuming(prior: Duration) -> Self {
        let mean = prior.min(MAX_EARLY * 4).as_nanos() as u64;
        WakeLatency {
            mean,
            dev: mean / 2,
            rounds: 0,
        }
    }

    /// Learn from one timed wait that returned `late` after its deadline.
    fn observe(&mut self, late: Duration) {
        let x = late.min(MAX_EARLY * 4).as_nanos() as u64;
        let err = x.abs_diff(self.mean);
        if x >= self.mean {
            self.mean += (x - self.mean) / 8;
        } else {
            self.mean -= (self.mean - x) / 8;
        }
        if err >= self.dev {
            self.dev += (err - self.dev) / 4;
        } else {
            self.dev -= (self.dev - err) / 4;
        }
    }

    /// How much earlier than a due time to end a timed wait.
    fn early(&self) -> Duration {
        Duration::from_nanos(self.mean + 2 * self.dev).min(MAX_EARLY)
    }
}

#[cfg(test)]
mod tests;

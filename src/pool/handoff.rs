//! The hand-off: the mailbox the free workers wait on, what travels through
//! it, and the lead token.
//!
//! # Ground rules
//!
//! - No task travels through the channel: a due task stays pending in the
//!   heap until the worker that runs it takes it (`worker::start_one`), so
//!   it waits behind nothing and stays cancellable until it starts.
//! - The channel carries the one [`Lead`] token (which also wakes the
//!   follower it reaches: a leader that finds due work passes it on before
//!   running that work), the exit pill, and buffers to free.
//! - Exactly one [`Lead`] exists while the pool runs; it is in the channel or
//!   held by the one leader, who never runs a task while holding it.

use crate::sync::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The hand-off channel: a queue of messages under its own small lock, and
/// the condition variable the free workers wait on.
///
/// A receiver that finds it empty parks at once. A general-purpose channel
/// (crossbeam's) spins and yields the CPU several times first; with the
/// pool's free workers waiting here between every due time, those spins and
/// yields were about a fifth of the pool's CPU in a dense stream, on a
/// 2-vCPU guest (`docs/bench/lab-notes.md`).
///
/// The mailbox also knows the deadlines of the receivers in a timed wait
/// (the deputies), so that a message can be [handed over](Self::hand_over)
/// to one already waking without waking another thread, and it admits
/// them: whether a receiver may wait with a deadline is decided under its
/// lock, against the deadlines there (step 4a).
pub(crate) struct Mailbox<T> {
    /// Messages and timed receivers.
    inbox: Mutex<Inbox<T>>,
    /// Notified once per message sent (and not handed over).
    ready: Condvar,
}

/// What the mailbox's lock guards.
struct Inbox<T> {
    /// Messages not yet received, oldest first.
    queue: VecDeque<T>,
    /// The deadline of each receiver in a timed wait
    /// ([`Mailbox::recv_watching`]), entered and left under the lock.
    timed: Vec<Instant>,
    /// Receivers in an untimed wait, for tests that must know one waits.
    #[cfg(test)]
    untimed: usize,
}

impl<T> Mailbox<T> {
    /// An empty mailbox.
    pub(crate) fn new() -> Self {
        Mailbox {
            inbox: Mutex::new(Inbox {
                queue: VecDeque::new(),
                timed: Vec::new(),
                #[cfg(test)]
                untimed: 0,
            }),
            ready: Condvar::new(),
        }
    }

    /// How many receivers wait with a deadline now.
    #[cfg(test)]
    pub(crate) fn deputies(&self) -> u64 {
        self.inbox.lock().timed.len() as u64
    }

    /// Whether a receiver waits as a deputy with a deadline at or before
    /// `deadline`: one stands over a due time at `deadline`.
    pub(crate) fn watched_by(&self, deadline: Instant) -> bool {
        self.inbox.lock().timed.iter().any(|&d| d <= deadline)
    }

    /// Queue `msg` and wake one waiting receiver, if any. Never blocks
    /// beyond the queue's short lock.
    pub(crate) fn send(&self, msg: T) {
        let mut inbox = self.inbox.lock();
        inbox.queue.push_back(msg);
        self.ready.notify_one();
    }

    /// Queue `msg` for a receiver whose deadline has passed, if one is
    /// waiting, without waking anyone: its own timer is ending its wait (or
    /// has), and every way out of [`recv_deadline`](Self::recv_deadline)
    /// looks at the queue under this lock, so it takes the message (or
    /// another receiver did). Otherwise as [`send`](Self::send). This saves
    /// a cross-CPU wake-up at the one moment the deputies wake anyway:
    /// passing the lead at a due time they watched.
    pub(crate) fn hand_over(&self, msg: T) {
        let mut inbox = self.inbox.lock();
        self.hand_over_locked(&mut inbox, msg, Instant::now());
    }

    /// [`hand_over`](Self::hand_over) under the lock, at `now`; true if it
    /// woke a receiver.
    fn hand_over_locked(&self, inbox: &mut Inbox<T>, msg: T, now: Instant) -> bool {
        inbox.queue.push_back(msg);
        let waking = inbox.timed.iter().any(|&deadline| deadline <= now);
        if !waking {
            self.ready.notify_one();
        }
        !waking
    }

    /// Step 4a's wait: the oldest message, waiting for one; or, for a
    /// receiver with a `deadline` admitted as a deputy, `None` once the
    /// deadline passes with none (never under loom, whose waits are
    /// untimed). A queued message is taken at once. Otherwise the receiver
    /// waits with its deadline if fewer than `limit` receivers do; past the
    /// limit, or with no deadline, it waits untimed. Admission and leaving
    /// both happen under this lock, so the count it admits against is
    /// exact: a deputy that has taken a message (often the lead) or timed
    /// out no longer counts, even before it runs again, and a worker does
    /// not wait untimed beside a free place.
    pub(crate) fn recv_watching(&self, deadline: Option<Instant>, limit: usize) -> Option<T> {
        let mut inbox = self.inbox.lock();
        if let Some(msg) = inbox.queue.pop_front() {
            return Some(msg);
        }
        match deadline {
            Some(deadline) if inbox.timed.len() < limit => self.wait_until(&mut inbox, deadline),
            _ => Some(self.wait(&mut inbox)),
        }
    }

    /// Wait untimed for a message, under the lock.
    fn wait(&self, inbox: &mut MutexGuard<'_, Inbox<T>>) -> T {
        #[cfg(test)]
        {
            inbox.untimed += 1;
        }
        let msg = loop {
            if let Some(msg) = inbox.queue.pop_front() {
                break msg;
            }
            self.ready.wait(inbox);
        };
        #[cfg(test)]
        {
            inbox.untimed -= 1;
        }
        msg
    }

    /// Wait as a deputy until `deadline`, under the lock: counted in on
    /// entry, out on leaving.
    fn wait_until(&self, inbox: &mut MutexGuard<'_, Inbox<T>>, deadline: Instant) -> Option<T> {
        inbox.timed.push(deadline);
        let got = loop {
            if let Some(msg) = inbox.queue.pop_front() {
                break Some(msg);
            }
            if self.ready.wait_until(inbox, deadline).timed_out() {
                break inbox.queue.pop_front();
            }
        };
        if let Some(i) = inbox.timed.iter().position(|&d| d == deadline) {
            inbox.timed.swap_remove(i);
        }
        got
    }

    /// The oldest message, if one is queued; never waits.
    #[cfg(test)]
    pub(crate) fn try_recv(&self) -> Option<T> {
        self.inbox.lock().queue.pop_front()
    }

    /// How many receivers wait untimed now.
    #[cfg(test)]
    pub(crate) fn untimed(&self) -> usize {
        self.inbox.lock().untimed
    }

    /// Pretend a deputy waits until `deadline`, for tests of the leader's
    /// step 3a.
    #[cfg(test)]
    pub(crate) fn pretend_watching(&self, deadline: Instant) {
        self.inbox.lock().timed.push(deadline);
    }
}

/// How far past a due time the leader wakes early for its deputies wake:
/// they are its backup, for a leader whose early wake came late or whose
/// CPU did not run. At the due time itself a deputy's wake-up met the
/// leader starting the task: with other processes' threads busy on both
/// CPUs, one of the two then waited for a CPU for milliseconds (the
/// preemption workload beside two busy loops, 2 workers, 12 runs of 200
/// trials: the largest lateness over 1 ms in 8 runs against 3 with the
/// deputies 50 µs later; one pool for 2,000 trials, p99.9 3,009-3,707 µs
/// against 211-2,376; `docs/benchmarks.md`). On a quiet machine the
/// leader then passes the lead with a wake-up, no deputy's deadline
/// having passed: a few microseconds on the start.
pub(crate) const BACKUP_AFTER: Duration = Duration::from_micros(50);

/// What travels through the hand-off channel.
pub(crate) enum Msg {
    /// The leadership token.
    Lead(Lead),
    /// Stop: pass it on to the next worker, then exit.
    Exit,
    /// Memory the heap gave up, to free outside every lock.
    Free(Box<dyn std::any::Any + Send>),
    /// The leader went to sleep until a due time with no deputy standing:
    /// look at the heap (step 4) and so stand deputy over it (step 4a).
    Watch,
}

/// A few values in order, without an allocation while there is only one
/// (most scheduling calls replace at most one task).
pub(crate) struct Few<T> {
    /// The first value, while it is the only one.
    first: Option<T>,
    /// All values, once there are two or more.
    all: Vec<T>,
}

impl<T> Few<T> {
    /// None yet.
    pub(crate) fn new() -> Self {
        Few {
            first: None,
            all: Vec::new(),
        }
    }

    /// True while there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none() && self.all.is_empty()
    }

    /// Add a value at the end.
    pub(crate) fn push(&mut self, value: T) {
        if self.all.is_empty() && self.first.is_none() {
            self.first = Some(value);
            return;
        }
        self.all.extend(self.first.take());
        self.all.push(value);
    }
}

impl<T> Extend<T> for Few<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, values: I) {
        values.into_iter().for_each(|v| self.push(v));
    }
}

impl<T> IntoIterator for Few<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::vec::IntoIter<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.all)
    }
}

/// The leadership token. Exactly one exists per running pool; holding it is
/// the only way to wait on the heap. It carries what the leaders have learnt
/// about this machine's wake-up latency, so the estimate travels with the
/// leadership and needs no lock of its own.
#[derive(Debug)]
pub(crate) struct Lead {
    /// How late timed waits return, smoothed.
    latency: WakeLatency,
    /// What the adaptive early wake may still spend on spinning.
    budget: SpinBudget,
    /// Whether spin rounds lose the CPU to other threads.
    contention: Contention,
    /// About when the last work found due was due (real time).
    found_due: Option<Instant>,
    /// The head's due time at a leader's last check (the pool's
    /// nanoseconds, and its real instant), to tell at the next whether it
    /// came due meanwhile.
    looked_at: Option<(i64, Instant)>,
}

impl Lead {
    /// A token with nothing learnt, for tests.
    #[cfg(test)]
    pub(crate) fn first() -> Self {
        Self::assuming(None)
    }

    /// The pool's one token, its wake-latency estimate starting from
    /// `prior` (the workers' timer slack) rather than from nothing.
    ///
    /// A timed wait alone on its CPU ends about a timer slack after its
    /// deadline (the kernel may defer it by that much to fold wake-ups
    /// together, and with nothing to fold with it fires at the end), so
    /// the slack is what the first waits will measure. Starting from 0,
    /// the first due time of a new pool had no early wake, and an idle
    /// spell's first task started a wake latency late (about 100 µs on
    /// this project's guest against scheduled-thread-pool's 85), where
    /// every later isolated timer starts within a few microseconds.
    pub(crate) fn assuming(prior: Option<Duration>) -> Self {
        Lead {
            latency: prior.map_or_else(WakeLatency::default, WakeLatency::assuming),
            budget: SpinBudget::default(),
            contention: Contention::default(),
            found_due: None,
            looked_at: None,
        }
    }

    /// Whether the adaptive early wake may wake early at `now` for a due
    /// time at `deadline` (real time) and spin until it. Only for sparse
    /// due times: when it follows the last work found due by less than
    /// [`DENSE_GAPS`] wake latencies, due times come too close for an
    /// early wake to pay (each one brings the leader's spin, the token's
    /// passes and the followers' wake-ups about, at several times the CPU
    /// of a plain wait). The gap between the two due times decides, not
    /// the time since the last: judged at a check right after a due time,
    /// the next one always looked dense, and a task due 1 ms after the
    /// last, on a guest whose waits ended 150 µs late, got no early wake.
    /// And only while its budget lasts: it earns a tenth of the real time
    /// that passes and spends what its spin rounds take. Precision mode
    /// (`spin_before_due`) asks for its window and is not bounded by this.
    /// Nor while spin rounds have lately lost the CPU ([`Contention`]).
    pub(crate) fn may_spin(&mut self, now: Instant, deadline: Instant) -> bool {
        self.budget.may_spend(now) && !self.dense(deadline) && !self.contention.stands_down(now)
    }

    /// True when the last work found due was due less than
    /// [`DENSE_GAPS`] wake latencies before `now`: due times come close
    /// together.
    pub(crate) fn dense(&self, now: Instant) -> bool {
        self.found_due
            .is_some_and(|at| now.saturating_duration_since(at) < self.latency.early() * DENSE_GAPS)
    }

    /// Work was found due that was due at about `at` (real time).
    pub(crate) fn found_due(&mut self, at: Instant) {
        self.found_due = Some(self.found_due.map_or(at, |last| last.max(at)));
    }

    /// A leader's check saw `head` (the pool's nanoseconds, and its real
    /// instant) at `now` (the pool's). If the head of the check before has
    /// come due since, due work came up meanwhile, whoever started it: that
    /// counts as work found due, at its due time. On dense due times the
    /// deputies start most of it (on four workers with mixed task lengths,
    /// about nine starts in ten), so a leader that counted only its own
    /// finds took such a stream for a sparse one and spent the adaptive
    /// wake's spin budget on it: 23% of a core against 16% with the early
    /// wake off, and scheduled-thread-pool's 15% (`docs/benchmarks.md`).
    pub(crate) fn looked(&mut self, head: Option<(i64, Instant)>, now: i64) {
        if let Some((_, at)) = self.looked_at.filter(|&(due, _)| due <= now) {
            self.found_due(at);
        }
        self.looked_at = head;
    }

    /// A spin round, with the check before it, that began at `began` ended
    /// at `now`: pay for it, and learn whether it lost the CPU.
    pub(crate) fn spent(&mut self, began: Instant, now: Instant) {
        let took = now.saturating_duration_since(began);
        self.budget.spend(took);
        self.contention.spun(took, now);
    }

    /// How much earlier than a due time to end a timed wait.
    pub(crate) fn early(&self) -> Duration {
        self.latency.early()
    }

    /// Learn from one timed wait that returned `late` after its deadline.
    pub(crate) fn observe(&mut self, late: Duration) {
        self.latency.rounds = 0;
        self.latency.observe(late);
    }

    /// The leader spun one round inside the window instead of waiting.
    /// Only timed waits teach the estimate, so a long run of rounds (due times
    /// always inside the window) would keep it where it is for ever: every
    /// [`ROUNDS_PER_DECAY`] rounds in a row count as one wait that was on
    /// time, and the window shrinks until a timed wait measures it again.
    pub(crate) fn spun(&mut self) {
        let w = &mut self.latency;
        w.rounds += 1;
        if w.rounds >= ROUNDS_PER_DECAY {
            w.rounds = 0;
            w.observe(Duration::ZERO);
        }
    }
}

/// Due times closer together than this many wake latencies count as a
/// dense stream, for which the adaptive early wake stands down.
const DENSE_GAPS: u32 = 4;

/// The share of real time the adaptive early wake may spend spinning: one
/// part in `SPIN_SHARE`.
const SPIN_SHARE: u32 = 10;

/// The most spinning time the budget saves up while none is spent.
const MAX_SAVED: Duration = Duration::from_millis(2);

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
    /// Top up for the time since the last look; true if anything is left.
    fn may_spend(&mut self, now: Instant) -> bool {
        if let Some(topped) = self.topped {
            let earned = now.saturating_duration_since(topped) / SPIN_SHARE;
            self.saved = (self.saved + earned).min(MAX_SAVED);
        }
        self.topped = Some(now);
        !self.saved.is_zero()
    }

    /// Pay for `took` of spinning.
    fn spend(&mut self, took: Duration) {
        self.saved = self.saved.saturating_sub(took);
    }
}

/// A spin round longer than this lost the CPU to another thread (a round
/// spins for 20 µs at most).
const SLOW_ROUND: Duration = Duration::from_micros(250);

/// The shortest and longest the adaptive early wake stands down after a
/// spin round lost the CPU.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Whether the early wake's spin rounds lose the CPU. While other threads
/// keep the CPUs busy (another process's build, say), the scheduler may
/// preempt a spinning leader, and the task it woke early for then starts
/// when the leader gets a CPU back, milliseconds late. (When the rounds
/// were yields, each one handed the CPU over for the rest of a time slice:
/// the preemption workload beside a test run, p50 2.2-2.4 ms against 0.1
/// with plain waits.) A round that takes longer than [`SLOW_ROUND`] makes
/// the early wake stand down for a back-off that doubles with each such
/// round (from [`MIN_BACKOFF`] to [`MAX_BACKOFF`]), so sustained contention
/// costs at most one late start per back-off; a prompt round after the
/// back-off ends resets it.
#[derive(Debug, Default, Clone, Copy)]
struct Contention {
    /// Until when the early wake stands down.
    until: Option<Instant>,
    /// The current back-off; zero once rounds are prompt again.
    backoff: Duration,
}

impl Contention {
    /// A spin round (with its check) took `took`, ending at `now`.
    fn spun(&mut self, took: Duration, now: Instant) {
        if took > SLOW_ROUND {
            self.backoff = (self.backoff * 2).clamp(MIN_BACKOFF, MAX_BACKOFF);
            self.until = Some(now + self.backoff);
        } else if !self.stands_down(now) {
            self.backoff = Duration::ZERO;
        }
    }

    /// True while the early wake stands down.
    fn stands_down(&self, now: Instant) -> bool {
        self.until.is_some_and(|until| now < until)
    }
}

/// The most the adaptive early wake moves a wait forward.
const MAX_EARLY: Duration = Duration::from_millis(1);

/// Spin rounds in a row that count as one on-time wait for the estimate.
const ROUNDS_PER_DECAY: u32 = 64;

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
mod tests {
    use super::*;

    #[test]
    fn a_spin_round_that_lost_the_cpu_stands_the_early_wake_down_with_backoff() {
        let t0 = Instant::now();
        let mut lead = Lead::first();
        assert!(lead.may_spin(t0, t0 + Duration::from_secs(1)));
        let far = |at: Instant| at + Duration::from_secs(60);
        // A prompt round changes nothing.
        lead.spent(t0, t0 + Duration::from_micros(5));
        assert!(lead.may_spin(t0, far(t0)));
        // A round that lost the CPU: no early wake for the back-off.
        let slow = t0 + SLOW_ROUND * 2;
        lead.spent(t0, slow);
        assert!(!lead.may_spin(slow, far(slow)));
        assert!(lead.may_spin(slow + MIN_BACKOFF, far(slow + MIN_BACKOFF)));
        // Another right after: twice as long.
        let again = slow + MIN_BACKOFF;
        lead.spent(again, again + SLOW_ROUND * 2);
        let after = again + SLOW_ROUND * 2;
        assert!(!lead.may_spin(after + MIN_BACKOFF, far(after)));
        assert!(lead.may_spin(after + MIN_BACKOFF * 2, far(after)));
        // A prompt round once it has ended resets the back-off.
        let calm = after + MIN_BACKOFF * 2;
        lead.spent(calm, calm + Duration::from_micros(5));
        lead.spent(calm, calm + SLOW_ROUND * 2);
        let last = calm + SLOW_ROUND * 2;
        assert!(lead.may_spin(last + MIN_BACKOFF, far(last)));
        // Bounded.
        let mut c = Contention::default();
        for _ in 0..20 {
            c.spun(SLOW_ROUND * 2, t0);
        }
        assert_eq!(c.backoff, MAX_BACKOFF);
    }

    #[test]
    fn a_token_assuming_a_prior_wakes_early_before_it_has_measured() {
        assert_eq!(Lead::first().early(), Duration::ZERO);
        let slack = Duration::from_micros(50);
        let mut token = Lead::assuming(Some(slack));
        assert_eq!(token.early(), Duration::from_micros(100));
        // Waits that end on time teach it down from the prior.
        for _ in 0..64 {
            token.observe(Duration::ZERO);
        }
        assert!(
            token.early() < Duration::from_micros(5),
            "{:?}",
            token.early()
        );
        assert_eq!(
            Lead::assuming(Some(Duration::from_secs(1))).early(),
            MAX_EARLY
        );
    }

    #[test]
    fn a_head_that_came_due_between_two_looks_makes_the_stream_dense() {
        let base = Instant::now();
        let head = |ns: u64| Some((ns as i64, base + Duration::from_nanos(ns)));
        let at = |ns: u64| base + Duration::from_nanos(ns);
        let mut token = Lead::first();
        token.observe(Duration::from_micros(100));
        token.looked(head(1_000), 500);
        token.looked(head(1_000), 900);
        assert!(!token.dense(at(1_000)), "the head has not come due");
        // Started by another thread meanwhile: the next look sees a new head.
        token.looked(head(2_000), 1_200);
        assert!(token.dense(at(2_000)), "a due time passed");
        assert!(!token.dense(at(10_000_000)), "long after it");
        // The head of the last look travels with the token.
        token.looked(None, 3_000);
        assert!(token.dense(at(10_000)), "due at 2 µs");
        assert!(!token.dense(at(10_000_000)));
        token.looked(None, 20_000_000);
        assert!(!token.dense(at(20_000_000)), "nothing pending");
    }

    #[test]
    fn a_mailbox_delivers_in_order_and_a_deadline_ends_an_empty_wait() {
        let mailbox = Mailbox::new();
        mailbox.send(1);
        mailbox.send(2);
        assert_eq!(mailbox.recv_watching(None, 1), Some(1));
        let past = Instant::now();
        assert_eq!(
            mailbox.recv_watching(Some(past), 1),
            Some(2),
            "a message first"
        );
        let soon = Instant::now() + Duration::from_millis(5);
        assert_eq!(mailbox.recv_watching(Some(soon), 1), None);
        assert!(Instant::now() >= soon, "not before the deadline");
        assert_eq!(mailbox.deputies(), 0, "it left");
        let mailbox = std::sync::Arc::new(mailbox);
        let sender = mailbox.clone();
        let waiter = std::thread::spawn(move || mailbox.recv_watching(None, 1));
        sender.send(3);
        assert_eq!(waiter.join().expect("the receiver returns"), Some(3));
    }

    /// Wait (yielding, bounded) until `n` receivers stand deputy.
    fn until_deputies(mailbox: &Mailbox<u32>, n: u64) {
        let bound = Instant::now() + Duration::from_secs(30);
        while mailbox.deputies() != n {
            assert!(Instant::now() < bound, "{n} deputies never stood");
            std::thread::yield_now();
        }
    }

    #[test]
    fn past_the_limit_a_receiver_waits_untimed_and_a_place_counts_free_once_left() {
        let mailbox = std::sync::Arc::new(Mailbox::new());
        let far = Instant::now() + Duration::from_secs(3600);
        let first = mailbox.clone();
        let deputy = std::thread::spawn(move || first.recv_watching(Some(far), 1));
        until_deputies(&mailbox, 1);
        // The limit is reached: the next receiver waits untimed, although
        // its deadline has passed.
        let second = mailbox.clone();
        let past = Instant::now();
        let untimed = std::thread::spawn(move || second.recv_watching(Some(past), 1));
        // Sent only once it waits: sent before, the deputy could take one
        // and leave before the second arrives, which would then find a
        // place free and its deadline passed.
        let bound = Instant::now() + Duration::from_secs(30);
        while mailbox.untimed() != 1 {
            assert!(Instant::now() < bound, "the second never waited");
            std::thread::yield_now();
        }
        mailbox.send(1);
        mailbox.send(2);
        let mut got = [
            deputy.join().expect("returns"),
            untimed.join().expect("returns"),
        ];
        got.sort();
        assert_eq!(got, [Some(1), Some(2)], "both took a message");
        assert_eq!(mailbox.deputies(), 0);
        // A deputy that took a message no longer counts: the place is free
        // for the next receiver, whose deadline then ends its wait.
        let first = mailbox.clone();
        let deputy = std::thread::spawn(move || first.recv_watching(Some(far), 1));
        until_deputies(&mailbox, 1);
        mailbox.send(3);
        assert_eq!(deputy.join().expect("returns"), Some(3));
        assert_eq!(mailbox.deputies(), 0, "counted out under the lock");
        let soon = Instant::now() + Duration::from_millis(2);
        assert_eq!(
            mailbox.recv_watching(Some(soon), 1),
            None,
            "stood, timed out"
        );
    }

    #[test]
    fn a_message_handed_over_reaches_the_receiver_whose_deadline_passed() {
        let mailbox = std::sync::Arc::new(Mailbox::new());
        let inbox = mailbox.clone();
        let deadline = Instant::now() + Duration::from_millis(20);
        let deputy = std::thread::spawn(move || inbox.recv_watching(Some(deadline), 1));
        // Hold the lock once the deputy stands: it is then in its wait (or
        // woken and waiting for the lock), and cannot leave before the
        // message is queued.
        let mut locked = loop {
            let inbox = mailbox.inbox.lock();
            if !inbox.timed.is_empty() {
                break inbox;
            }
            drop(inbox);
            std::thread::yield_now();
        };
        let mut now = Instant::now();
        while now < deadline {
            std::thread::yield_now();
            now = Instant::now();
        }
        let woke = mailbox.hand_over_locked(&mut locked, 7, now);
        drop(locked);
        assert!(!woke, "the deputy past its deadline is not woken");
        assert_eq!(deputy.join().expect("the deputy returns"), Some(7));
        assert!(mailbox.inbox.lock().timed.is_empty(), "it left");
        // With no receiver past its deadline it is a plain send.
        let mut inbox = mailbox.inbox.lock();
        assert!(mailbox.hand_over_locked(&mut inbox, 8, Instant::now()));
        drop(inbox);
        assert_eq!(mailbox.try_recv(), Some(8));
    }

    #[test]
    fn wake_latency_estimate_follows_observations_and_is_capped() {
        let mut w = WakeLatency::default();
        assert_eq!(w.early(), Duration::ZERO);
        for _ in 0..200 {
            w.observe(Duration::from_micros(50));
        }
        let e = w.early();
        assert!(
            e >= Duration::from_micros(45) && e <= Duration::from_micros(60),
            "{e:?}"
        );
        let mut stuck = Lead::first();
        for _ in 0..200 {
            stuck.observe(Duration::from_secs(1));
        }
        assert_eq!(stuck.early(), MAX_EARLY);
        for _ in 0..ROUNDS_PER_DECAY * 100 {
            stuck.spun();
        }
        assert!(stuck.early() < MAX_EARLY / 2, "{:?}", stuck.early());
        for _ in 0..200 {
            w.observe(Duration::from_secs(1));
        }
        assert_eq!(w.early(), MAX_EARLY);
    }

    #[test]
    fn the_early_wake_stands_down_for_dense_due_times() {
        let mut lead = Lead::first();
        for _ in 0..200 {
            lead.observe(Duration::from_micros(50));
        }
        let t0 = Instant::now();
        assert!(lead.may_spin(t0, t0), "nothing found due yet: sparse");
        lead.found_due(t0);
        let gap = lead.early() * DENSE_GAPS;
        assert!(
            !lead.may_spin(t0, t0 + gap / 2),
            "due times closer than the gap"
        );
        assert!(lead.may_spin(t0, t0 + gap * 2), "further apart");
        // Judged by the gap between the due times, not by when it is asked.
        assert!(lead.may_spin(t0 + gap / 4, t0 + gap * 2), "asked early");
        // The last due time found stays the latest.
        lead.found_due(t0 - gap);
        assert!(!lead.may_spin(t0, t0 + gap / 2), "an older find");
    }

    #[test]
    fn spin_budget_earns_a_tenth_of_real_time_and_runs_dry() {
        let t0 = Instant::now();
        let mut b = SpinBudget::default();
        assert!(b.may_spend(t0));
        b.spend(MAX_SAVED);
        assert!(!b.may_spend(t0), "spent");
        // 1 ms of real time earns 100 µs of spinning.
        assert!(b.may_spend(t0 + Duration::from_millis(1)));
        b.spend(Duration::from_micros(100));
        assert!(!b.may_spend(t0 + Duration::from_millis(1)));
        // Saving up stops at MAX_SAVED.
        assert!(b.may_spend(t0 + Duration::from_secs(60)));
        assert_eq!(b.saved, MAX_SAVED);
    }
}

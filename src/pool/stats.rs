//! Counters and the lateness histogram that [`TimerPool::stats`](crate::TimerPool::stats)
//! reads.

use super::outcome::{Abandon, Ran};
use crate::sync::{AtomicU64, Mutex, Ordering::Relaxed};
use hdrhistogram::Histogram;
use std::time::Duration;

/// Longest lateness the histogram tells apart; later starts count as this.
const MAX_TRACKED_NS: u64 = 3_600_000_000_000;

/// A snapshot of a pool's counters.
///
/// Once nothing is claimed or running, `scheduled == completed + panicked +
/// expired + cancelled + replaced + shutdown + pending`. A periodic task counts once in
/// `scheduled` and once in the outcome that stopped it; its runs count in
/// `periodic_runs` and `periodic_panics`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::TimerPool;
///
/// let pool = TimerPool::<u64>::builder().workers(1).build()?;
/// pool.schedule(1, Duration::from_secs(60), || ())?;
/// pool.cancel(&1);
/// pool.submit(Duration::ZERO, || ())?.wait();
/// pool.settle(Duration::from_secs(10))?; // the counters follow the outcome
/// let s = pool.stats();
/// assert_eq!((s.scheduled, s.completed, s.cancelled, s.pending), (2, 1, 1, 0));
/// assert_eq!(s.lateness.count, 1);
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Tasks accepted (one-shot and periodic).
    pub scheduled: u64,
    /// Calls refused with an error (shut down, capacity, time out of range,
    /// zero period); nothing was scheduled.
    pub refused: u64,
    /// One-shot tasks that ran and returned.
    pub completed: u64,
    /// One-shot tasks that panicked, and periodic tasks stopped by a panic.
    pub panicked: u64,
    /// One-shot tasks skipped as stale, and periodic tasks stopped because
    /// their next tick lay past the clock's range
    /// ([`Outcome::Expired`](crate::Outcome::Expired)).
    pub expired: u64,
    /// Tasks cancelled while pending (or, periodic, while live).
    pub cancelled: u64,
    /// Tasks replaced under their key while pending.
    pub replaced: u64,
    /// Tasks removed unrun by shutdown, and periodic tasks stopped by it.
    pub shutdown: u64,
    /// Runs of periodic tasks (returned or panicked).
    pub periodic_runs: u64,
    /// Runs of periodic tasks that panicked.
    pub periodic_panics: u64,
    /// Tasks pending now (periodic tasks while live).
    pub pending: usize,
    /// Panics of user code other than a task's own run that the pool
    /// contained: a key's `Hash`, `Eq`, `Clone` or `Drop`, the clock, the
    /// `Drop` of a closure or of a returned value. The threads keep serving;
    /// a task whose own key panicked is reported `Panicked`
    /// (`docs/semantics.md`, "User code").
    pub contained_panics: u64,
    /// Times a leader woke from its wait (a notify, its deadline, or a
    /// spurious wakeup). An idle pool does not wake; a pool with one far
    /// timer wakes about once, at its time.
    pub leader_wakeups: u64,
    /// Diagnostics of internal mechanisms, not a stable part of the API:
    /// tasks a deputy started when its deadline passed.
    #[doc(hidden)]
    pub rescued: u64,
    /// Diagnostics: times a deputy's deadline passed.
    #[doc(hidden)]
    pub deputy_wakeups: u64,
    /// Diagnostics: due tasks workers took into their holds (step 4b).
    #[doc(hidden)]
    pub held: u64,
    /// Completion records lost: the completion channel
    /// ([`Builder::completions`](crate::Builder::completions)) was full, or
    /// the key's `Clone` panicked while making one. Always 0 without a
    /// completion stream.
    pub completions_dropped: u64,
    /// How late runs started.
    pub lateness: Lateness,
}

/// Percentiles of `started - due` over every run so far (2 significant
/// digits; saturating at one hour).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool::TimerPool;
///
/// let pool = TimerPool::<u64>::builder().workers(1).build()?;
/// pool.submit(Duration::ZERO, || ())?.wait();
/// pool.settle(Duration::from_secs(10))?; // the counters follow the outcome
/// let late = pool.stats().lateness;
/// assert_eq!(late.count, 1);
/// assert!(late.p50 <= late.p99 && late.p99 <= late.max);
/// # Ok::<(), timerpool::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lateness {
    /// Runs recorded.
    pub count: u64,
    /// Median.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// 99.9th percentile.
    pub p999: Duration,
    /// Largest.
    pub max: Duration,
}

/// The pool's live counters. Producers, cancellers and each worker write
/// different cache lines, so counting never bounces a line between threads.
#[derive(Debug)]
pub(crate) struct Counters {
    /// Written by callers of schedule/submit.
    intake: Intake,
    /// Written by whoever removes a pending task.
    removals: Removals,
    /// One block per worker, written only by that worker, merged on read.
    workers: Vec<PerWorker>,
    /// Contained panics of user code that is not a task's run.
    contained: AtomicU64,
    /// Tasks dropped unrun because their key panicked (told `Panicked`).
    lost: AtomicU64,
    /// Completion records dropped (channel full, or the key's `Clone`
    /// panicked); written only when that happens.
    completions_dropped: AtomicU64,
}

/// Counters written on the scheduling side, on their own cache lines
/// (admitted tasks are counted under the state lock: `State::scheduled`).
#[derive(Debug)]
#[repr(align(128))]
struct Intake {
    refused: AtomicU64,
}

/// The counters kept under the state lock, read in one critical section.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Locked {
    /// Tasks pending.
    pub(crate) pending: usize,
    /// Tasks admitted.
    pub(crate) scheduled: u64,
    /// Times the leader returned from a wait.
    pub(crate) leader_wakeups: u64,
}

/// Counters of tasks removed unrun, on their own cache lines.
#[derive(Debug)]
#[repr(align(128))]
struct Removals {
    cancelled: AtomicU64,
    replaced: AtomicU64,
    shutdown: AtomicU64,
}

/// One worker's counters and lateness histogram; its lock is taken by that
/// worker once per run and by `stats()` to read.
#[derive(Debug)]
#[repr(align(128))]
struct PerWorker(Mutex<WorkerCounts>);

#[derive(Debug)]
struct WorkerCounts {
    /// Runs ended (or skipped as stale), periodic ones included.
    finished: u64,
    completed: u64,
    panicked: u64,
    expired: u64,
    periodic_runs: u64,
    periodic_panics: u64,
    /// Tasks started as the deputy.
    rescued: u64,
    /// Times the deputy's deadline passed.
    deputy_wakeups: u64,
    /// Tasks taken into the hold.
    held: u64,
    lateness: Histogram<u64>,
}

impl Counters {
    pub(crate) fn new(workers: usize) -> Self {
        let z = || AtomicU64::new(0);
        Counters {
            intake: Intake { refused: z() },
            removals: Removals {
                cancelled: z(),
                replaced: z(),
                shutdown: z(),
            },
            workers: (0..workers)
                .map(|_| {
                    PerWorker(Mutex::new(WorkerCounts {
                        finished: 0,
                        completed: 0,
                        panicked: 0,
                        expired: 0,
                        periodic_runs: 0,
                        periodic_panics: 0,
                        rescued: 0,
                        deputy_wakeups: 0,
                        held: 0,
                        lateness: Histogram::new_with_bounds(1, MAX_TRACKED_NS, 2)
                            .expect("constant histogram bounds are valid"),
                    }))
                })
                .collect(),
            contained: z(),
            lost: z(),
            completions_dropped: z(),
        }
    }

    /// A task was dropped unrun because its key panicked (a contained panic
    /// too).
    pub(crate) fn lost_to_a_panic(&self) {
        self.lost.fetch_add(1, Relaxed);
        self.contained();
    }

    /// Runs ended so far (one-shot and periodic, stale skips included).
    pub(crate) fn finished(&self) -> u64 {
        self.workers.iter().map(|w| w.0.lock().finished).sum()
    }

    /// A panic of user code other than a task's run was contained.
    pub(crate) fn contained(&self) {
        self.contained.fetch_add(1, Relaxed);
    }

    /// A completion record was dropped.
    pub(crate) fn completion_dropped(&self) {
        self.completions_dropped.fetch_add(1, Relaxed);
    }

    /// `n` tasks were accepted.
    /// `n` tasks were refused.
    pub(crate) fn refused(&self, n: u64) {
        self.intake.refused.fetch_add(n, Relaxed);
    }

    /// A task or periodic task left the pool unrun (or stopped) for `why`.
    pub(crate) fn abandoned(&self, why: Abandon) {
        match why {
            Abandon::Cancelled => &self.removals.cancelled,
            Abandon::Replaced => &self.removals.replaced,
            Abandon::Shutdown => &self.removals.shutdown,
        }
        .fetch_add(1, Relaxed);
    }

    /// Worker `worker` ended a run (or skipped it as stale, with no
    /// lateness): a one-shot task finished, or a periodic task ran.
    pub(crate) fn ran(&self, worker: usize, late_ns: Option<i64>, ran: Ran, periodic: bool) {
        let Some(w) = self.workers.get(worker) else {
            return;
        };
        let mut c = w.0.lock();
        c.finished += 1;
        if ran == Ran::Waited {
            // A calendar task reading the wall clock: no run, no lateness.
            return;
        }
        if let Some(late) = late_ns {
            c.lateness.saturating_record(late.max(0) as u64);
        }
        match (periodic, ran) {
            (false, Ran::Completed) => c.completed += 1,
            (false, Ran::Panicked) => c.panicked += 1,
            (false, Ran::Expired) => c.expired += 1,
            (true, Ran::Completed) => c.periodic_runs += 1,
            (true, Ran::Panicked) => {
                c.periodic_runs += 1;
                c.periodic_panics += 1;
            }
            (true, Ran::Expired) | (_, Ran::Waited) => {}
        }
    }

    /// Worker `worker`, as the deputy, started a task the leader had left.
    pub(crate) fn rescued(&self, worker: usize) {
        if let Some(w) = self.workers.get(worker) {
            w.0.lock().rescued += 1;
        }
    }

    /// Worker `worker` took `n` tasks into its hold.
    pub(crate) fn held(&self, worker: usize, n: usize) {
        if let Some(w) = self.workers.get(worker) {
            w.0.lock().held += n as u64;
        }
    }

    /// Worker `worker`'s deadline as the deputy passed.
    pub(crate) fn deputy_woke(&self, worker: usize) {
        if let Some(w) = self.workers.get(worker) {
            w.0.lock().deputy_wakeups += 1;
        }
    }

    /// Worker `worker` stopped a periodic task by itself: a run panicked
    /// (`panicked`), or its next tick lay past the clock's range
    /// (`expired`).
    pub(crate) fn stopped(&self, worker: usize, panicked: bool) {
        if let Some(w) = self.workers.get(worker) {
            let mut c = w.0.lock();
            if panicked {
                c.panicked += 1;
            } else {
                c.expired += 1;
            }
        }
    }

    /// The counters now, with those kept under the state lock (`pending`,
    /// `scheduled`, `leader_wakeups`); `clock_panics` are the clock's
    /// contained panics.
    pub(crate) fn snapshot(&self, locked: Locked, clock_panics: u64) -> Stats {
        let Locked {
            pending,
            scheduled,
            leader_wakeups,
        } = locked;
        let mut all = Histogram::<u64>::new_with_bounds(1, MAX_TRACKED_NS, 2)
            .expect("constant histogram bounds are valid");
        let (mut completed, mut panicked, mut expired, mut runs, mut run_panics) = (0, 0, 0, 0, 0);
        let (mut rescued, mut deputy_wakeups, mut held) = (0, 0, 0);
        for w in &self.workers {
            let c = w.0.lock();
            // Same bounds on both sides: adding cannot fail.
            let _ = all.add(&c.lateness);
            completed += c.completed;
            panicked += c.panicked;
            expired += c.expired;
            runs += c.periodic_runs;
            run_panics += c.periodic_panics;
            rescued += c.rescued;
            deputy_wakeups += c.deputy_wakeups;
            held += c.held;
        }
        let q = |q: f64| Duration::from_nanos(all.value_at_quantile(q));
        let panicked = panicked + self.lost.load(Relaxed);
        Stats {
            scheduled,
            refused: self.intake.refused.load(Relaxed),
            completed,
            panicked,
            expired,
            cancelled: self.removals.cancelled.load(Relaxed),
            replaced: self.removals.replaced.load(Relaxed),
            shutdown: self.removals.shutdown.load(Relaxed),
            periodic_runs: runs,
            periodic_panics: run_panics,
            pending,
            contained_panics: self.contained.load(Relaxed) + clock_panics,
            leader_wakeups,
            rescued,
            deputy_wakeups,
            held,
            completions_dropped: self.completions_dropped.load(Relaxed),
            lateness: Lateness {
                count: all.len(),
                p50: q(0.5),
                p90: q(0.9),
                p99: q(0.99),
                p999: q(0.999),
                max: Duration::from_nanos(all.max()),
            },
        }
    }
}

//! Counters and the lateness histogram that [`TimerPool::stats`](crate::TimerPool::stats)
//! reads.

use super::outcome::Abandon;
use super::task::Ran;
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
    /// One-shot tasks skipped as stale ([`Outcome::Expired`](crate::Outcome::Expired)).
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
    /// Times a leader woke from its wait (a notify, its deadline, or a
    /// spurious wakeup). An idle pool does not wake; a pool with one far
    /// timer wakes about once, at its time.
    pub leader_wakeups: u64,
    /// How late runs started.
    pub lateness: Lateness,
}

/// Percentiles of `started - due` over every run so far (2 significant
/// digits; saturating at one hour).
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

/// The pool's live counters. Producers and workers write different cache
/// lines, so counting does not bounce one line between them.
#[derive(Debug)]
pub(crate) struct Counters {
    /// Written by callers of schedule/submit.
    intake: Intake,
    completed: AtomicU64,
    panicked: AtomicU64,
    expired: AtomicU64,
    cancelled: AtomicU64,
    replaced: AtomicU64,
    shutdown: AtomicU64,
    periodic_runs: AtomicU64,
    periodic_panics: AtomicU64,
    /// One lateness histogram per worker, merged on read.
    lateness: Vec<Mutex<Histogram<u64>>>,
}

/// Counters written on the scheduling side, on their own cache lines.
#[derive(Debug)]
#[repr(align(128))]
struct Intake {
    scheduled: AtomicU64,
    refused: AtomicU64,
}

impl Counters {
    pub(crate) fn new(workers: usize) -> Self {
        let z = || AtomicU64::new(0);
        Counters {
            intake: Intake {
                scheduled: z(),
                refused: z(),
            },
            completed: z(),
            panicked: z(),
            expired: z(),
            cancelled: z(),
            replaced: z(),
            shutdown: z(),
            periodic_runs: z(),
            periodic_panics: z(),
            lateness: (0..workers)
                .map(|_| {
                    Mutex::new(
                        Histogram::new_with_bounds(1, MAX_TRACKED_NS, 2)
                            .expect("constant histogram bounds are valid"),
                    )
                })
                .collect(),
        }
    }

    /// `n` tasks were accepted.
    pub(crate) fn scheduled(&self, n: u64) {
        self.intake.scheduled.fetch_add(n, Relaxed);
    }

    pub(crate) fn refused(&self) {
        self.intake.refused.fetch_add(1, Relaxed);
    }

    /// A task or periodic task left the pool unrun (or stopped) for `why`.
    pub(crate) fn abandoned(&self, why: Abandon) {
        match why {
            Abandon::Cancelled => &self.cancelled,
            Abandon::Replaced => &self.replaced,
            Abandon::Shutdown => &self.shutdown,
        }
        .fetch_add(1, Relaxed);
    }

    /// A one-shot task finished.
    pub(crate) fn finished(&self, ran: Ran) {
        match ran {
            Ran::Completed => &self.completed,
            Ran::Panicked => &self.panicked,
            Ran::Expired => &self.expired,
        }
        .fetch_add(1, Relaxed);
    }

    /// A periodic run ended.
    pub(crate) fn periodic_run(&self, ran: Ran) {
        match ran {
            Ran::Completed => {
                self.periodic_runs.fetch_add(1, Relaxed);
            }
            Ran::Panicked => {
                self.periodic_runs.fetch_add(1, Relaxed);
                self.periodic_panics.fetch_add(1, Relaxed);
            }
            Ran::Expired => {}
        }
    }

    /// A periodic task stopped by a panic.
    pub(crate) fn stopped_by_panic(&self) {
        self.panicked.fetch_add(1, Relaxed);
    }

    /// Worker `worker` started a run `late_ns` after its due time.
    pub(crate) fn record_lateness(&self, worker: usize, late_ns: i64) {
        if let Some(h) = self.lateness.get(worker) {
            h.lock().saturating_record(late_ns.max(0) as u64);
        }
    }

    pub(crate) fn snapshot(&self, pending: usize, leader_wakeups: u64) -> Stats {
        let mut all = Histogram::<u64>::new_with_bounds(1, MAX_TRACKED_NS, 2)
            .expect("constant histogram bounds are valid");
        for h in &self.lateness {
            // Same bounds on both sides: adding cannot fail.
            let _ = all.add(&*h.lock());
        }
        let q = |q: f64| Duration::from_nanos(all.value_at_quantile(q));
        Stats {
            scheduled: self.intake.scheduled.load(Relaxed),
            refused: self.intake.refused.load(Relaxed),
            completed: self.completed.load(Relaxed),
            panicked: self.panicked.load(Relaxed),
            expired: self.expired.load(Relaxed),
            cancelled: self.cancelled.load(Relaxed),
            replaced: self.replaced.load(Relaxed),
            shutdown: self.shutdown.load(Relaxed),
            periodic_runs: self.periodic_runs.load(Relaxed),
            periodic_panics: self.periodic_panics.load(Relaxed),
            pending,
            leader_wakeups,
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

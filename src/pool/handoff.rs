//! The hand-off: what travels through the channel between the leader, the
//! scheduling calls and the workers, and the lead token.
//!
//! # Ground rules
//!
//! - The channel is FIFO and unbounded. Claimed tasks go in before the token
//!   that follows them, and an exit pill goes in only behind everything
//!   claimed (`docs/protocol.md`, steps 5, 8 and 12).
//! - Exactly one [`Lead`] exists while the pool runs; it is in the channel or
//!   held by the one leader.

use super::task::{Runnable, TaskKey};
use crate::sync::Sender;
use std::time::{Duration, Instant};

/// A claimed task, with what the worker needs to run it.
pub(crate) struct Claimed<K> {
    /// The task.
    pub(crate) task: Runnable,
    /// Its key (for periodic re-insertion and exclusive keys).
    pub(crate) key: TaskKey<K>,
    /// Its due time, nanoseconds since the pool's epoch.
    pub(crate) due: i64,
    /// When it was claimed.
    pub(crate) claimed: Instant,
}

/// What travels through the hand-off channel.
pub(crate) enum Msg<K> {
    /// Claimed tasks, in due order: run each and deliver its outcome.
    Run(Vec<Claimed<K>>),
    /// One claimed task.
    One(Claimed<K>),
    /// The leadership token.
    Lead(Lead),
    /// Stop: pass it on to the next worker, then exit.
    Exit,
    /// Buffers the heap gave up, to free outside every lock. Sent last in a
    /// hand-off, so the worker that receives it has nothing else to do.
    Free(Box<dyn std::any::Any + Send>),
}

/// A few values in order, without an allocation while there is only one
/// (most scheduling calls claim or replace at most one task).
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

    /// Add a value at the end.
    pub(crate) fn push(&mut self, value: T) {
        if self.all.is_empty() && self.first.is_none() {
            self.first = Some(value);
            return;
        }
        self.all.extend(self.first.take());
        self.all.push(value);
    }

    /// Values held.
    pub(crate) fn len(&self) -> usize {
        self.all.len() + usize::from(self.first.is_some())
    }

    /// True when it holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none() && self.all.is_empty()
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

impl<K> Few<Claimed<K>> {
    /// Hand claimed tasks to the workers: one task as `One`, more as at most
    /// one `Run` part per worker (a burst then costs one channel hand-off per
    /// part, not per task, and every worker still gets a share).
    pub(crate) fn send(self, tx: &Sender<Msg<K>>, workers: usize) {
        if let Some(task) = self.first {
            let _ = tx.send(Msg::One(task));
            return;
        }
        for part in split(self.all, workers) {
            let _ = tx.send(Msg::Run(part));
        }
    }
}

/// The leadership token. Exactly one exists per running pool; holding it is
/// the only way to claim tasks. It carries what the leaders have learnt
/// about this machine's wake-up latency, so the estimate travels with the
/// leadership and needs no lock of its own.
#[derive(Debug)]
pub(crate) struct Lead {
    /// How late timed waits return, smoothed.
    latency: WakeLatency,
}

impl Lead {
    /// The pool's one token, made once at start-up.
    pub(crate) fn first() -> Self {
        Lead {
            latency: WakeLatency::default(),
        }
    }

    /// How much earlier than a due time to end a timed wait.
    pub(crate) fn early(&self) -> Duration {
        self.latency.early()
    }

    /// Learn from one timed wait that returned `late` after its deadline.
    pub(crate) fn observe(&mut self, late: Duration) {
        self.latency.yields = 0;
        self.latency.observe(late);
    }

    /// The leader yielded once inside the window instead of waiting. Only
    /// timed waits teach the estimate, so a long run of yields (due times
    /// always inside the window) would keep it where it is for ever: every
    /// [`YIELDS_PER_DECAY`] yields in a row count as one wait that was on
    /// time, and the window shrinks until a timed wait measures it again.
    pub(crate) fn yielded(&mut self) {
        let w = &mut self.latency;
        w.yields += 1;
        if w.yields >= YIELDS_PER_DECAY {
            w.yields = 0;
            w.observe(Duration::ZERO);
        }
    }
}

/// The most the adaptive early wake moves a wait forward.
const MAX_EARLY: Duration = Duration::from_millis(1);

/// Yields in a row that count as one on-time wait for the estimate.
const YIELDS_PER_DECAY: u32 = 64;

/// A smoothed estimate of how late a timed wait returns after its deadline:
/// mean plus twice the mean deviation (the round-trip estimator of TCP), so
/// that most wakes land before the due time and the rest is yielded away.
#[derive(Debug, Default, Clone, Copy)]
struct WakeLatency {
    /// Smoothed lateness, nanoseconds.
    mean: u64,
    /// Smoothed absolute deviation, nanoseconds.
    dev: u64,
    /// Yields since the last timed wait.
    yields: u32,
}

impl WakeLatency {
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

/// Split claimed tasks, in order, into at most `workers` parts of nearly
/// equal length.
fn split<T>(batch: Vec<T>, workers: usize) -> Vec<Vec<T>> {
    let parts = workers.min(batch.len()).max(1);
    let per = batch.len().div_ceil(parts);
    let mut out = Vec::with_capacity(parts);
    let mut jobs = batch.into_iter();
    loop {
        let part: Vec<T> = jobs.by_ref().take(per).collect();
        if part.is_empty() {
            return out;
        }
        out.push(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for _ in 0..YIELDS_PER_DECAY * 100 {
            stuck.yielded();
        }
        assert!(stuck.early() < MAX_EARLY / 2, "{:?}", stuck.early());
        for _ in 0..200 {
            w.observe(Duration::from_secs(1));
        }
        assert_eq!(w.early(), MAX_EARLY);
    }

    #[test]
    fn split_keeps_order_and_makes_at_most_one_part_per_worker() {
        let parts = split((0..10).collect::<Vec<_>>(), 3);
        assert_eq!(parts, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
        assert_eq!(split(vec![1], 4), vec![vec![1]]);
        assert!(split(Vec::<u8>::new(), 2).is_empty());
    }
}

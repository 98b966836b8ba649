//! The leader: the one worker in a timed wait on the heap. Protocol and proof
//! sketch: `docs/protocol.md`.
//!
//! # Ground rules
//!
//! - Only the holder of the [`Lead`] token waits on `Shared::leader_cv`; so
//!   `notify_one` always reaches the leader, and no follower ever sleeps on a
//!   clock.
//! - The head, the clock and the mode are read under the state lock in the
//!   same critical section that decides to wait, and re-read after every
//!   wake: nothing is carried across a wait. A yield round of the spin
//!   window is a wait too: the lock is released, the thread yields, and the
//!   leader starts over from the check.
//! - The leader yields instead of sleeping only while the head's real due
//!   instant is within the spin window (the builder's `spin_before_due`, or
//!   the measured wake-up latency when adaptive wake is on, whichever is
//!   longer). No due time in the window means a plain wait, so an idle pool
//!   never spins; due times closer together than the window keep the leader
//!   yielding from one to the next.
//! - A leader that finds claimed tasks queued and nothing due passes the
//!   token on behind them and helps run them.
//! - Claimed tasks leave the heap under the lock and are sent, with the
//!   token after them, only once the lock is released.

#[cfg(loom)]
use super::fault::Fault;
use super::worker::{Claimed, Msg};
use super::{Mode, Shared, TaskKey, NEVER};
use crate::sync::thread;
use std::hash::Hash;
use std::time::Duration;

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
}

/// The most the adaptive early wake moves a wait forward.
const MAX_EARLY: Duration = Duration::from_millis(1);

/// A smoothed estimate of how late a timed wait returns after its deadline:
/// mean plus twice the mean deviation (the round-trip estimator of TCP), so
/// that most wakes land before the due time and the rest is yielded away.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WakeLatency {
    /// Smoothed lateness, nanoseconds.
    mean: u64,
    /// Smoothed absolute deviation, nanoseconds.
    dev: u64,
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
    pub(crate) fn early(&self) -> Duration {
        Duration::from_nanos(self.mean + 2 * self.dev).min(MAX_EARLY)
    }
}

/// Lead until there is due work to hand off, tasks queued to help with, or
/// the pool stops (then the exit pill goes behind everything queued, and the
/// caller serves the queue until a pill reaches it).
pub(crate) fn lead<K: Hash + Eq + Clone + Send + 'static>(shared: &Shared<K>, mut token: Lead) {
    let mut batch: Vec<Claimed<K>> = Vec::new();
    let mut st = shared.state.lock();
    #[cfg(loom)]
    let mut first_now: Option<i64> = None;
    loop {
        match st.mode {
            Mode::Stopped => break,
            Mode::Draining if st.drained() => break,
            #[cfg(loom)]
            Mode::Draining if shared.faulty(Fault::DrainIgnoresHeld) && st.heap.is_empty() => break,
            _ => {}
        }
        let (now_at, now) = shared.now_pair();
        #[cfg(loom)]
        let now = if shared.faulty(Fault::StaleClock) {
            *first_now.get_or_insert(now)
        } else {
            now
        };
        #[cfg(loom)]
        if shared.faulty(Fault::UnlockBeforeWait)
            && st.mode == Mode::Running
            && st.heap.peek_due().map_or(true, |d| d > now)
        {
            drop(st);
            st = shared.state.lock();
            if st.mode == Mode::Running {
                shared.leader_cv.wait(&mut st);
            }
            continue;
        }
        if st.heap.peek_due().map_or(true, |d| d > now) && shared.backlog() > 0 {
            // Claimed tasks wait in the hand-off queue and nothing is due:
            // help run them rather than wait. The token travels behind them,
            // as after a claim.
            drop(st);
            let _ = shared.tx.send(Msg::Lead(token));
            return;
        }
        match st.heap.peek_due() {
            None => {
                shared.leader_cv.wait(&mut st);
                st.wakeups += 1;
            }
            Some(due) if due > now => {
                match shared.real_deadline(due) {
                    Some(deadline) => {
                        let real_now = shared.real_now();
                        let mut window = shared.spin_before_due;
                        if shared.adaptive_wake {
                            window = window.max(token.latency.early());
                        }
                        match deadline.checked_sub(window) {
                            Some(wake_at) if wake_at > real_now => {
                                let timed_out =
                                    shared.leader_cv.wait_until(&mut st, wake_at).timed_out();
                                st.wakeups += 1;
                                if timed_out {
                                    let late = shared.real_now().saturating_duration_since(wake_at);
                                    token.latency.observe(late);
                                }
                            }
                            // Within the window: give the CPU away once with
                            // the lock released, then check everything again.
                            // A yield, not a pure spin: on a busy machine the
                            // workers that must run the task need that CPU.
                            _ => {
                                drop(st);
                                thread::yield_now();
                                st = shared.state.lock();
                            }
                        }
                    }
                    None => {
                        shared.leader_cv.wait(&mut st);
                        st.wakeups += 1;
                    }
                }
            }
            Some(_) => {
                while batch.len() < shared.claim_batch {
                    let Some(entry) = st.heap.pop_due(now) else {
                        break;
                    };
                    if shared.exclusive && matches!(entry.key, TaskKey::Keyed(_)) {
                        #[cfg(loom)]
                        if shared.faulty(Fault::ExclusiveNoHold) {
                            st.busy.remove(&entry.key);
                        }
                        if st.busy.contains(&entry.key) {
                            // Its key's previous task still runs: hold it
                            // until that one returns (worker::execute).
                            st.held.insert(entry.key.clone(), entry);
                            continue;
                        }
                        st.busy.insert(entry.key.clone());
                    }
                    if let Some(stand_in) = entry.value.stand_in() {
                        // A periodic task stays findable under its key while
                        // it runs.
                        stand_in.set_seq(st.heap.next_seq());
                        let _ = st.heap.insert(entry.key.clone(), NEVER, stand_in);
                    }
                    batch.push(Claimed {
                        job: entry.value,
                        key: entry.key,
                        due: entry.due,
                        claimed: now_at,
                    });
                }
                if batch.is_empty() {
                    // Everything due was held back: check again.
                    continue;
                }
                // Buffers the heap gave up while shrinking: a free can stall
                // for milliseconds, so they travel behind the token and a
                // worker with nothing else to do frees them.
                let retired = st.heap.take_retired();
                drop(st);
                // One message per worker at most, not one per task: a burst
                // costs a channel hand-off (and perhaps a wake-up) per part,
                // while every worker still gets a share to run in parallel.
                let parts = split(batch, shared.workers);
                for part in parts {
                    let _ = shared.tx.send(Msg::Run(part));
                }
                #[cfg(loom)]
                if shared.faulty(Fault::DropLead) {
                    let Lead { .. } = token;
                    return;
                }
                let _ = shared.tx.send(Msg::Lead(token));
                if !retired.is_empty() {
                    let _ = shared.tx.send(Msg::Free(Box::new(retired)));
                }
                return;
            }
        }
    }
    drop(st);
    // The token ends here: no leader follows.
    let Lead { .. } = token;
    let _ = shared.tx.send(Msg::Exit);
}

/// Split claimed tasks, in order, into at most `workers` parts of nearly
/// equal length.
pub(crate) fn split<T>(batch: Vec<T>, workers: usize) -> Vec<Vec<T>> {
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

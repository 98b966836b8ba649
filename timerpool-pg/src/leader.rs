//! The leader of a node (protocol: `docs/durable.md`, "A node's steps"):
//! one thread that waits until the queue's earliest run time or a
//! notification, claims a batch with `FOR UPDATE SKIP LOCKED` and hands it
//! to the workers through a channel.
//!
//! # Ground rules
//!
//! - Only this thread uses the leader connection; it `LISTEN`s on the
//!   queue channel and the node's own wake channel.
//! - Nothing is carried across a wait: after every wake (deadline,
//!   notification, safety bound, reconnect) it claims and asks the
//!   database for the next run time again.
//! - `in_flight` counts attempts handed to workers; the leader claims only
//!   while it is below `prefetch`.
//! - Its first claim and then one claim per safety re-check period also
//!   ask whether a calendar schedule of the queue lacks a live pending
//!   tick (`sql::claim_recheck`); only if one does, the leader tops the
//!   schedules up (`calendar.rs`) on its connection and claims again at
//!   once. So the check costs an idle node no transaction of its own.

use crate::connect::Connector;
use crate::recorder::{Done, Msg, Verdict};
use crate::shared::{Job, Shared};
use crate::sql;
use crossbeam_channel::Sender;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::Type;
use postgres::{Client, Notification, Statement};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

/// The leader connection with its prepared statements.
struct Conn {
    client: Client,
    claim: Statement,
    /// The claim that also asks for stalled calendar schedules.
    recheck: Statement,
}

impl Conn {
    fn prepare(mut client: Client, shared: &Shared) -> Result<Conn, postgres::Error> {
        let queue = &shared.cfg.queue;
        let types = [Type::TEXT, Type::INT8, Type::TEXT, Type::INT8];
        let claim = client.prepare_typed(&queue.sql().claim, &types)?;
        let recheck = client.prepare_typed(&sql::claim_recheck(queue.schema()), &types)?;
        Ok(Conn {
            client,
            claim,
            recheck,
        })
    }
}

/// The tail of every wait that is slept on the thread rather than on the
/// connection's millisecond timer, for sub-millisecond wakes.
const FINE: Duration = Duration::from_millis(2);

/// What a claim found.
struct Claimed {
    /// Attempts claimed.
    n: usize,
    /// The database's time, µs since the epoch.
    now: i64,
    /// The earliest run time left in the queue, µs since the epoch.
    next: Option<i64>,
    /// A re-check's claim found a calendar schedule without a live
    /// pending tick.
    stalled: bool,
}

/// The leader's state between rounds.
struct Leader<'a> {
    shared: &'a Shared,
    jobs: Sender<Job>,
    done: Sender<Msg>,
    /// Consecutive rounds that found due tasks but claimed none (they were
    /// locked by another transaction): each doubles a short pause.
    locked_streak: u32,
}

/// Runs the leader until the node stops; dropping `jobs` on return lets
/// the workers drain and exit.
pub(crate) fn run(
    shared: &Shared,
    connector: Connector,
    first: Client,
    jobs: Sender<Job>,
    done: Sender<Msg>,
) {
    let mut leader = Leader {
        shared,
        jobs,
        done,
        locked_streak: 0,
    };
    let mut conn = Conn::prepare(first, shared).ok();
    let counters = &shared.counters;
    // Reconnects since the last good round: a statement that keeps failing
    // on a fresh connection (say, a dropped table) must not spin.
    let mut failures = 0u32;
    // When the last safety re-check's claim ran; `None` until the first,
    // at start.
    let mut rechecked: Option<Instant> = None;
    while !shared.stopping() {
        let limit = leader.room();
        if limit == 0 {
            continue;
        }
        let c = match conn.as_mut() {
            Some(c) if !c.client.is_closed() => c,
            _ => {
                if failures > 0 {
                    thread::sleep(backoff(failures));
                }
                failures = failures.saturating_add(1);
                conn = connector
                    .reconnect(&shared.stop, &counters.reconnects)
                    .and_then(|client| Conn::prepare(client, shared).ok());
                continue;
            }
        };
        let recheck = rechecked.is_none_or(|t| t.elapsed() >= shared.cfg.safety);
        let at = Instant::now();
        match leader.round(c, limit, recheck) {
            Ok(()) => {
                failures = 0;
                if recheck {
                    rechecked = Some(at);
                }
            }
            // Reconnect and start over: nothing is carried across, and a
            // re-check that failed is asked again.
            Err(_) => conn = None,
        }
    }
}

/// 50 ms doubling per failure, at most 2 s.
fn backoff(failures: u32) -> Duration {
    let shift = failures.saturating_sub(1).min(6);
    Duration::from_millis(50 << shift).min(Duration::from_secs(2))
}

impl Leader<'_> {
    /// Free claim slots, waiting for the workers while there are none;
    /// 0 once the node stops.
    fn room(&self) -> usize {
        let prefetch = self.shared.cfg.prefetch;
        let mut n = self.shared.in_flight.lock();
        if *n >= prefetch {
            while *n > prefetch / 2 && !self.shared.stopping() {
                self.shared.room.wait(&mut n);
            }
        }
        if self.shared.stopping() {
            0
        } else {
            prefetch - *n
        }
    }

    /// One round: forget old notifications, claim (asking for stalled
    /// calendar schedules if `recheck`), then wait for the next run time, a
    /// notification that may be earlier, or the bound.
    fn round(&mut self, c: &mut Conn, limit: usize, recheck: bool) -> Result<(), postgres::Error> {
        {
            let mut pending = c.client.notifications();
            let mut old = pending.iter();
            while old.next()?.is_some() {}
        }
        let Claimed {
            n,
            now,
            next,
            stalled,
        } = self.claim(c, limit, recheck)?;
        if stalled {
            // A failure is left to the next re-check, or to another node;
            // a broken connection shows in the next claim. That claim
            // follows at once: a tick enqueued here may be due already
            // (a missed one, by its backfill policy).
            let _ = self.shared.cfg.queue.top_up_stalled(&mut c.client);
            return Ok(());
        }
        if n == limit {
            return Ok(()); // more may be due
        }
        let bound_us = self.bound().as_micros() as i64;
        let wait_us = match next {
            Some(t) if t <= now && n > 0 => return Ok(()),
            Some(t) if t <= now => {
                // Due but locked by another transaction (a claim, cancel or
                // replace in progress): pause briefly, doubling to 64 ms.
                self.locked_streak = (self.locked_streak + 1).min(6);
                1000 << self.locked_streak
            }
            Some(t) => (t - now).min(bound_us),
            None => bound_us,
        };
        if next.is_none_or(|t| t > now) {
            self.locked_streak = 0;
        }
        let by_bound = wait_us >= bound_us;
        let wait = Duration::from_micros(wait_us as u64);
        self.wait(c, wait, now + wait_us, by_bound)
    }

    /// The longest wait: the safety re-check, and never longer than a
    /// lease, so a lease taken after this leader last looked (claims send
    /// no notification) cannot expire unseen while it sleeps.
    fn bound(&self) -> Duration {
        self.shared.cfg.safety.min(self.shared.cfg.lease)
    }

    /// Claims up to `limit` runnable tasks, hands them on, and reads the
    /// next run time (µs) among the rest, counting the new leases; with
    /// `recheck`, also whether a calendar schedule is stalled.
    fn claim(
        &mut self,
        c: &mut Conn,
        limit: usize,
        recheck: bool,
    ) -> Result<Claimed, postgres::Error> {
        let cfg = &self.shared.cfg;
        let lease_us = cfg.lease.as_micros() as i64;
        let (queue, limit_i) = (cfg.queue.name(), limit as i64);
        let statement = if recheck { &c.recheck } else { &c.claim };
        let rows = c
            .client
            .query(statement, &[&queue, &limit_i, &cfg.id, &lease_us])?;
        let received = Instant::now();
        let now: i64 = rows.first().map_or(0, |r| r.get(0));
        let mut next: Option<i64> = rows.first().and_then(|r| r.get(1));
        // Every row carries the same answer, and there is always a row.
        let stalled = recheck && rows.first().is_some_and(|r| r.get::<_, bool>(12));
        let jobs: Vec<Job> = rows
            .iter()
            .filter(|r| r.get::<_, Option<i64>>(2).is_some())
            .map(|row| Job {
                id: row.get(2),
                key: row.get(3),
                handler: row.get(4),
                payload: row.get(5),
                attempt: row.get(6),
                max_attempts: row.get(7),
                due: row.get(8),
                claimed: row.get(9),
                received,
                stale: row.get(10),
                last_error: row.get(11),
            })
            .collect();
        let n = jobs.len();
        if n > 0 {
            let lease_end = now + lease_us;
            next = Some(next.map_or(lease_end, |t| t.min(lease_end)));
        }
        self.shared.held.lock().extend(jobs.iter().map(|j| j.id));
        let claimed = &self.shared.counters.claimed;
        claimed.fetch_add(n as u64, Ordering::Relaxed);
        jobs.into_iter().for_each(|job| self.dispatch(job));
        Ok(Claimed {
            n,
            now,
            next,
            stalled,
        })
    }

    /// Sends a claimed attempt to a worker, or straight to the recorder if
    /// it must not run (expired, or past its attempt bound).
    fn dispatch(&mut self, job: Job) {
        let verdict = if job.attempt > job.max_attempts {
            let why = job.last_error.clone().unwrap_or_else(|| {
                "no node reported a result: each attempt's lease expired".to_string()
            });
            Some(Verdict::Abandoned(format!(
                "{} attempts: {why}",
                job.max_attempts
            )))
        } else if job.stale {
            Some(Verdict::Expired)
        } else {
            None
        };
        if let Some(verdict) = verdict {
            // The recorder outlives the leader; an error means it is gone.
            let _ = self.done.send(Msg::Done(Done::unrun(&job, verdict)));
            return;
        }
        *self.shared.in_flight.lock() += 1;
        // Workers outlive the leader; an error means the node is torn down.
        let _ = self.jobs.send(job);
    }

    /// Waits up to `wait`, ending early for the node's wake channel or a
    /// queue notification whose run time (µs) is before `deadline`.
    fn wait(
        &mut self,
        c: &mut Conn,
        wait: Duration,
        deadline: i64,
        by_bound: bool,
    ) -> Result<(), postgres::Error> {
        let end = Instant::now() + wait;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if by_bound {
                    let wakes = &self.shared.counters.safety_wakes;
                    wakes.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(());
            }
            if left <= FINE {
                // The connection's timer rounds up to whole milliseconds;
                // the thread's sleep does not. A notification arriving now
                // waits at most `FINE`, then the next round reads the queue.
                thread::sleep(left);
                continue;
            }
            let note = c.client.notifications().timeout_iter(left - FINE).next()?;
            match note {
                Some(n) if self.wakes(&n, deadline) => return Ok(()),
                Some(_) => {}
                // The connection closed: the next round reconnects.
                None if c.client.is_closed() => return Ok(()),
                None => {} // timed out: the fine tail follows
            }
        }
    }

    /// True if `n` may mean work before `deadline`, or is a stop request.
    fn wakes(&self, n: &Notification, deadline: i64) -> bool {
        if n.channel() == self.shared.cfg.wake_channel {
            return true;
        }
        n.payload().parse::<i64>().map_or(true, |t| t < deadline)
    }
}

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

use super::connect::Connector;
use super::node::{Job, Shared};
use super::recorder::{Done, Msg, Verdict};
use crate::sync::{Ordering, Sender};
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::Type;
use postgres::{Client, Notification, Statement};
use std::time::{Duration, Instant};

/// The leader connection with its prepared statements.
struct Conn {
    client: Client,
    claim: Statement,
    next_wait: Statement,
}

impl Conn {
    fn prepare(mut client: Client, shared: &Shared) -> Result<Conn, postgres::Error> {
        let sql = shared.cfg.queue.sql();
        let claim = client.prepare_typed(
            &sql.claim,
            &[Type::TEXT, Type::INT8, Type::TEXT, Type::INT8, Type::TEXT],
        )?;
        let next_wait = client.prepare_typed(&sql.next_wait, &[Type::TEXT])?;
        Ok(Conn {
            client,
            claim,
            next_wait,
        })
    }
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
    while !shared.stopping() {
        let limit = leader.room();
        if limit == 0 {
            continue;
        }
        let c = match conn.as_mut() {
            Some(c) if !c.client.is_closed() => c,
            _ => {
                conn = connector
                    .reconnect(&shared.stop, &counters.reconnects)
                    .and_then(|client| Conn::prepare(client, shared).ok());
                continue;
            }
        };
        if leader.round(c, limit).is_err() {
            // Reconnect and start over: nothing is carried across.
            conn = None;
        }
    }
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

    /// One round: forget old notifications, claim, then wait for the next
    /// run time, a notification that may be earlier, or the safety bound.
    fn round(&mut self, c: &mut Conn, limit: usize) -> Result<(), postgres::Error> {
        {
            let mut pending = c.client.notifications();
            let mut old = pending.iter();
            while old.next()?.is_some() {}
        }
        let claimed = self.claim(c, limit)?;
        if claimed == limit {
            return Ok(()); // more may be due
        }
        let row = c
            .client
            .query_one(&c.next_wait, &[&self.shared.cfg.queue.name()])?;
        let (now, next): (i64, Option<i64>) = (row.get(0), row.get(1));
        let safety = self.shared.cfg.safety;
        let safety_us = safety.as_micros() as i64;
        let wait_us = match next {
            Some(t) if t <= now && claimed > 0 => return Ok(()),
            Some(t) if t <= now => {
                // Due but locked by another transaction (a claim, cancel or
                // replace in progress): pause briefly, doubling to 64 ms.
                self.locked_streak = (self.locked_streak + 1).min(6);
                1000 << self.locked_streak
            }
            Some(t) => (t - now).min(safety_us),
            None => safety_us,
        };
        if next.map_or(true, |t| t > now) {
            self.locked_streak = 0;
        }
        let by_safety = wait_us >= safety_us;
        self.wait(
            c,
            Duration::from_micros(wait_us as u64),
            now + wait_us,
            by_safety,
        )
    }

    /// Claims up to `limit` runnable tasks and hands them on.
    fn claim(&mut self, c: &mut Conn, limit: usize) -> Result<usize, postgres::Error> {
        let cfg = &self.shared.cfg;
        let lease_us = cfg.lease.as_micros() as i64;
        let rows = c.client.query(
            &c.claim,
            &[
                &cfg.queue.name(),
                &(limit as i64),
                &cfg.id,
                &lease_us,
                &cfg.queue.channel(),
            ],
        )?;
        let received = Instant::now();
        let n = rows.len();
        self.shared
            .held
            .lock()
            .extend(rows.iter().map(|r| r.get::<_, i64>(0)));
        self.shared
            .counters
            .claimed
            .fetch_add(n as u64, Ordering::Relaxed);
        for row in rows {
            self.dispatch(Job {
                id: row.get(0),
                key: row.get(1),
                handler: row.get(2),
                payload: row.get(3),
                attempt: row.get(4),
                max_attempts: row.get(5),
                due: row.get(6),
                claimed: row.get(7),
                received,
                stale: row.get(8),
                last_error: row.get(9),
            });
        }
        Ok(n)
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
        by_safety: bool,
    ) -> Result<(), postgres::Error> {
        let end = Instant::now() + wait;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if by_safety {
                    let wakes = &self.shared.counters.safety_wakes;
                    wakes.fetch_add(1, Ordering::Relaxed);
                }
                return Ok(());
            }
            let note = c.client.notifications().timeout_iter(left).next()?;
            match note {
                Some(n) if self.wakes(&n, deadline) => return Ok(()),
                Some(_) => {}
                // The connection closed: the next round reconnects.
                None if c.client.is_closed() => return Ok(()),
                None => {} // timed out: the loop ends above
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

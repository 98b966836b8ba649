//! The recorder of a node: writes results in batches, fenced by (owner,
//! attempt), renews the node's leases, removes records past retention, and
//! wakes the leader at shutdown. It reconnects with backoff and keeps
//! unwritten results until they are written.

use crate::connect::Connector;
use crate::shared::{Job, Shared};
use crate::task::micros_ceil;
use crossbeam_channel::Receiver;
use postgres::types::{ToSql, Type};
use postgres::{Client, GenericClient, Statement};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

/// Most results written in one transaction.
const BATCH: usize = 2048;

/// The longest wait between purges. The next purge is due when the oldest
/// outcome kept passes retention, since outcomes written later finish
/// later; one written late with an older finish time (a result held while
/// the database was unreachable) is removed at most this much later.
const PURGE_MAX_WAIT: Duration = Duration::from_secs(3600);

/// How an attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The handler returned `Ok`.
    Completed,
    /// The handler failed (error, panic, unknown handler): retried while
    /// attempts remain, else the outcome `failed`.
    Failed(String),
    /// Claimed after its expiry window; not run.
    Expired,
    /// Claimed past its attempt bound; not run.
    Abandoned(String),
}

/// The result of one attempt, for the recorder.
#[derive(Debug)]
pub(crate) struct Done {
    id: i64,
    attempt: i32,
    max_attempts: i32,
    verdict: Verdict,
    started: Option<SystemTime>,
    finished: Option<SystemTime>,
}

impl Done {
    /// An attempt a worker ran.
    pub(crate) fn ran(job: &Job, v: Verdict, started: SystemTime, finished: SystemTime) -> Done {
        Done {
            id: job.id,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            verdict: v,
            started: Some(started),
            finished: Some(finished),
        }
    }

    /// An attempt the leader decided not to run.
    pub(crate) fn unrun(job: &Job, v: Verdict) -> Done {
        Done {
            id: job.id,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            verdict: v,
            started: None,
            finished: None,
        }
    }

    /// A failed attempt that may run again.
    fn retries(&self) -> bool {
        matches!(self.verdict, Verdict::Failed(_)) && self.attempt < self.max_attempts
    }
}

/// What the recorder receives.
#[derive(Debug)]
pub(crate) enum Msg {
    /// A result to write.
    Done(Done),
    /// The node is stopping: wake the leader.
    Stop,
}

/// The recorder's connection with the statement of its hot path prepared
/// (parsed once per connection, not once per batch).
struct Conn {
    client: Client,
    finish: Statement,
}

impl Conn {
    fn prepare(mut client: Client, shared: &Shared) -> Result<Conn, postgres::Error> {
        // Planned for each batch's own arrays: after five executions the
        // server may switch a prepared statement to a generic plan, which
        // cannot see a batch's size and (with the statistics of a queue
        // that filled a moment ago) nests a loop over this node's running
        // tasks and the batch, quadratic in the batch, until the statement
        // times out and the batch is written again.
        client.batch_execute("SET plan_cache_mode = force_custom_plan")?;
        let types = [
            Type::TEXT,
            Type::INT8_ARRAY,
            Type::INT4_ARRAY,
            Type::TEXT_ARRAY,
            Type::TEXT_ARRAY,
            Type::TIMESTAMPTZ_ARRAY,
            Type::TIMESTAMPTZ_ARRAY,
        ];
        let finish = client.prepare_typed(&shared.cfg.queue.sql().finish, &types)?;
        Ok(Conn { client, finish })
    }
}

/// The recorder's state.
struct Recorder<'a> {
    shared: &'a Shared,
    connector: Connector,
    conn: Option<Conn>,
    /// Results not yet written.
    batch: Vec<Done>,
    next_beat: Instant,
    next_purge: Instant,
    /// Since when writing has failed, if it is failing.
    failing_since: Option<Instant>,
    /// Pause before the next reconnect attempt.
    pause: Duration,
    /// A stop was asked and the leader not yet woken.
    wake_leader: bool,
    /// The purge statement (`sql::purge_next`).
    purge_sql: String,
}

/// Runs until every sender is gone and every result is written (or, when
/// stopping with the database unreachable, for at most one lease more).
pub(crate) fn run(shared: &Shared, connector: Connector, first: Client, inbox: Receiver<Msg>) {
    let now = Instant::now();
    let mut r = Recorder {
        shared,
        connector,
        conn: Conn::prepare(first, shared).ok(),
        batch: Vec::new(),
        next_beat: now + shared.cfg.heartbeat,
        next_purge: now,
        failing_since: None,
        pause: Duration::from_millis(50),
        wake_leader: false,
        purge_sql: crate::sql::purge_next(shared.cfg.queue.schema()),
    };
    let mut open = true;
    while open || !r.batch.is_empty() {
        if open {
            open = r.collect(&inbox);
        }
        if r.with_client(Recorder::write).is_none() && !open {
            if r.given_up() {
                return;
            }
            // No inbox to wait on any more: pause before the next try.
            std::thread::sleep(r.pause);
            r.pause = (r.pause * 2).min(Duration::from_secs(2));
        }
        r.chores();
    }
}

impl Recorder<'_> {
    /// Waits for results (or a chore's time) and takes up to [`BATCH`];
    /// false once every sender is gone.
    fn collect(&mut self, inbox: &Receiver<Msg>) -> bool {
        let wait = self
            .next_beat
            .min(self.next_purge)
            .saturating_duration_since(Instant::now());
        let wait = if self.batch.is_empty() {
            wait
        } else {
            wait.min(self.pause)
        };
        let first = match inbox.recv_timeout(wait) {
            Ok(m) => m,
            Err(e) => return e.is_timeout(),
        };
        self.take(first);
        while self.batch.len() < BATCH {
            match inbox.try_recv() {
                Ok(m) => self.take(m),
                Err(e) => return !e.is_disconnected(),
            }
        }
        true
    }

    fn take(&mut self, m: Msg) {
        match m {
            Msg::Done(d) => self.batch.push(d),
            Msg::Stop => self.wake_leader = true,
        }
    }

    /// Runs `f` on a live connection, reconnecting (one try per call, with
    /// backoff) if needed; `None` if there was none or `f` failed.
    fn with_client(
        &mut self,
        f: fn(&mut Self, &mut Conn) -> Result<(), postgres::Error>,
    ) -> Option<()> {
        let mut conn = match self.conn.take() {
            Some(c) if !c.client.is_closed() => c,
            _ => self.reconnect()?,
        };
        match f(self, &mut conn) {
            Ok(()) => {
                self.conn = Some(conn);
                self.failing_since = None;
                self.pause = Duration::from_millis(50);
                Some(())
            }
            Err(_) => {
                self.failing_since.get_or_insert_with(Instant::now);
                None
            }
        }
    }

    fn reconnect(&mut self) -> Option<Conn> {
        self.failing_since.get_or_insert_with(Instant::now);
        let conn = self.connector.connect();
        match conn.and_then(|c| Conn::prepare(c, self.shared)) {
            Ok(c) => {
                let n = &self.shared.counters.reconnects;
                n.fetch_add(1, Ordering::Relaxed);
                Some(c)
            }
            Err(_) => {
                std::thread::sleep(self.pause);
                self.pause = (self.pause * 2).min(Duration::from_secs(2));
                None
            }
        }
    }

    /// True when writing has failed for longer than a lease: the leases
    /// have expired, so other nodes re-run those attempts.
    fn given_up(&self) -> bool {
        self.failing_since
            .is_some_and(|t| t.elapsed() > self.shared.cfg.lease)
    }

    /// Writes the batch, in one transaction when it holds retries too;
    /// fenced results are counted.
    fn write(&mut self, conn: &mut Conn) -> Result<(), postgres::Error> {
        if self.wake_leader {
            let chan = &self.shared.cfg.wake_channel;
            conn.client.execute("SELECT pg_notify($1, '')", &[chan])?;
            self.wake_leader = false;
        }
        if self.batch.is_empty() {
            return Ok(());
        }
        let (retry, last): (Vec<&Done>, Vec<&Done>) = self.batch.iter().partition(|d| d.retries());
        let (recorded, retried) = if retry.is_empty() {
            (
                finish(&mut conn.client, &conn.finish, self.shared, &last)?,
                0,
            )
        } else {
            let mut tx = conn.client.transaction()?;
            let recorded = finish(&mut tx, &conn.finish, self.shared, &last)?;
            let retried = give_back(&mut tx, self.shared, &retry)?;
            tx.commit()?;
            (recorded, retried)
        };
        let c = &self.shared.counters;
        c.recorded.fetch_add(recorded as u64, Ordering::Relaxed);
        c.retried.fetch_add(retried as u64, Ordering::Relaxed);
        let fenced = self.batch.len() - recorded - retried;
        c.fenced.fetch_add(fenced as u64, Ordering::Relaxed);
        let mut held = self.shared.held.lock();
        for d in self.batch.drain(..) {
            held.remove(&d.id);
        }
        Ok(())
    }

    /// Heartbeat and retention, when due.
    fn chores(&mut self) {
        let now = Instant::now();
        if now >= self.next_beat && self.with_client(Recorder::heartbeat).is_some() {
            self.next_beat = now + self.shared.cfg.heartbeat;
        }
        // A purge sets the next one's time; one that failed is tried again
        // a period later, not at once: nothing waits on it.
        if now >= self.next_purge && self.with_client(Recorder::purge).is_none() {
            self.next_purge = now + self.shared.cfg.purge_every;
        }
    }

    fn heartbeat(&mut self, conn: &mut Conn) -> Result<(), postgres::Error> {
        let cfg = &self.shared.cfg;
        let lease_us = cfg.lease.as_micros() as i64;
        let ids: Vec<i64> = self.shared.held.lock().iter().copied().collect();
        if ids.is_empty() {
            return Ok(());
        }
        let sql = &cfg.queue.sql().heartbeat;
        let args: [(&(dyn ToSql + Sync), Type); 3] = [
            (&cfg.id, Type::TEXT),
            (&lease_us, Type::INT8),
            (&ids, Type::INT8_ARRAY),
        ];
        conn.client.query_typed(sql, &args)?;
        let n = &self.shared.counters.heartbeats;
        n.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Deletes the queue's outcomes past retention and sets the next
    /// purge for when the oldest one kept passes it: every `purge_every`
    /// at most while outcomes keep passing retention, and on a queue with
    /// none to remove, not before one can (but within `PURGE_MAX_WAIT`).
    fn purge(&mut self, conn: &mut Conn) -> Result<(), postgres::Error> {
        let cfg = &self.shared.cfg;
        let keep_us = micros_ceil(cfg.retention).unwrap_or(i64::MAX);
        let queue = cfg.queue.name();
        let args: [(&(dyn ToSql + Sync), Type); 2] = [(&queue, Type::TEXT), (&keep_us, Type::INT8)];
        let rows = conn.client.query_typed(&self.purge_sql, &args)?;
        let (now_us, oldest_us): (i64, Option<i64>) =
            rows.first().map_or((0, None), |r| (r.get(0), r.get(1)));
        self.next_purge = Instant::now() + purge_wait(now_us, oldest_us, keep_us, cfg.purge_every);
        Ok(())
    }
}

/// The wait until the next purge, from the database's time `now_us`, the
/// finish time of the oldest outcome kept `oldest_us` (µs since the
/// epoch) and the retention `keep_us`: until that outcome passes
/// retention, at least `every`, at most [`PURGE_MAX_WAIT`].
fn purge_wait(now_us: i64, oldest_us: Option<i64>, keep_us: i64, every: Duration) -> Duration {
    // No outcome kept: the first one written from now on passes retention
    // a whole period from now.
    let until_us = oldest_us.map_or(keep_us, |t| {
        t.saturating_add(keep_us).saturating_sub(now_us)
    });
    let until = Duration::from_micros(until_us.max(0).unsigned_abs());
    until.max(every).min(PURGE_MAX_WAIT)
}

/// Records final outcomes; returns how many were still this node's.
fn finish<C: GenericClient>(
    client: &mut C,
    statement: &Statement,
    shared: &Shared,
    done: &[&Done],
) -> Result<usize, postgres::Error> {
    if done.is_empty() {
        return Ok(0);
    }
    let ids: Vec<i64> = done.iter().map(|d| d.id).collect();
    let attempts: Vec<i32> = done.iter().map(|d| d.attempt).collect();
    let outcomes: Vec<&str> = done.iter().map(|d| outcome_name(&d.verdict)).collect();
    let errors: Vec<Option<&str>> = done.iter().map(|d| error_text(&d.verdict)).collect();
    let started: Vec<Option<SystemTime>> = done.iter().map(|d| d.started).collect();
    let finished: Vec<Option<SystemTime>> = done.iter().map(|d| d.finished).collect();
    let args: [&(dyn ToSql + Sync); 7] = [
        &shared.cfg.id,
        &ids,
        &attempts,
        &outcomes,
        &errors,
        &started,
        &finished,
    ];
    Ok(client.query(statement, &args)?.len())
}

/// Gives failed attempts back for a retry after their backoff.
fn give_back(
    tx: &mut postgres::Transaction<'_>,
    shared: &Shared,
    done: &[&Done],
) -> Result<usize, postgres::Error> {
    if done.is_empty() {
        return Ok(0);
    }
    let ids: Vec<i64> = done.iter().map(|d| d.id).collect();
    let attempts: Vec<i32> = done.iter().map(|d| d.attempt).collect();
    let errors: Vec<Option<&str>> = done.iter().map(|d| error_text(&d.verdict)).collect();
    let backoff: Vec<i64> = done
        .iter()
        .map(|d| backoff_us(shared.cfg.retry_backoff, d.attempt))
        .collect();
    let args: [(&(dyn ToSql + Sync), Type); 6] = [
        (&shared.cfg.id, Type::TEXT),
        (&ids, Type::INT8_ARRAY),
        (&attempts, Type::INT4_ARRAY),
        (&errors, Type::TEXT_ARRAY),
        (&backoff, Type::INT8_ARRAY),
        (&shared.cfg.queue.channel(), Type::TEXT),
    ];
    Ok(tx.query_typed(&shared.cfg.queue.sql().retry, &args)?.len())
}

/// `first × 2^(attempt - 1)`, at most 10 minutes, in µs.
fn backoff_us(first: Duration, attempt: i32) -> i64 {
    let shift = attempt.saturating_sub(1).clamp(0, 20) as u32;
    let d = first
        .saturating_mul(1 << shift)
        .min(Duration::from_secs(600));
    d.as_micros() as i64
}

fn outcome_name(v: &Verdict) -> &'static str {
    match v {
        Verdict::Completed => "completed",
        Verdict::Failed(_) => "failed",
        Verdict::Expired => "expired",
        Verdict::Abandoned(_) => "abandoned",
    }
}

fn error_text(v: &Verdict) -> Option<&str> {
    match v {
        Verdict::Failed(e) | Verdict::Abandoned(e) => Some(e),
        Verdict::Completed | Verdict::Expired => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{backoff_us, purge_wait, PURGE_MAX_WAIT};
    use std::time::Duration;

    #[test]
    fn the_next_purge_waits_for_the_oldest_outcome_kept() {
        let (s, minute) = (1_000_000i64, Duration::from_secs(60));
        let now = 1_800_000_000 * s;
        // Kept for an hour; the oldest finished 10 minutes ago.
        let wait = purge_wait(now, Some(now - 600 * s), 3600 * s, minute);
        assert_eq!(wait, Duration::from_secs(3000));
        // Nothing kept: no outcome can pass retention within a period.
        let wait = purge_wait(now, None, 600 * s, minute);
        assert_eq!(wait, Duration::from_secs(600));
        // Outcomes passing retention all the time: once per period.
        assert_eq!(
            purge_wait(now, Some(now - 599 * s), 600 * s, minute),
            minute
        );
        // A week's retention on an idle queue: bounded.
        let week = 7 * 86_400 * s;
        assert_eq!(purge_wait(now, None, week, minute), PURGE_MAX_WAIT);
        assert_eq!(purge_wait(now, Some(now), i64::MAX, minute), PURGE_MAX_WAIT);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let s = Duration::from_secs(1);
        assert_eq!(backoff_us(s, 1), 1_000_000);
        assert_eq!(backoff_us(s, 3), 4_000_000);
        assert_eq!(backoff_us(s, 30), 600_000_000);
    }
}

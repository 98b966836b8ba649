//! The statements of the protocol, written out once per schema, for any
//! driver: the `postgres` calls of this crate use them, and a client built
//! on another driver (tokio-postgres, sqlx) can send the same text with
//! the parameters listed on each field. Every comparison with "now" uses
//! the database's clock, the one clock of all nodes.
//!
//! The client operations (schedule, reschedule, cancel, due time) are calls
//! of the functions the schema installs (`src/migrations/0002.sql`), so
//! callers in SQL and in Rust run one implementation; the node's own
//! statements (claim, finish, retry, heartbeat, purge) are sent as they
//! are. Parameters are typed in the text, so the statements need no type
//! inference from the driver. The outer `SELECT` of a function call costs
//! next to nothing to plan; the function's statements are planned once
//! per session and cached by PL/pgSQL.

/// A delay in whole microseconds (`int8`, NULL for none) as an interval.
macro_rules! micros {
    ($p:literal) => {
        concat!("(", $p, "::int8 * interval '1 microsecond')")
    };
}

/// All statements for one schema.
#[derive(Debug, Clone)]
pub struct Sql {
    /// Schedule one task, returning `(id int8, inserted bool, due timestamptz)`.
    /// Parameters: `$1` queue (text), `$2` key (text), `$3` handler (text),
    /// `$4` due time (timestamptz, or NULL to use `$5`), `$5` delay in µs
    /// after the database's `clock_timestamp()` (int8), `$6` payload
    /// (bytea), `$7` max attempts (int4), `$8` expiry window in µs after
    /// the due time (int8, NULL for none).
    pub schedule: String,
    /// Schedule many tasks, returning `(id, key, inserted, due)` per task.
    /// Parameters as in [`schedule`](Sql::schedule), each but `$1` an array
    /// with one element per task (`text[]`, `text[]`, `timestamptz[]`,
    /// `int8[]`, `bytea[]`, `int4[]`, `int8[]`).
    pub schedule_batch: String,
    /// Move the due time of the pending task of (`$1` queue, `$2` key) in
    /// place to `$3` (timestamptz, or NULL to use `$4`, a delay in µs after
    /// `clock_timestamp()`); returns one bool, true iff it was moved.
    pub reschedule: String,
    /// Cancel the pending task of (`$1` queue, `$2` key), recording its
    /// outcome; returns one bool, true iff it was pending.
    pub cancel: String,
    /// The due time of the pending task of (`$1` queue, `$2` key): one
    /// row, a timestamptz, NULL if there is none.
    pub due_of: String,
    /// Claim up to `$2` runnable tasks of queue `$1` for owner `$3` with a
    /// lease of `$4` µs. Every row starts with the database's time and the
    /// earliest run time among the rows it did not claim (µs); when nothing
    /// is claimed there is one row with the task columns null.
    pub claim: String,
    /// Finish claimed tasks, fenced by (owner `$1`, attempt); returns the
    /// ids that were still this owner's. A `failed`, `abandoned` or
    /// `expired` outcome row keeps the task's payload and attempt bound
    /// (for a retry); the others keep neither. Parameters: `$1` owner
    /// (text), then one element per task: `$2` ids (int8[]), `$3` attempts
    /// (int4[]), `$4` outcomes (text[]), `$5` errors (text[]), `$6` start
    /// times (timestamptz[], NULL if it never started), `$7` finish times
    /// (timestamptz[], NULL for the database's clock).
    pub finish: String,
    /// Give failed attempts back for a retry after a backoff, fenced; `$6`
    /// is the queue's channel, notified with the earliest retry time.
    pub retry: String,
    /// Renew the leases of the tasks `$3` that owner `$1` still holds.
    pub heartbeat: String,
    /// Delete outcomes of queue `$1` older than `$2` µs.
    pub purge: String,
    /// Every record of (`$1` queue, `$2` key), live and finished, oldest first.
    pub history: String,
}

impl Sql {
    /// The statements for schema `s`, which must be a lower-case
    /// identifier (as [`Queue::new`](crate::Queue::new) checks): it is
    /// written into the text unquoted.
    pub fn new(s: &str) -> Sql {
        Sql {
            schedule: schedule(s),
            schedule_batch: schedule_batch(s),
            reschedule: reschedule(s),
            cancel: format!("SELECT {s}.cancel(queue => $1::text, key => $2::text)"),
            due_of: format!("SELECT {s}.due_of(queue => $1::text, key => $2::text)"),
            claim: claim(s),
            finish: finish(s),
            retry: retry(s),
            heartbeat: heartbeat(s),
            purge: purge(s),
            history: history(s),
        }
    }
}

/// The `schedule` call of schema `s`.
fn schedule(s: &str) -> String {
    format!(
        "SELECT id, inserted, due FROM {s}.schedule(
            queue => $1::text, key => $2::text, handler => $3::text,
            run_at => COALESCE($4::timestamptz, clock_timestamp() + {delay}),
            payload => $6::bytea, max_attempts => $7::int4, expire_after => {expiry})",
        delay = micros!("$5"),
        expiry = micros!("$8"),
    )
}

/// The `schedule_many` call of schema `s`: the due times and expiry
/// windows become arrays of `timestamptz` and `interval`, in order.
fn schedule_batch(s: &str) -> String {
    format!(
        "SELECT id, key, inserted, due FROM {s}.schedule_many(
            queue => $1::text, keys => $2::text[], handlers => $3::text[],
            run_ats => ARRAY(SELECT COALESCE(a, clock_timestamp() + d * interval '1 microsecond')
                             FROM unnest($4::timestamptz[], $5::int8[]) WITH ORDINALITY AS u(a, d, i)
                             ORDER BY i),
            payloads => $6::bytea[], max_attempts => $7::int4[],
            expire_afters => ARRAY(SELECT x * interval '1 microsecond'
                                   FROM unnest($8::int8[]) WITH ORDINALITY AS u(x, i)
                                   ORDER BY i))"
    )
}

/// The `reschedule` call of schema `s`.
fn reschedule(s: &str) -> String {
    format!(
        "SELECT {s}.reschedule(queue => $1::text, key => $2::text,
            run_at => COALESCE($3::timestamptz, clock_timestamp() + {delay}))",
        delay = micros!("$4"),
    )
}

/// The `claim` statement of schema `s`.
fn claim(s: &str) -> String {
    claim_with(s, "")
}

/// The `claim` of a node's start and safety re-checks: the same claim,
/// each row ending with one more column, true iff a calendar schedule of
/// the queue has no live pending tick (`calendar::stalled`). Asked in
/// the claim's own statement, so a re-check stays one transaction.
pub(crate) fn claim_recheck(s: &str) -> String {
    let stalled = crate::calendar::stalled(s);
    claim_with(s, &format!(", EXISTS ({stalled}) AS stalled"))
}

/// The claim with `more` (empty, or a comma and columns) after the
/// columns every claim returns.
fn claim_with(s: &str, more: &str) -> String {
    format!(
        "WITH c AS (
            SELECT id FROM {s}.tasks
            WHERE queue = $1 AND run_at <= statement_timestamp()
            ORDER BY run_at, id LIMIT $2
            FOR UPDATE SKIP LOCKED
        ), u AS (
            UPDATE {s}.tasks t SET state = 'running', owner = $3, attempt = t.attempt + 1,
                run_at = statement_timestamp() + $4 * interval '1 microsecond',
                claimed = statement_timestamp()
            FROM c WHERE t.id = c.id
            RETURNING t.id, t.key, t.handler, t.payload, t.attempt, t.max_attempts, t.due,
                t.claimed, (t.expires IS NOT NULL AND t.expires < t.claimed) AS stale,
                t.last_error
        ), nx AS (
            SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8 AS now_us,
                   (extract(epoch FROM min(run_at)) * 1000000)::int8 AS next_us
            FROM {s}.tasks WHERE queue = $1 AND id NOT IN (SELECT id FROM c)
        )
        SELECT nx.now_us, nx.next_us, u.id, u.key, u.handler, u.payload, u.attempt,
               u.max_attempts, u.due, u.claimed, u.stale, u.last_error{more}
        FROM nx LEFT JOIN u ON true
        ORDER BY u.due, u.id"
    )
}

/// The outcomes an operator may retry, as SQL literals: their rows keep
/// the task's payload and attempt bound (migration 4) so that the retry
/// runs it as it was. A completed, cancelled or replaced task has nothing
/// to run again, and its row stores neither.
const RETRYABLE: &str = "'failed', 'abandoned', 'expired'";

/// The `finish` statement of schema `s`: the payload is read only for a
/// retryable outcome, so a completed task's row costs what it did before
/// migration 4.
fn finish(s: &str) -> String {
    format!(
        "WITH r AS (
            SELECT * FROM unnest($2::int8[], $3::int4[], $4::text[], $5::text[],
                                 $6::timestamptz[], $7::timestamptz[])
            AS r(id, attempt, outcome, error, started, finished)
        ), d AS (
            DELETE FROM {s}.tasks t USING r
            WHERE t.id = r.id AND t.attempt = r.attempt AND t.owner = $1
              AND t.state = 'running'
            RETURNING t.id, t.queue, t.key, t.handler, t.due, t.created, t.claimed,
                      t.attempt, r.outcome, r.error, r.started, r.finished,
                      CASE WHEN r.outcome IN ({retryable}) THEN t.payload END AS payload,
                      CASE WHEN r.outcome IN ({retryable}) THEN t.max_attempts END
                          AS max_attempts
        )
        INSERT INTO {s}.outcomes (id, queue, key, handler, outcome, due, created, claimed,
                                  started, finished, attempts, owner, error, payload,
                                  max_attempts)
        SELECT id, queue, key, handler, outcome, due, created, claimed,
               started, COALESCE(finished, clock_timestamp()), attempt, $1, error, payload,
               max_attempts FROM d
        RETURNING id",
        retryable = RETRYABLE,
    )
}

/// The `retry` statement of schema `s`.
fn retry(s: &str) -> String {
    format!(
        "WITH r AS (
            SELECT * FROM unnest($2::int8[], $3::int4[], $4::text[], $5::int8[])
            AS r(id, attempt, error, backoff)
        ), u AS (
            UPDATE {s}.tasks t SET owner = NULL, last_error = r.error,
                run_at = clock_timestamp() + r.backoff * interval '1 microsecond'
            FROM r WHERE t.id = r.id AND t.attempt = r.attempt AND t.owner = $1
              AND t.state = 'running'
            RETURNING t.id, t.run_at
        )
        SELECT u.id FROM u,
            (SELECT pg_notify($6, (extract(epoch FROM min(run_at)) * 1000000)::int8::text)::text
             FROM u HAVING count(*) > 0) n"
    )
}

/// The `heartbeat` statement of schema `s`.
fn heartbeat(s: &str) -> String {
    format!(
        "UPDATE {s}.tasks SET run_at = statement_timestamp() + $2 * interval '1 microsecond'
         WHERE owner = $1 AND state = 'running' AND id = ANY($3::int8[])"
    )
}

/// The `purge` statement of schema `s`.
fn purge(s: &str) -> String {
    format!(
        "DELETE FROM {s}.outcomes
         WHERE queue = $1 AND finished < clock_timestamp() - $2 * interval '1 microsecond'"
    )
}

/// The purge of a node's recorder: as `purge` (`$1` queue, `$2` age in
/// µs), returning one row: the database's time and the finish time of the
/// oldest outcome it keeps (µs since the epoch; NULL if none), the first
/// that can pass retention. Both sides of the cut use one reading of the
/// clock, so no outcome falls between them.
pub(crate) fn purge_next(s: &str) -> String {
    format!(
        "WITH t AS (
            SELECT n AS now, n - $2::int8 * interval '1 microsecond' AS cutoff
            FROM (SELECT clock_timestamp() AS n) c
        ), d AS (
            DELETE FROM {s}.outcomes o USING t
            WHERE o.queue = $1 AND o.finished < t.cutoff
        )
        SELECT (extract(epoch FROM t.now) * 1000000)::int8,
               (SELECT (extract(epoch FROM min(o.finished)) * 1000000)::int8
                FROM {s}.outcomes o WHERE o.queue = $1 AND o.finished >= t.cutoff)
        FROM t"
    )
}

/// The `history` statement of schema `s`.
fn history(s: &str) -> String {
    format!(
        "SELECT id, key, handler, state, due, created, claimed, NULL::timestamptz,
                NULL::timestamptz, attempt, owner, last_error
         FROM {s}.tasks WHERE queue = $1 AND key = $2
         UNION ALL
         SELECT id, key, handler, outcome, due, created, claimed, started, finished,
                attempts, owner, error
         FROM {s}.outcomes WHERE queue = $1 AND key = $2
         ORDER BY 1"
    )
}

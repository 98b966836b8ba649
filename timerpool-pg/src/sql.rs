//! The statements of the protocol, written out once per schema. Every
//! comparison with "now" uses the database's clock, the one clock of all
//! nodes.

/// Columns of a new task, as a row source named `r` with columns
/// `k, h, p, d, x, m` (key, handler, payload, due, expiry, max attempts).
const ONE_ROW: &str = "(SELECT $2::text AS k, $3::text AS h, $4::bytea AS p,
        COALESCE($5::timestamptz, clock_timestamp() + $6::int8 * interval '1 microsecond') AS d,
        $7::int8 AS x, $8::int4 AS m) r";

/// The same for a batch: parallel arrays, one element per task.
const MANY_ROWS: &str = "(SELECT k, h, p,
        COALESCE(da, clock_timestamp() + dl * interval '1 microsecond') AS d, x, m
        FROM unnest($2::text[], $3::text[], $4::bytea[], $5::timestamptz[], $6::int8[],
                    $7::int8[], $8::int4[]) AS u(k, h, p, da, dl, x, m)) r";

/// The insert-or-replace of a schedule, reading new tasks from `rows`.
///
/// Every schedule notifies the queue channel `$9` with the earliest new due
/// time in microseconds since the epoch; leaders ignore a notification
/// whose time is not before the end of their current wait, without a query.
/// Whether a sleeping leader must be woken depends on what it saw when it
/// last looked, which may be after this statement and before the caller's
/// commit (a task due before ours ran meanwhile), so no test of the queue's
/// rows here could decide it; the notification is delivered at commit,
/// once per distinct time per transaction, and never after a rollback. A
/// replaced task gets its outcome row in the same statement.
fn upsert(s: &str, rows: &str) -> String {
    format!(
        "WITH up AS (
            INSERT INTO {s}.tasks AS t (queue, key, handler, payload, due, run_at, expires, max_attempts)
            SELECT $1, r.k, r.h, r.p, r.d, r.d, r.d + r.x * interval '1 microsecond', r.m FROM {rows}
            ON CONFLICT (queue, key) WHERE state = 'pending' DO UPDATE SET
                id = EXCLUDED.id, handler = EXCLUDED.handler, payload = EXCLUDED.payload,
                due = EXCLUDED.due, run_at = EXCLUDED.run_at, expires = EXCLUDED.expires,
                max_attempts = EXCLUDED.max_attempts, created = EXCLUDED.created,
                prev_id = t.id, prev_handler = t.handler, prev_due = t.due,
                prev_created = t.created
            RETURNING t.id, t.key, (t.xmax = 0) AS inserted, t.due, t.prev_id, t.prev_handler,
                      t.prev_due, t.prev_created
        ), gone AS (
            INSERT INTO {s}.outcomes (id, queue, key, handler, outcome, due, created, finished, attempts)
            SELECT prev_id, $1, key, prev_handler, 'replaced', prev_due, prev_created,
                   clock_timestamp(), 0
            FROM up WHERE NOT inserted
        ), early AS (
            SELECT min(up.due) AS d FROM up HAVING count(*) > 0
        )
        SELECT up.id, up.key, up.inserted, up.due, n.x FROM up
        LEFT JOIN (SELECT pg_notify($9, (extract(epoch FROM d) * 1000000)::int8::text)::text AS x
                   FROM early) n ON true"
    )
}

/// All statements for one schema.
#[derive(Debug)]
pub(crate) struct Sql {
    /// Schedule one task; parameters as in [`ONE_ROW`], `$9` the channel.
    pub schedule: String,
    /// Schedule many tasks; parameters as in [`MANY_ROWS`], `$9` the channel.
    pub schedule_batch: String,
    /// Cancel the pending task of (`$1` queue, `$2` key), recording its outcome.
    pub cancel: String,
    /// Claim up to `$2` runnable tasks of queue `$1` for owner `$3` with a
    /// lease of `$4` µs. Every row starts with the database's time and the
    /// earliest run time among the rows it did not claim (µs); when nothing
    /// is claimed there is one row with the task columns null.
    pub claim: String,
    /// Finish claimed tasks, fenced by (owner, attempt); returns the ids
    /// that were still this owner's.
    pub finish: String,
    /// Give failed attempts back for a retry after a backoff, fenced.
    pub retry: String,
    /// Renew the leases of the tasks `$3` that owner `$1` still holds.
    pub heartbeat: String,
    /// Delete outcomes of queue `$1` older than `$2` µs.
    pub purge: String,
    /// Every record of (`$1` queue, `$2` key), live and finished, oldest first.
    pub history: String,
}

impl Sql {
    /// The statements for schema `s` (a validated identifier).
    pub(crate) fn new(s: &str) -> Sql {
        Sql {
            schedule: upsert(s, ONE_ROW),
            schedule_batch: upsert(s, MANY_ROWS),
            cancel: cancel(s),
            claim: claim(s),
            finish: finish(s),
            retry: retry(s),
            heartbeat: heartbeat(s),
            purge: purge(s),
            history: history(s),
        }
    }
}

/// The `cancel` statement of schema `s`.
fn cancel(s: &str) -> String {
    format!(
        "WITH d AS (
            DELETE FROM {s}.tasks WHERE queue = $1 AND key = $2 AND state = 'pending'
            RETURNING id, queue, key, handler, due, created
        )
        INSERT INTO {s}.outcomes (id, queue, key, handler, outcome, due, created, finished, attempts)
        SELECT id, queue, key, handler, 'cancelled', due, created, clock_timestamp(), 0 FROM d
        RETURNING id"
    )
}

/// The `claim` statement of schema `s`.
fn claim(s: &str) -> String {
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
               u.max_attempts, u.due, u.claimed, u.stale, u.last_error
        FROM nx LEFT JOIN u ON true
        ORDER BY u.due, u.id"
    )
}

/// The `finish` statement of schema `s`.
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
                      t.attempt, r.outcome, r.error, r.started, r.finished
        )
        INSERT INTO {s}.outcomes (id, queue, key, handler, outcome, due, created, claimed,
                                  started, finished, attempts, owner, error)
        SELECT id, queue, key, handler, outcome, due, created, claimed,
               started, COALESCE(finished, clock_timestamp()), attempt, $1, error FROM d
        RETURNING id"
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

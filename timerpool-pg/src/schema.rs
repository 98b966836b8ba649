//! The tables, installed and migrated idempotently under an advisory lock,
//! so any number of nodes may start at once on a fresh database.

use crate::Error;
use postgres::GenericClient;

/// Newest schema version this crate knows.
pub(crate) const VERSION: i32 = 1;

/// The statements that take a schema from version `n - 1` to `n`, for
/// `n = 1..=VERSION`. `{s}` is the schema name.
const MIGRATIONS: &[&str] = &[r#"
CREATE SEQUENCE IF NOT EXISTS {s}.task_ids;
CREATE TABLE IF NOT EXISTS {s}.tasks (
    id           bigint PRIMARY KEY DEFAULT nextval('{s}.task_ids'),
    queue        text NOT NULL,
    key          text NOT NULL,
    handler      text NOT NULL,
    payload      bytea NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running')),
    due          timestamptz NOT NULL,
    run_at       timestamptz NOT NULL,
    expires      timestamptz,
    created      timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempt      integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL CHECK (max_attempts > 0),
    owner        text,
    claimed      timestamptz,
    last_error   text,
    prev_id      bigint,
    prev_handler text,
    prev_due     timestamptz,
    prev_created timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS tasks_one_pending ON {s}.tasks (queue, key) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS tasks_run_at ON {s}.tasks (queue, run_at);
CREATE INDEX IF NOT EXISTS tasks_owner ON {s}.tasks (owner) WHERE owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_key ON {s}.tasks (queue, key);
CREATE TABLE IF NOT EXISTS {s}.outcomes (
    id       bigint PRIMARY KEY,
    queue    text NOT NULL,
    key      text NOT NULL,
    handler  text NOT NULL,
    outcome  text NOT NULL CHECK (outcome IN
             ('completed', 'failed', 'cancelled', 'replaced', 'expired', 'abandoned')),
    due      timestamptz NOT NULL,
    created  timestamptz NOT NULL,
    claimed  timestamptz,
    started  timestamptz,
    finished timestamptz NOT NULL,
    attempts integer NOT NULL,
    owner    text,
    error    text
);
CREATE INDEX IF NOT EXISTS outcomes_key ON {s}.outcomes (queue, key);
CREATE INDEX IF NOT EXISTS outcomes_finished ON {s}.outcomes (queue, finished);
"#];

/// Creates the schema or brings it up to [`VERSION`]; safe to call from any
/// number of nodes at once, and a no-op when the schema is current.
pub(crate) fn install<C: GenericClient>(client: &mut C, schema: &str) -> Result<(), Error> {
    let mut tx = client.transaction()?;
    // One installer at a time per schema; the lock ends with the transaction.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('timerpool.install'), hashtext($1))",
        &[&schema],
    )?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.meta (version integer NOT NULL);"
    ))?;
    let found: i32 = tx
        .query_opt(&format!("SELECT version FROM {schema}.meta"), &[])?
        .map_or(0, |row| row.get(0));
    if found > VERSION {
        return Err(Error::SchemaTooNew {
            found,
            known: VERSION,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(&sql.replace("{s}", schema))?;
        tx.execute(&format!("DELETE FROM {schema}.meta"), &[])?;
        tx.execute(
            &format!("INSERT INTO {schema}.meta (version) VALUES ($1)"),
            &[&(i as i32 + 1)],
        )?;
    }
    tx.commit()?;
    Ok(())
}

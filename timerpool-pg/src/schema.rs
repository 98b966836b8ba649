//! The tables and functions, installed and upgraded one migration at a
//! time, so any number of nodes may start at once on an empty or an older
//! database.
//!
//! Each migration runs in its own transaction under an advisory lock on the
//! schema and records itself as one row of `<schema>.migrations` (version,
//! whether it is breaking, when it was applied), whose primary key also
//! turns a second installer that got past the lock into a unique violation
//! rather than a second application. Version 1 recorded its version as the
//! single row of `<schema>.meta`; such a schema is adopted as having
//! applied migrations 1 to that version. `meta` is left as it is: version-1
//! code reads it and refuses a newer schema, so a later *breaking*
//! migration must set `meta.version` to its own number, while additive
//! ones (version 2) leave it, and version-1 nodes keep running beside
//! newer ones.

use crate::Error;
use postgres::GenericClient;

/// One step of the schema's history.
struct Migration {
    /// Its number, from 1 without gaps.
    version: i32,
    /// True if code that does not know it cannot run against it.
    breaking: bool,
    /// The statements, with `{s}` for the schema.
    sql: &'static str,
}

/// Every migration, oldest first.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        breaking: true,
        sql: include_str!("migrations/0001.sql"),
    },
    Migration {
        version: 2,
        breaking: false,
        sql: include_str!("migrations/0002.sql"),
    },
    Migration {
        version: 3,
        breaking: false,
        sql: include_str!("migrations/0003.sql"),
    },
];

/// The newest schema version this crate installs (one row per applied
/// migration in `<schema>.migrations`).
pub const VERSION: i32 = 3;

/// Creates the schema or brings it up to [`VERSION`]; safe to call from any
/// number of processes at once, and a no-op when the schema is current.
pub(crate) fn install<C: GenericClient>(client: &mut C, schema: &str) -> Result<(), Error> {
    let mut tx = client.transaction()?;
    lock(&mut tx, schema)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.migrations (
             version  integer PRIMARY KEY,
             breaking boolean NOT NULL,
             applied  timestamptz NOT NULL DEFAULT clock_timestamp()
         );"
    ))?;
    // A schema installed by version-1 code: its `meta` row counts as
    // migrations 1 to that version.
    let legacy: Option<String> = tx
        .query_one(&format!("SELECT to_regclass('{schema}.meta')::text"), &[])?
        .get(0);
    if legacy.is_some() {
        tx.execute(
            &format!(
                "INSERT INTO {schema}.migrations (version, breaking)
                 SELECT g, g = 1 FROM {schema}.meta, generate_series(1, meta.version) g
                 ON CONFLICT (version) DO NOTHING"
            ),
            &[],
        )?;
    }
    tx.commit()?;
    for m in MIGRATIONS {
        let mut tx = client.transaction()?;
        lock(&mut tx, schema)?;
        let applied: Vec<(i32, bool)> = tx
            .query(
                &format!("SELECT version, breaking FROM {schema}.migrations"),
                &[],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        if let Some(&(found, _)) = applied
            .iter()
            .filter(|(v, breaking)| *v > VERSION && *breaking)
            .max()
        {
            return Err(Error::SchemaTooNew {
                found,
                known: VERSION,
            });
        }
        if applied.iter().any(|(v, _)| *v == m.version) {
            continue; // the transaction rolls back: it changed nothing
        }
        tx.batch_execute(&m.sql.replace("{s}", schema))?;
        tx.execute(
            &format!("INSERT INTO {schema}.migrations (version, breaking) VALUES ($1, $2)"),
            &[&m.version, &m.breaking],
        )?;
        tx.commit()?;
    }
    Ok(())
}

/// Takes the schema's installer lock until the transaction ends.
fn lock(tx: &mut postgres::Transaction<'_>, schema: &str) -> Result<(), Error> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('timerpool.install'), hashtext($1))",
        &[&schema],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_from_one_without_gaps() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i32 + 1);
        }
        assert_eq!(MIGRATIONS.len() as i32, VERSION);
    }
}

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
    Migration {
        version: 4,
        breaking: false,
        sql: include_str!("migrations/0004.sql"),
    },
];

/// The newest schema version this crate installs (one row per applied
/// migration in `<schema>.migrations`).
pub const VERSION: i32 = 4;

/// Creates the schema or brings it up to [`VERSION`]; safe to call from any
/// number of processes at once, and a no-op when the schema is current.
pub(crate) fn install<C: GenericClient>(client: &mut C, schema: &str) -> Result<(), Error> {
    let mut tx = client.transaction()?;
    lock(&mut tx, schema)?;
    tx.batch_execute(&bootstrap(schema))?;
    // A schema installed by version-1 code: its `meta` row counts as
    // migrations 1 to that version.
    let legacy: Option<String> = tx
        .query_one(&format!("SELECT to_regclass('{schema}.meta')::text"), &[])?
        .get(0);
    if legacy.is_some() {
        tx.execute(&adopt_legacy(schema), &[])?;
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
        tx.batch_execute(&record(schema, m))?;
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

/// The schema and its bookkeeping table, created before any migration.
fn bootstrap(schema: &str) -> String {
    format!(
        "CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.migrations (
             version  integer PRIMARY KEY,
             breaking boolean NOT NULL,
             applied  timestamptz NOT NULL DEFAULT clock_timestamp()
         );"
    )
}

/// Records version-1 code's `meta` row as migrations 1 to its version.
fn adopt_legacy(schema: &str) -> String {
    format!(
        "INSERT INTO {schema}.migrations (version, breaking)
         SELECT g, g = 1 FROM {schema}.meta, generate_series(1, meta.version) g
         ON CONFLICT (version) DO NOTHING"
    )
}

/// Records migration `m` as applied (its primary key refuses a second
/// application).
fn record(schema: &str, m: &Migration) -> String {
    format!(
        "INSERT INTO {schema}.migrations (version, breaking) VALUES ({}, {})",
        m.version, m.breaking
    )
}

/// A migration the database records as applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Its number.
    pub version: i32,
    /// Whether it was marked breaking.
    pub breaking: bool,
    /// When it was applied; `None` for one adopted from version-1 code's
    /// `meta` row that the installer has not recorded yet.
    pub applied: Option<std::time::SystemTime>,
}

/// What the database holds of `schema`: `None` if the schema does not
/// exist, else the applied migrations, oldest first. Reads only.
pub(crate) fn applied<C: GenericClient>(
    client: &mut C,
    schema: &str,
) -> Result<Option<Vec<Applied>>, Error> {
    let row = client.query_one(
        "SELECT to_regnamespace($1::text) IS NOT NULL,
                to_regclass($1::text || '.migrations') IS NOT NULL,
                to_regclass($1::text || '.meta') IS NOT NULL",
        &[&schema],
    )?;
    let (exists, recorded, legacy): (bool, bool, bool) = (row.get(0), row.get(1), row.get(2));
    if !exists {
        return Ok(None);
    }
    let mut applied: Vec<Applied> = Vec::new();
    if recorded {
        let rows = client.query(
            &format!("SELECT version, breaking, applied FROM {schema}.migrations ORDER BY 1"),
            &[],
        )?;
        applied.extend(rows.iter().map(|r| Applied {
            version: r.get(0),
            breaking: r.get(1),
            applied: Some(r.get(2)),
        }));
    }
    if legacy {
        let meta: Option<i32> = client
            .query_opt(&format!("SELECT max(version) FROM {schema}.meta"), &[])?
            .and_then(|r| r.get(0));
        for version in 1..=meta.unwrap_or(0) {
            if !applied.iter().any(|a| a.version == version) {
                applied.push(Applied {
                    version,
                    breaking: version == 1,
                    applied: None,
                });
            }
        }
        applied.sort_by_key(|a| a.version);
    }
    Ok(Some(applied))
}

/// The versions and breaking flags of every migration this crate knows.
pub(crate) fn known() -> impl Iterator<Item = (i32, bool)> {
    MIGRATIONS.iter().map(|m| (m.version, m.breaking))
}

/// The SQL [`install`] would run on a database that holds `applied` of
/// `schema` (`None`: no schema), as a script for `psql`: one transaction
/// for the bookkeeping and one per outstanding migration, each under the
/// installer's lock. Empty when nothing is outstanding.
pub(crate) fn script(schema: &str, applied: Option<&[Applied]>) -> String {
    let done = |v: i32| applied.is_some_and(|a| a.iter().any(|x| x.version == v));
    let todo: Vec<&Migration> = MIGRATIONS.iter().filter(|m| !done(m.version)).collect();
    if todo.is_empty() {
        return String::new();
    }
    let lock = format!(
        "SELECT pg_advisory_xact_lock(hashtext('timerpool.install'), hashtext('{schema}'));"
    );
    let mut out = format!("BEGIN;\n{lock}\n{}\n", bootstrap(schema));
    // Adopted migrations of version-1 code have no row of their own yet.
    if applied.is_some_and(|a| a.iter().any(|x| x.applied.is_none())) {
        out.push_str(&format!("{};\n", adopt_legacy(schema)));
    }
    out.push_str("COMMIT;\n");
    for m in todo {
        out.push_str(&format!(
            "\n-- migration {}{}\nBEGIN;\n{lock}\n{}\n{};\nCOMMIT;\n",
            m.version,
            if m.breaking { " (breaking)" } else { "" },
            m.sql.replace("{s}", schema).trim_end(),
            record(schema, m),
        ));
    }
    out
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

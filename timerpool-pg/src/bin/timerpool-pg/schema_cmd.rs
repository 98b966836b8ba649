//! The schema's commands: `migrate` (or the SQL it would run) and
//! `status`.

use super::output::{time_json, time_text, Table};
use super::{Done, Failure, EXIT_ERROR, EXIT_OUTSTANDING};
use serde_json::{json, Value};
use timerpool_pg::admin::{self, MigrationStatus};
use timerpool_pg::postgres;

pub(crate) fn migrate(
    client: &mut postgres::Client,
    schema: &str,
    json: bool,
) -> Result<Done, Failure> {
    let applied = admin::migrate(client, schema)?;
    let status = admin::migration_status(client, schema)?;
    let out = if json {
        json!({
            "schema": schema,
            "applied": applied,
            "version": status.version(),
            "up_to_date": status.up_to_date(),
        })
        .to_string()
            + "\n"
    } else if applied.is_empty() {
        format!(
            "schema {schema} is up to date (version {})\n",
            status.version().unwrap_or(0)
        )
    } else {
        let list: Vec<String> = applied.iter().map(i32::to_string).collect();
        format!(
            "schema {schema}: applied migration{} {}; now at version {}\n",
            if applied.len() == 1 { "" } else { "s" },
            list.join(", "),
            status.version().unwrap_or(0)
        )
    };
    Ok(Done::ok(out))
}

pub(crate) fn print_migration(
    client: &mut postgres::Client,
    schema: &str,
    json: bool,
) -> Result<Done, Failure> {
    let status = admin::migration_status(client, schema)?;
    let sql = admin::migration_script(client, schema)?;
    let out = if json {
        json!({ "schema": schema, "outstanding": status.outstanding, "sql": sql }).to_string()
            + "\n"
    } else if sql.is_empty() {
        format!("-- schema {schema} is up to date: nothing to run\n")
    } else {
        let list: Vec<String> = status.outstanding.iter().map(i32::to_string).collect();
        format!(
            "-- timerpool-pg: the SQL `migrate` would run on schema {schema} \
             (outstanding: {}), for psql -v ON_ERROR_STOP=1\n{sql}",
            list.join(", ")
        )
    };
    Ok(Done::ok(out))
}

pub(crate) fn status(
    client: &mut postgres::Client,
    schema: &str,
    json: bool,
) -> Result<Done, Failure> {
    let status = admin::migration_status(client, schema)?;
    let code = if status.too_new().is_some() {
        EXIT_ERROR
    } else if status.up_to_date() {
        0
    } else {
        EXIT_OUTSTANDING
    };
    let out = if json {
        status_json(&status).to_string() + "\n"
    } else {
        status_text(&status)
    };
    Ok(Done { out, code })
}

fn status_json(s: &MigrationStatus) -> Value {
    let applied: Vec<Value> = s
        .applied
        .iter()
        .map(|a| json!({ "version": a.version, "breaking": a.breaking, "applied": time_json(a.applied) }))
        .collect();
    json!({
        "schema": s.schema,
        "installed": s.installed,
        "version": s.version(),
        "known": s.known,
        "up_to_date": s.up_to_date(),
        "outstanding": s.outstanding,
        "too_new": s.too_new(),
        "applied": applied,
    })
}

fn status_text(s: &MigrationStatus) -> String {
    let mut table = Table::new(&["VERSION>", "BREAKING", "APPLIED"]);
    for a in &s.applied {
        let when = match a.applied {
            Some(t) => time_text(Some(t)),
            None => "(recorded by version-1 code)".to_string(),
        };
        table.row(vec![a.version.to_string(), yes_no(a.breaking), when]);
    }
    for v in &s.outstanding {
        let breaking = v == &1; // migration 1 creates the tables
        table.row(vec![
            v.to_string(),
            yes_no(breaking),
            "outstanding".to_string(),
        ]);
    }
    let summary = if let Some(v) = s.too_new() {
        format!(
            "schema {}: holds breaking migration {v}, newer than this program knows ({}): \
             upgrade timerpool-pg\n",
            s.schema, s.known
        )
    } else if s.up_to_date() {
        format!(
            "schema {}: up to date (version {}, this program knows {})\n",
            s.schema,
            s.version().unwrap_or(0),
            s.known
        )
    } else {
        let list: Vec<String> = s.outstanding.iter().map(i32::to_string).collect();
        format!(
            "schema {}: {}; outstanding migration{} {} (run `timerpool-pg --schema {} migrate`)\n",
            s.schema,
            if s.installed {
                format!("version {}", s.version().unwrap_or(0))
            } else {
                "not installed".to_string()
            },
            if list.len() == 1 { "" } else { "s" },
            list.join(", "),
            s.schema
        )
    };
    table.render() + &summary
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

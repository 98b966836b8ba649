//! `timerpool-pg`: the operator's command line of the durable timers.
//! Installs or upgrades the schema (or prints the SQL it would run), tells
//! whether migrations are outstanding, lists queues with their counts,
//! shows a key's history, cancels a key, retries a failed task and purges
//! old outcomes. Tables for a person, `--json` for scripts.
//!
//! Exit status: 0 done; 1 error (bad input, database unreachable or
//! failing, unknown schema, queue or key); 2 bad command line; 3
//! migrations outstanding (`status`); 4 nothing done (`cancel` found no
//! pending task, `retry` found nothing to retry or the key held).

mod keys;
mod output;
mod schema_cmd;

use clap::{ArgGroup, Parser, Subcommand};
use keys::{cancel, history, retry_key};
use output::{cell, relative, time_json, time_text, Table};
use schema_cmd::{migrate, print_migration, status};
use serde_json::{json, Value};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use timerpool_pg::admin::{self, Retry};
use timerpool_pg::{postgres, Queue};

/// The server the tests and examples use.
const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Exit status of an error.
const EXIT_ERROR: u8 = 1;
/// Exit status of `status` when migrations are outstanding.
const EXIT_OUTSTANDING: u8 = 3;
/// Exit status when a command found nothing to do.
const EXIT_NOTHING_DONE: u8 = 4;

/// Operate the durable keyed timers of a PostgreSQL schema.
#[derive(Debug, Parser)]
#[command(name = "timerpool-pg", version)]
#[command(after_help = "Exit status: 0 done, 1 error, 2 bad command line, \
    3 migrations outstanding (status), 4 nothing done (cancel, retry).")]
struct Cli {
    /// The PostgreSQL connection string (URL or key=value form).
    #[arg(long, global = true, env = "TIMERPOOL_PG_URL", default_value = DEFAULT_URL,
          hide_env_values = true)]
    url: String,
    /// The schema holding the queues' tables.
    #[arg(long, global = true, default_value = admin::DEFAULT_SCHEMA)]
    schema: String,
    /// Print JSON for scripts instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install the schema or apply its outstanding migrations.
    Migrate {
        /// Print the SQL the migration would run, and change nothing.
        #[arg(long)]
        print: bool,
    },
    /// Show the schema's migrations; exit 3 if some are outstanding.
    #[command(visible_alias = "validate")]
    Status,
    /// List the queues with their counts and next due time.
    Queues {
        /// Only this queue.
        queue: Option<String>,
    },
    /// Show every recorded task of a key, oldest first.
    History {
        /// The queue.
        queue: String,
        /// The key.
        key: String,
    },
    /// Cancel the pending task of a key; exit 4 if it has none.
    Cancel {
        /// The queue.
        queue: String,
        /// The key.
        key: String,
    },
    /// Schedule a failed, abandoned or expired task again, as it was (exit
    /// 4 if the task is not one of those, or a pending task holds the key).
    ///
    /// The new task has the failed one's key, handler, payload and attempt
    /// bound, and goes through the schedule upsert. --payload,
    /// --payload-file, --no-payload and --max-attempts override the stored
    /// ones. An outcome recorded before schema version 4 keeps neither:
    /// then the payload is empty and the bound the default, and the output
    /// says so.
    #[command(group(ArgGroup::new("body")
        .args(["payload", "payload_file", "no_payload"])))]
    Retry {
        /// The queue.
        queue: String,
        /// The key.
        key: String,
        /// Retry this task id of the key rather than its latest outcome.
        #[arg(long)]
        id: Option<i64>,
        /// Replace the pending task that holds the key (else: exit 4).
        #[arg(long)]
        replace: bool,
        /// The new task's payload, as text, instead of the failed task's.
        #[arg(long)]
        payload: Option<String>,
        /// The new task's payload, read from this file ("-": standard
        /// input), instead of the failed task's.
        #[arg(long, value_name = "PATH")]
        payload_file: Option<std::path::PathBuf>,
        /// The new task has an empty payload, whatever the failed task's.
        #[arg(long)]
        no_payload: bool,
        /// The new task's attempt bound instead of the failed task's
        /// (which an outcome recorded before schema version 4 does not
        /// keep: then the default bound).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i32::MAX as i64))]
        max_attempts: Option<u32>,
        /// Due this long from now (for example 30s, 5m, 1h).
        #[arg(long, value_parser = duration, default_value = "0s")]
        after: Duration,
    },
    /// Delete outcome rows older than a duration; pending and running tasks
    /// stay.
    Purge {
        /// Age of the oldest outcome kept (for example 7d, 12h, 30m).
        #[arg(long, value_parser = duration)]
        older_than: Duration,
        /// Only this queue (default: every queue of the schema).
        queue: Option<String>,
    },
}

/// Parses a duration such as `7d`, `1h 30m` or `250ms`.
fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 30s, 15m, 12h, 7d, 1h 30m)"))
}

/// A failure: the message, and the exit status.
struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    fn error(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: EXIT_ERROR,
        }
    }
}

impl From<timerpool_pg::Error> for Failure {
    fn from(e: timerpool_pg::Error) -> Failure {
        Failure::error(describe_error(&e))
    }
}

impl From<postgres::Error> for Failure {
    fn from(e: postgres::Error) -> Failure {
        Failure::error(describe_pg(&e))
    }
}

/// The crate's error with the server's message in full.
fn describe_error(e: &timerpool_pg::Error) -> String {
    match e {
        timerpool_pg::Error::Db(pg) => format!("database error: {}", describe_pg(pg)),
        other => other.to_string(),
    }
}

/// The server's message (and detail) if there is one, else the driver's.
fn describe_pg(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{}: {}", db.severity(), db.message());
            if let Some(detail) = db.detail() {
                s.push_str(&format!(" ({detail})"));
            }
            s
        }
        None => {
            let mut s = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                s.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            s
        }
    }
}

/// What a command printed, and its exit status.
struct Done {
    out: String,
    code: u8,
}

impl Done {
    fn ok(out: String) -> Done {
        Done { out, code: 0 }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = run(&cli);
    let mut stdout = std::io::stdout().lock();
    match result {
        Ok(done) => {
            // A closed pipe (`| head`) is not an error of ours.
            let _ = stdout.write_all(done.out.as_bytes());
            let _ = stdout.flush();
            ExitCode::from(done.code)
        }
        Err(f) => {
            // JSON callers get the refusal on standard output too.
            if cli.json {
                let body = json!({ "error": f.message, "exit": f.code });
                let _ = writeln!(stdout, "{body}");
            }
            eprintln!("timerpool-pg: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// Connects and runs the command.
fn run(cli: &Cli) -> Result<Done, Failure> {
    let mut client = connect(&cli.url)?;
    let schema = cli.schema.as_str();
    match &cli.command {
        Command::Migrate { print: false } => migrate(&mut client, schema, cli.json),
        Command::Migrate { print: true } => print_migration(&mut client, schema, cli.json),
        Command::Status => status(&mut client, schema, cli.json),
        Command::Queues { queue } => queues(&mut client, schema, queue.as_deref(), cli.json),
        Command::History { queue, key } => history(&mut client, schema, queue, key, cli.json),
        Command::Cancel { queue, key } => cancel(&mut client, schema, queue, key, cli.json),
        Command::Retry {
            queue,
            key,
            id,
            replace,
            payload,
            payload_file,
            no_payload,
            max_attempts,
            after,
        } => {
            let body = match (payload, payload_file, no_payload) {
                (Some(text), _, _) => Some(text.clone().into_bytes()),
                (None, Some(path), _) => Some(read_payload(path)?),
                (None, None, true) => Some(Vec::new()),
                (None, None, false) => None,
            };
            let mut retry = Retry::new().replace(*replace).after(*after);
            if let Some(body) = body {
                retry = retry.payload(body);
            }
            if let Some(n) = max_attempts {
                retry = retry.max_attempts(*n);
            }
            if let Some(id) = id {
                retry = retry.id(*id);
            }
            retry_key(&mut client, schema, queue, key, (&retry, *id), cli.json)
        }
        Command::Purge { older_than, queue } => {
            purge(&mut client, schema, queue.as_deref(), *older_than, cli.json)
        }
    }
}

/// Reads a payload file, or standard input for `-`.
fn read_payload(path: &std::path::Path) -> Result<Vec<u8>, Failure> {
    let read = if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map(|_| buf)
    } else {
        std::fs::read(path)
    };
    read.map_err(|e| Failure::error(format!("cannot read {}: {e}", path.display())))
}

/// Opens one connection, with a connect timeout unless the URL sets one.
fn connect(url: &str) -> Result<postgres::Client, Failure> {
    let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| {
        Failure::error(format!(
            "invalid connection string (--url or TIMERPOOL_PG_URL): {}",
            describe_pg(&e)
        ))
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    config.application_name("timerpool-pg");
    config.connect(postgres::NoTls).map_err(|e| {
        Failure::error(format!(
            "cannot connect to PostgreSQL at {}: {}",
            where_(&config),
            describe_pg(&e)
        ))
    })
}

/// The server a configuration names, without its password.
fn where_(config: &postgres::Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
        .map(|(h, port)| match h {
            postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
            postgres::config::Host::Unix(path) => format!("{}:{port}", path.display()),
        })
        .collect();
    format!(
        "{}@{}/{}",
        config.get_user().unwrap_or("?"),
        hosts.join(","),
        config.get_dbname().unwrap_or("?")
    )
}

/// Fails unless the schema is installed (every command but `migrate` and
/// `status` reads its tables).
fn require_installed(client: &mut postgres::Client, schema: &str) -> Result<(), Failure> {
    let status = admin::migration_status(client, schema)?;
    if status.installed && status.applied.iter().any(|a| a.version == 1) {
        Ok(())
    } else {
        Err(Failure::error(format!(
            "schema {schema} holds no timerpool tables: run `timerpool-pg --schema {schema} migrate`"
        )))
    }
}

/// Fails unless `queue` has a task or an outcome.
fn require_queue(
    client: &mut postgres::Client,
    schema: &str,
    queue: &str,
) -> Result<Queue, Failure> {
    require_installed(client, schema)?;
    let q = Queue::new(schema, queue)?;
    if !admin::queue_exists(client, schema, queue)? {
        return Err(Failure::error(format!(
            "schema {schema} has no queue {queue:?} (no task or outcome; `timerpool-pg queues` lists them)"
        )));
    }
    Ok(q)
}

fn queues(
    client: &mut postgres::Client,
    schema: &str,
    only: Option<&str>,
    json: bool,
) -> Result<Done, Failure> {
    require_installed(client, schema)?;
    let (mut all, now) = admin::queue_counts_at(client, schema)?;
    if let Some(name) = only {
        all.retain(|q| q.queue == name);
        if all.is_empty() {
            return Err(Failure::error(format!(
                "schema {schema} has no queue {name:?} (no task or outcome)"
            )));
        }
    }
    if json {
        let list: Vec<Value> = all
            .iter()
            .map(|q| {
                json!({
                    "queue": q.queue,
                    "pending": q.pending,
                    "running": q.running,
                    "retrying": q.retrying,
                    "completed": q.completed,
                    "failed": q.failed,
                    "abandoned": q.abandoned,
                    "expired": q.expired,
                    "cancelled": q.cancelled,
                    "replaced": q.replaced,
                    "next_due": time_json(q.next_due),
                })
            })
            .collect();
        return Ok(Done::ok(Value::Array(list).to_string() + "\n"));
    }
    if all.is_empty() {
        return Ok(Done::ok(format!("schema {schema} has no queues yet\n")));
    }
    let mut table = Table::new(&[
        "QUEUE",
        "PENDING>",
        "RUNNING>",
        "RETRYING>",
        "FAILED>",
        "ABANDONED>",
        "EXPIRED>",
        "COMPLETED>",
        "NEXT DUE",
    ]);
    for q in &all {
        let next = match q.next_due {
            Some(t) => format!("{} ({})", time_text(Some(t)), relative(t, now)),
            None => "-".to_string(),
        };
        table.row(vec![
            cell(&q.queue, 40),
            q.pending.to_string(),
            q.running.to_string(),
            q.retrying.to_string(),
            q.failed.to_string(),
            q.abandoned.to_string(),
            q.expired.to_string(),
            q.completed.to_string(),
            next,
        ]);
    }
    Ok(Done::ok(table.render()))
}

fn purge(
    client: &mut postgres::Client,
    schema: &str,
    queue: Option<&str>,
    older_than: Duration,
    json: bool,
) -> Result<Done, Failure> {
    match queue {
        Some(name) => {
            require_queue(client, schema, name)?;
        }
        None => require_installed(client, schema)?,
    }
    let deleted = admin::purge(client, schema, queue, older_than)?;
    let out = if json {
        json!({
            "schema": schema,
            "queue": queue,
            "older_than_secs": older_than.as_secs_f64(),
            "deleted": deleted,
        })
        .to_string()
            + "\n"
    } else {
        format!(
            "deleted {deleted} outcome row{} older than {} from {}\n",
            if deleted == 1 { "" } else { "s" },
            humantime::format_duration(older_than),
            match queue {
                Some(q) => format!("queue {q:?}"),
                None => format!("every queue of schema {schema}"),
            }
        )
    };
    Ok(Done::ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_parse_and_refuse_clearly() {
        assert_eq!(duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(duration("1h 30m"), Ok(Duration::from_secs(5_400)));
        assert!(duration("7x").unwrap_err().contains("examples"));
        assert!(duration("").is_err());
    }

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(&["NAME", "N>"]);
        t.row(vec!["a".into(), "10".into()]);
        t.row(vec!["long".into(), "2".into()]);
        assert_eq!(t.render(), "NAME   N\na     10\nlong   2\n");
    }

    #[test]
    fn cells_are_one_line_and_bounded() {
        assert_eq!(cell("a\nb", 10), "a b");
        assert_eq!(cell("abcdefghij", 6), "abc...");
    }

    #[test]
    fn the_server_is_named_without_its_password() {
        let c: postgres::Config = "postgres://u:secret@db.example:6543/app".parse().unwrap();
        assert_eq!(where_(&c), "u@db.example:6543/app");
    }
}

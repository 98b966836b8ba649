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

mod output;

use clap::{ArgGroup, Parser, Subcommand};
use output::{cell, record_json, relative, time_json, time_text, Table};
use serde_json::{json, Value};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use timerpool_pg::admin::{self, MigrationStatus, Retried, Retry, Source};
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

fn migrate(client: &mut postgres::Client, schema: &str, json: bool) -> Result<Done, Failure> {
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

fn print_migration(
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

fn status(client: &mut postgres::Client, schema: &str, json: bool) -> Result<Done, Failure> {
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

fn history(
    client: &mut postgres::Client,
    schema: &str,
    queue: &str,
    key: &str,
    json: bool,
) -> Result<Done, Failure> {
    let q = require_queue(client, schema, queue)?;
    let records = q.history(client, key)?;
    if records.is_empty() {
        return Err(Failure::error(format!(
            "queue {queue:?} has no record of key {key:?}"
        )));
    }
    if json {
        let list: Vec<Value> = records.iter().map(record_json).collect();
        return Ok(Done::ok(Value::Array(list).to_string() + "\n"));
    }
    let mut table = Table::new(&[
        "ID>",
        "STATE",
        "HANDLER",
        "ATTEMPTS>",
        "DUE",
        "FINISHED",
        "OWNER",
        "ERROR",
    ]);
    for r in &records {
        table.row(vec![
            r.id.to_string(),
            r.state.as_str().to_string(),
            cell(&r.handler, 32),
            r.attempts.to_string(),
            time_text(Some(r.due)),
            time_text(r.finished),
            r.owner.as_deref().map_or("-".into(), |o| cell(o, 24)),
            r.error.as_deref().map_or("-".into(), |e| cell(e, 60)),
        ]);
    }
    Ok(Done::ok(table.render()))
}

fn cancel(
    client: &mut postgres::Client,
    schema: &str,
    queue: &str,
    key: &str,
    json: bool,
) -> Result<Done, Failure> {
    let q = require_queue(client, schema, queue)?;
    let cancelled = q.cancel(client, key)?;
    if cancelled {
        let out = if json {
            json!({ "queue": queue, "key": key, "cancelled": true }).to_string() + "\n"
        } else {
            format!("cancelled the pending task of key {key:?} in queue {queue:?}\n")
        };
        return Ok(Done::ok(out));
    }
    let latest = q.history(client, key)?.pop();
    let Some(latest) = latest else {
        return Err(Failure::error(format!(
            "queue {queue:?} has no record of key {key:?}"
        )));
    };
    let out = if json {
        json!({ "queue": queue, "key": key, "cancelled": false, "latest": record_json(&latest) })
            .to_string()
            + "\n"
    } else {
        format!(
            "key {key:?} in queue {queue:?} has no pending task: nothing cancelled \
             (its latest task, {}, is {})\n",
            latest.id,
            latest.state.as_str()
        )
    };
    Ok(Done {
        out,
        code: EXIT_NOTHING_DONE,
    })
}

fn retry_key(
    client: &mut postgres::Client,
    schema: &str,
    queue: &str,
    key: &str,
    (retry, id): (&Retry, Option<i64>),
    json: bool,
) -> Result<Done, Failure> {
    let q = require_queue(client, schema, queue)?;
    let done = retry.run(client, &q, key)?;
    let (code, text, body) = match &done {
        Retried::Scheduled {
            from,
            scheduled,
            payload,
            payload_from,
            max_attempts,
            max_attempts_from,
        } => (
            0,
            format!(
                "retried task {} ({}) of key {key:?}: new task {} due {}{}\n{}",
                from.id,
                from.state.as_str(),
                scheduled.id,
                time_text(Some(scheduled.due)),
                if scheduled.replaced {
                    ", replacing the key's pending task"
                } else {
                    ""
                },
                retried_with(
                    from.id,
                    payload.len(),
                    *payload_from,
                    *max_attempts,
                    *max_attempts_from
                ),
            ),
            json!({
                "retried": true,
                "from": record_json(from),
                "scheduled": {
                    "id": scheduled.id,
                    "due": time_json(Some(scheduled.due)),
                    "replaced": scheduled.replaced,
                    "payload_bytes": payload.len(),
                    "payload_source": source_name(*payload_from),
                    "max_attempts": max_attempts,
                    "max_attempts_source": source_name(*max_attempts_from),
                },
            }),
        ),
        Retried::KeyHeld { from, pending } => (
            EXIT_NOTHING_DONE,
            format!(
                "not retried: pending task {} (due {}) holds key {key:?}; \
                 --replace replaces it with the retry of task {}\n",
                pending.id,
                time_text(Some(pending.due)),
                from.id
            ),
            json!({
                "retried": false,
                "reason": "key_held",
                "from": record_json(from),
                "pending": record_json(pending),
            }),
        ),
        Retried::NotRetryable { latest } => (
            EXIT_NOTHING_DONE,
            format!(
                "not retried: task {} of key {key:?} is {}, and only failed, abandoned or \
                 expired tasks are retried\n",
                latest.id,
                latest.state.as_str()
            ),
            json!({
                "retried": false,
                "reason": "not_retryable",
                "from": record_json(latest),
            }),
        ),
        Retried::NotFound => {
            return Err(Failure::error(not_found(queue, key, id)));
        }
        Retried::Contended => {
            return Err(Failure::error(format!(
                "not retried: pending tasks of key {key:?} kept appearing meanwhile; try again"
            )));
        }
    };
    let out = if json {
        let mut body = body;
        body["queue"] = json!(queue);
        body["key"] = json!(key);
        body.to_string() + "\n"
    } else {
        text
    };
    Ok(Done { out, code })
}

/// The name of a retry's source in `--json`.
fn source_name(source: Source) -> &'static str {
    match source {
        Source::Stored => "stored",
        Source::Given => "given",
        Source::Default => "default",
    }
}

/// The lines saying what the retried task carries and where it came from,
/// and, when the failed task's outcome row kept nothing, that the defaults
/// stood in.
fn retried_with(
    from: i64,
    bytes: usize,
    payload: Source,
    max_attempts: u32,
    bound: Source,
) -> String {
    let whose = |s: Source| match s {
        Source::Stored => format!("task {from}'s"),
        Source::Given => "given".to_string(),
        Source::Default => "default".to_string(),
    };
    let mut out = format!(
        "  payload: {bytes} byte{} ({}); attempt bound: {max_attempts} ({})\n",
        if bytes == 1 { "" } else { "s" },
        whose(payload),
        whose(bound),
    );
    let mut defaults = Vec::new();
    let mut flags = Vec::new();
    if payload == Source::Default {
        defaults.push("an empty payload");
        flags.push("--payload (or --payload-file)");
    }
    if bound == Source::Default {
        defaults.push("the default attempt bound");
        flags.push("--max-attempts");
    }
    if !defaults.is_empty() {
        out.push_str(&format!(
            "  note: task {from}'s outcome was recorded without its payload and attempt bound \
             (before schema version 4), so the new task has {}; give {} to set {}\n",
            defaults.join(" and "),
            flags.join(" and "),
            if defaults.len() == 1 { "it" } else { "them" },
        ));
    }
    out
}

fn not_found(queue: &str, key: &str, id: Option<i64>) -> String {
    match id {
        Some(id) => format!("key {key:?} in queue {queue:?} has no finished task {id}"),
        None => format!("key {key:?} in queue {queue:?} has no finished task to retry"),
    }
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

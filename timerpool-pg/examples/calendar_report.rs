//! A durable report at 09:00 on weekdays in a named zone, run once per
//! weekday however many copies of this program run.
//!
//! ```text
//! cargo run -p timerpool-pg --example calendar_report [-- --zone America/New_York] [--run]
//! ```
//!
//! Every copy registers the schedule at start-up (idempotent: the same
//! definition changes nothing) and prints the schedules with their next
//! tick; without `--run` it then exits. With `--run` it also runs a node
//! whose handler writes the report (the node also tops the schedule up at
//! each safety re-check, should a tick be cancelled or lost), until its
//! standard input closes (Ctrl-D). The database is
//! `TIMERPOOL_PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`),
//! schema `timerpool_example`.

use std::io::Read;
use std::time::{Duration, SystemTime};
use timerpool_pg::{parse_tick_key, tick_handler, Backfill, CalendarSchedule, Node, Queue};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut zone = "Europe/Berlin".to_string();
    let mut run = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--run" => run = true,
            "--zone" => zone = args.next().ok_or("--zone needs an IANA zone name")?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let config: postgres::Config = std::env::var("TIMERPOOL_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
        .parse()?;
    let reports = Queue::new("timerpool_example", "reports")?;
    let mut client = config.connect(postgres::NoTls)?;
    reports.install(&mut client)?;

    // The node first, so that a tick due now finds a handler.
    let node = if run {
        let handler = tick_handler(config.clone(), reports.clone(), |job| {
            let (name, at) = parse_tick_key(job.key()).ok_or("not a tick")?;
            // A real report would be built and mailed here; a re-run after
            // a crash (attempt > 1) must not mail it twice.
            println!(
                "{name}: the report of {} s after the epoch (attempt {})",
                at.duration_since(SystemTime::UNIX_EPOCH)?.as_secs(),
                job.attempt()
            );
            Ok(())
        });
        Some(
            Node::builder(config.clone(), "reports")
                .schema("timerpool_example")
                .workers(1)
                .handler("daily-report", handler)
                .start()?,
        )
    } else {
        None
    };

    // At 09:00 local time on weekdays: across daylight saving the report
    // stays at 09:00 local. After an outage, one catch-up report at most.
    let daily = CalendarSchedule::new("daily-report", "0 9 * * MON-FRI", &zone, "daily-report")
        .backfill(Backfill::Last);
    let r = reports.register_schedule(&mut client, &daily)?;
    if r.changed {
        println!("the schedule changed: its pending tick was replaced");
    }
    for s in reports.schedules(&mut client)? {
        let next = s.next_tick.map(|t| {
            let left = t
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            format!(
                "in {} h {} min",
                left.as_secs() / 3600,
                left.as_secs() / 60 % 60
            )
        });
        println!(
            "{}: `{}` in {}, next tick {}",
            s.name,
            s.expression,
            s.zone,
            next.as_deref().unwrap_or("none")
        );
    }

    if let Some(node) = node {
        println!("running; close standard input (Ctrl-D) to stop");
        let mut sink = Vec::new();
        std::io::stdin().read_to_end(&mut sink)?;
        node.shutdown();
    }
    Ok(())
}

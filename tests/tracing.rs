//! Tests for the `tracing` feature: a span per run carrying the key, and
//! events for panics, expirations, removals, refusals and shutdown, seen by
//! a global subscriber (the pool's threads do not see a thread-local one).
#![cfg(feature = "tracing")]

mod common;
use common::*;

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Duration;
use timerpool::{Error, ManualClock, Repeat, TimerPool};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Every span and event as one line: its name or message, then its fields.
static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Fields as `name=value`, space-separated.
struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

/// A subscriber that writes every span and event to [`LINES`].
struct Capture(AtomicU64);

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut line = Line(format!("span {}", span.metadata().name()));
        span.record(&mut line);
        LINES.lock().unwrap().push(line.0);
        Id::from_u64(self.0.fetch_add(1, SeqCst) + 1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(format!("{}", event.metadata().level()));
        event.record(&mut line);
        LINES.lock().unwrap().push(line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn lines_with(needle: &str) -> Vec<String> {
    let all = LINES.lock().unwrap();
    all.iter().filter(|l| l.contains(needle)).cloned().collect()
}

#[test]
fn runs_panics_expirations_removals_refusals_and_shutdown_are_traced() {
    let _ = tracing::subscriber::set_global_default(Capture(AtomicU64::new(0)));
    let clock = ManualClock::new();
    let pool = TimerPool::<&str>::builder()
        .workers(1)
        .clock(clock.clone())
        .quiet_panics(true)
        .expire_after(Duration::from_secs(5))
        .debug_keys(true)
        .build()
        .unwrap();
    pool.schedule_detached("boom", Duration::from_secs(1), || panic!("kaput"))
        .unwrap();
    pool.schedule_detached("stale", Duration::from_secs(2), || ())
        .unwrap();
    pool.schedule_detached("gone", Duration::from_secs(60), || ())
        .unwrap();
    assert!(pool.cancel(&"gone"));
    clock.advance(Duration::from_secs(1));
    pool.settle(BOUND).unwrap();
    clock.advance(Duration::from_secs(10));
    pool.settle(BOUND).unwrap();
    pool.schedule_detached("late", Duration::from_secs(60), || ())
        .unwrap();
    assert_eq!(pool.shutdown_now(), vec!["late"]);
    assert_eq!(
        pool.schedule_detached("refused", Duration::ZERO, || ()),
        Err(Error::ShutDown)
    );

    // The spans of this pool's runs (the subscriber is global).
    let runs: Vec<_> = lines_with("span run")
        .into_iter()
        .filter(|l| !l.contains(CALENDAR_KEY))
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(runs[0].contains("key=\"boom\"") && runs[0].contains("periodic=false"));
    assert!(runs[1].contains("key=\"stale\""));
    let panicked = lines_with("task panicked");
    assert_eq!(panicked.len(), 1, "{panicked:?}");
    assert!(panicked[0].starts_with("WARN") && panicked[0].contains("panic=\"kaput\""));
    assert_eq!(lines_with("task expired").len(), 1);
    let removed = lines_with("task removed");
    assert!(removed
        .iter()
        .any(|l| l.contains("key=\"gone\"") && l.contains("why=Cancelled")));
    assert!(removed
        .iter()
        .any(|l| l.contains("key=\"late\"") && l.contains("why=Shutdown")));
    let shutdown = lines_with("removed=1");
    assert!(
        shutdown
            .iter()
            .any(|l| l.starts_with("INFO") && l.contains("how=\"now\"")),
        "{shutdown:?}"
    );
    let refused = lines_with("message=refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("tasks=1"));
}

#[test]
fn keys_are_hidden_without_debug_keys() {
    // The subscriber is global; this test reads only its own key's lines.
    let _ = tracing::subscriber::set_global_default(Capture(AtomicU64::new(0)));
    let (_clock, pool) = manual_pool::<String>(1);
    pool.schedule_detached("secret-key".to_string(), Duration::from_secs(60), || ())
        .unwrap();
    assert!(pool.cancel(&"secret-key".to_string()));
    assert!(lines_with("secret-key").is_empty());
    assert!(!lines_with("key=<keyed> why=Cancelled").is_empty());
}

/// The key of the calendar task below, as its spans show it.
const CALENDAR_KEY: &str = "key=\"hourly\"";

#[test]
fn a_calendar_tasks_rechecks_of_the_wall_clock_open_no_run_span() {
    let _ = tracing::subscriber::set_global_default(Capture(AtomicU64::new(0)));
    let clock = ManualClock::new();
    // One second past an hour on the wall clock: the next tick is an
    // hour away, and the entry wakes each minute before it to read the
    // wall clock again.
    let hour = Duration::from_secs(3600);
    clock
        .set_wall_time(std::time::SystemTime::UNIX_EPOCH + hour * 500_000 + Duration::from_secs(1));
    let pool = TimerPool::<&str>::builder()
        .workers(1)
        .clock(clock.clone())
        .debug_keys(true)
        .build()
        .unwrap();
    let repeat = Repeat::cron("0 * * * *", "UTC").unwrap();
    let h = pool
        .schedule_repeating("hourly", Duration::ZERO, repeat, || ())
        .unwrap();
    let wake = pool.next_due().unwrap();
    assert!(
        wake <= pool.now() + Duration::from_secs(60),
        "a recheck first"
    );
    pool.advance(hour).unwrap();
    assert_eq!(h.runs(), 1);
    let spans = lines_with(CALENDAR_KEY);
    assert_eq!(spans.len(), 1, "one span for the one run: {spans:?}");
    assert!(spans[0].starts_with("span run") && spans[0].contains("periodic=true"));
}

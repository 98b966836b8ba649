//! Durable calendar schedules: ticks run once each, in order, keyed per
//! instant, however many nodes (processes, one SIGKILLed) hold the
//! schedule; registration is idempotent; a changed definition replaces
//! the pending tick; the high-water mark refuses old ticks; the backfill
//! policies after every node was down.

mod pg_common;

use pg_common::*;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use timerpool::Calendar;
use timerpool_pg::{
    parse_tick_key, tick_handler, tick_key, Backfill, CalendarSchedule, Error, Node, Queue,
    MAX_BACKFILL,
};

const LONG: Duration = Duration::from_secs(30);
const EVERY_SECOND: &str = "* * * * * *";

fn queue(schema: &str) -> (postgres::Client, Queue) {
    let mut c = fresh_schema(schema);
    let q = Queue::new(schema, "q").unwrap();
    q.install(&mut c).unwrap();
    (c, q)
}

/// A node whose handler `tick` records the keys of the ticks it runs.
fn node(q: &Queue, runs: &Arc<Mutex<Vec<String>>>) -> Node {
    let runs = runs.clone();
    Node::builder(config(), q.name())
        .schema(q.schema())
        .workers(2)
        .lease(Duration::from_secs(2))
        .handler(
            "tick",
            tick_handler(config(), q.clone(), move |job| {
                runs.lock().unwrap().push(job.key().to_string());
                Ok(())
            }),
        )
        .start()
        .unwrap()
}

/// (key, outcome, attempts, due) of every finished tick of `name`, by due.
fn ticks(
    c: &mut postgres::Client,
    q: &Queue,
    name: &str,
) -> Vec<(String, String, i32, SystemTime)> {
    c.query(
        &format!(
            "SELECT key, outcome, attempts, due FROM {}.outcomes
             WHERE queue = $1 AND key LIKE $2 ORDER BY due, id",
            q.schema()
        ),
        &[&q.name(), &format!("cron:{name}:%")],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

/// (pending, running) ticks of `name`.
fn live_ticks(c: &mut postgres::Client, q: &Queue, name: &str) -> (i64, i64) {
    let r = c
        .query_one(
            &format!(
                "SELECT count(*) FILTER (WHERE state = 'pending'),
                        count(*) FILTER (WHERE state = 'running')
                 FROM {}.tasks WHERE queue = $1 AND key LIKE $2",
                q.schema()
            ),
            &[&q.name(), &format!("cron:{name}:%")],
        )
        .unwrap();
    (r.get(0), r.get(1))
}

fn db_now(c: &mut postgres::Client) -> SystemTime {
    c.query_one("SELECT clock_timestamp()", &[]).unwrap().get(0)
}

/// Every tick of `cal` from `first` to `last`, inclusive.
fn ticks_between(cal: &Calendar, first: SystemTime, last: SystemTime) -> Vec<SystemTime> {
    let mut out = vec![first];
    while let Some(t) = cal.next_after(*out.last().unwrap()).filter(|t| *t <= last) {
        out.push(t);
    }
    out
}

/// Checks that `done` holds one finished record per tick, each tick of
/// `cal` from the first to the last, keyed by its instant and due then.
fn assert_consecutive(cal: &Calendar, name: &str, done: &[(String, String, i32, SystemTime)]) {
    let keys: Vec<&str> = done.iter().map(|t| t.0.as_str()).collect();
    let unique: HashSet<&str> = keys.iter().copied().collect();
    assert_eq!(unique.len(), keys.len(), "one outcome per tick: {keys:?}");
    for (key, _, _, due) in done {
        assert_eq!(
            parse_tick_key(key),
            Some((name, *due)),
            "key names the instant"
        );
    }
    let first = done.first().unwrap().3;
    let last = done.last().unwrap().3;
    let want: Vec<String> = ticks_between(cal, first, last)
        .into_iter()
        .map(|t| tick_key(name, t))
        .collect();
    assert_eq!(
        keys, want,
        "every tick from the first to the last, in order"
    );
}

#[test]
fn ticks_run_once_each_in_order_keyed_per_instant() {
    let (mut c, q) = queue("t_cal_order");
    let runs = Arc::new(Mutex::new(Vec::new()));
    let n = node(&q, &runs);
    let s = CalendarSchedule::new("every", EVERY_SECOND, "UTC", "tick").backfill(Backfill::All(10));
    let r = q.register_schedule(&mut c, &s).unwrap();
    assert!(r.created && !r.changed);
    let first = r.next_tick.expect("a pending tick");
    let cal = Calendar::new(EVERY_SECOND, "UTC").unwrap();
    let want = 5;
    let mut most_pending = 0;
    assert!(
        wait_until(LONG, || {
            most_pending = most_pending.max(live_ticks(&mut c, &q, "every").0);
            ticks(&mut c, &q, "every").len() >= want
        }),
        "{want} ticks ran"
    );
    let listed = q.schedules(&mut c).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].expression, EVERY_SECOND);
    assert!(q.remove_schedule(&mut c, "every").unwrap());
    assert!(wait_until(LONG, || live_ticks(&mut c, &q, "every") == (0, 0)));
    n.shutdown();
    assert!(
        most_pending <= 1,
        "at most one pending tick, saw {most_pending}"
    );

    let done = ticks(&mut c, &q, "every");
    assert_eq!(
        done[0].3, first,
        "the first tick is the one registration enqueued"
    );
    // The last may have been pending at the removal.
    let (last, ran) = done.split_last().unwrap();
    assert!(
        ran.iter().all(|t| t.1 == "completed" && t.2 == 1),
        "{ran:?}"
    );
    assert!(
        ["completed", "cancelled"].contains(&last.1.as_str()),
        "{last:?}"
    );
    assert_consecutive(&cal, "every", &done);
    let runs = runs.lock().unwrap().clone();
    let completed: Vec<String> = done
        .iter()
        .filter(|t| t.1 == "completed")
        .map(|t| t.0.clone())
        .collect();
    assert_eq!(runs, completed, "each tick ran once, in order");
}

#[test]
fn the_node_alone_keeps_a_schedule_going() {
    let (mut c, q) = queue("t_cal_node_alone");
    // A handler without `tick_handler`: only the node's periodic top-up
    // enqueues ticks.
    let runs = Arc::new(Mutex::new(Vec::new()));
    let seen = runs.clone();
    let n = Node::builder(config(), q.name())
        .schema(q.schema())
        .workers(1)
        .safety_recheck(Duration::from_millis(100))
        .handler("tick", move |job| {
            seen.lock().unwrap().push(job.key().to_string());
            Ok(())
        })
        .start()
        .unwrap();
    let s = CalendarSchedule::new("kept", EVERY_SECOND, "UTC", "tick").backfill(Backfill::All(10));
    q.register_schedule(&mut c, &s).unwrap();
    let want = 3;
    assert!(wait_until(LONG, || ticks(&mut c, &q, "kept").len() >= want));
    assert!(q.remove_schedule(&mut c, "kept").unwrap());
    assert!(wait_until(LONG, || live_ticks(&mut c, &q, "kept") == (0, 0)));
    n.shutdown();
    let done = ticks(&mut c, &q, "kept");
    assert_consecutive(&Calendar::new(EVERY_SECOND, "UTC").unwrap(), "kept", &done);
    let completed = done.iter().filter(|t| t.1 == "completed").count();
    assert!(completed >= want, "{done:?}");
    assert_eq!(runs.lock().unwrap().len(), completed);
}

/// Cancels the pending tick of `name` and returns it.
fn cancel_pending(c: &mut postgres::Client, q: &Queue, name: &str) -> SystemTime {
    let pending = q.schedules(c).unwrap()[0]
        .next_tick
        .expect("a pending tick");
    assert!(q.cancel(c, &tick_key(name, pending)).unwrap());
    assert_eq!(live_ticks(c, q, name), (0, 0));
    pending
}

#[test]
fn a_node_replaces_a_cancelled_tick_at_start_and_at_its_safety_recheck() {
    let (mut c, q) = queue("t_cal_node_topup");
    // A yearly tick: none runs during the test, so only a top-up can
    // enqueue the one after a cancelled tick.
    let expr = "0 0 9 1 1 *";
    let cal = Calendar::new(expr, "UTC").unwrap();
    let s = CalendarSchedule::new("daily", expr, "UTC", "tick");
    q.register_schedule(&mut c, &s).unwrap();
    let next_of = |c: &mut postgres::Client| q.schedules(c).unwrap()[0].next_tick;
    let runs = Arc::new(Mutex::new(Vec::new()));
    let node_with = |recheck: Duration| {
        let runs = runs.clone();
        Node::builder(config(), q.name())
            .schema(q.schema())
            .workers(1)
            .safety_recheck(recheck)
            .handler(
                "tick",
                tick_handler(config(), q.clone(), move |job| {
                    runs.lock().unwrap().push(job.key().to_string());
                    Ok(())
                }),
            )
            .start()
            .unwrap()
    };

    // At start: the re-check period is far longer than the wait, so the
    // start-up top-up alone can enqueue the tick.
    let skipped = cancel_pending(&mut c, &q, "daily");
    let want = cal.next_after(skipped);
    let n = node_with(Duration::from_secs(3600));
    assert!(
        wait_until(LONG, || next_of(&mut c) == want),
        "the node enqueued the tick after the cancelled one when it started"
    );
    assert_eq!(live_ticks(&mut c, &q, "daily"), (1, 0));
    n.shutdown();

    // At a safety re-check: cancelled after the node's first re-check, so
    // after its start-up top-up found the tick pending.
    let n = node_with(Duration::from_millis(100));
    assert!(wait_until(LONG, || n.stats().safety_wakes >= 1));
    let skipped = cancel_pending(&mut c, &q, "daily");
    let want = cal.next_after(skipped);
    assert!(
        wait_until(LONG, || next_of(&mut c) == want),
        "the node enqueued the tick after the cancelled one at a re-check"
    );
    assert_eq!(live_ticks(&mut c, &q, "daily"), (1, 0));
    n.shutdown();
    assert!(runs.lock().unwrap().is_empty(), "no tick was due");
    let done = ticks(&mut c, &q, "daily");
    assert_eq!(done.len(), 2, "{done:?}");
    assert!(done.iter().all(|t| t.1 == "cancelled"), "{done:?}");
}

/// An async node has no `tick_handler`: its periodic top-up alone keeps
/// a schedule going.
#[cfg(feature = "tokio")]
#[test]
fn an_async_node_alone_keeps_a_schedule_going() {
    let (mut c, q) = queue("t_cal_async_alone");
    let runs = Arc::new(Mutex::new(Vec::new()));
    let seen = runs.clone();
    let n = timerpool_pg::AsyncNode::builder(config(), q.name())
        .schema(q.schema())
        .safety_recheck(Duration::from_millis(100))
        .handler("tick", move |job| {
            let (seen, key) = (seen.clone(), job.key().to_string());
            async move {
                seen.lock().unwrap().push(key);
                Ok(())
            }
        })
        .start()
        .unwrap();
    let s = CalendarSchedule::new("kept", EVERY_SECOND, "UTC", "tick").backfill(Backfill::All(10));
    q.register_schedule(&mut c, &s).unwrap();
    let want = 3;
    assert!(wait_until(LONG, || ticks(&mut c, &q, "kept").len() >= want));
    assert!(q.remove_schedule(&mut c, "kept").unwrap());
    assert!(wait_until(LONG, || live_ticks(&mut c, &q, "kept") == (0, 0)));
    drop(n);
    let done = ticks(&mut c, &q, "kept");
    assert_consecutive(&Calendar::new(EVERY_SECOND, "UTC").unwrap(), "kept", &done);
    let completed = done.iter().filter(|t| t.1 == "completed").count();
    assert!(completed >= want, "{done:?}");
    assert_eq!(runs.lock().unwrap().len(), completed);
}

#[test]
fn registering_again_is_idempotent() {
    let (mut c, q) = queue("t_cal_idem");
    let s = CalendarSchedule::new("report", "0 9 * * MON-FRI", "Europe/Berlin", "report");
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let (q, s) = (q.clone(), s.clone());
                scope.spawn(move || q.register_schedule(&mut client(), &s).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        results.iter().filter(|r| r.created).count(),
        1,
        "{results:?}"
    );
    assert!(results.iter().all(|r| !r.changed), "{results:?}");
    let next = results[0].next_tick.unwrap();
    assert!(results.iter().all(|r| r.next_tick == Some(next)));
    let cal = Calendar::new("0 9 * * MON-FRI", "Europe/Berlin").unwrap();
    assert_eq!(
        cal.next_after(db_now(&mut c)),
        Some(next),
        "the next 09:00 on a weekday"
    );
    // The zone's spelling does not make it another schedule.
    let again = CalendarSchedule::new("report", "0 9 * * MON-FRI", "europe/berlin", "report");
    let r = q.register_schedule(&mut c, &again).unwrap();
    assert!(!r.created && !r.changed && r.next_tick == Some(next));
    assert_eq!(live_ticks(&mut c, &q, "report"), (1, 0));
    assert!(ticks(&mut c, &q, "report").is_empty(), "nothing replaced");
    let listed = q.schedules(&mut c).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].zone.as_str(), listed[0].next_tick),
        ("Europe/Berlin", Some(next))
    );
    assert_eq!(listed[0].last_tick, Some(next));
}

#[test]
fn a_changed_definition_replaces_the_pending_tick() {
    let (mut c, q) = queue("t_cal_change");
    let nine = CalendarSchedule::new("job", "0 0 9 * * *", "UTC", "tick");
    let first = q
        .register_schedule(&mut c, &nine)
        .unwrap()
        .next_tick
        .unwrap();
    let half_past = CalendarSchedule::new("job", "0 30 9 * * *", "UTC", "tick");
    let r = q.register_schedule(&mut c, &half_past).unwrap();
    assert!(r.changed && !r.created);
    let now = db_now(&mut c);
    let want = Calendar::new("0 30 9 * * *", "UTC")
        .unwrap()
        .next_after(now);
    assert_eq!(r.next_tick, want);
    assert_eq!(live_ticks(&mut c, &q, "job"), (1, 0), "one pending tick");
    let done = ticks(&mut c, &q, "job");
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0].0.as_str(), done[0].1.as_str()),
        (tick_key("job", first).as_str(), "replaced")
    );
    let pending = q.due_of(&mut c, &tick_key("job", want.unwrap())).unwrap();
    assert_eq!(pending, want);

    // A new payload: the same instant, a new pending task carrying it.
    let paid = half_past.clone().payload(b"v2".to_vec());
    let r = q.register_schedule(&mut c, &paid).unwrap();
    assert!(r.changed && r.next_tick == want);
    let payload: Vec<u8> = c
        .query_one(
            "SELECT payload FROM t_cal_change.tasks WHERE key = $1 AND state = 'pending'",
            &[&tick_key("job", want.unwrap())],
        )
        .unwrap()
        .get(0);
    assert_eq!(payload, b"v2");
    // A new zone: another instant.
    let tokyo = CalendarSchedule::new("job", "0 30 9 * * *", "Asia/Tokyo", "tick")
        .payload(b"v2".to_vec())
        .backfill(Backfill::Last);
    assert_ne!(tokyo, paid);
    let r = q.register_schedule(&mut c, &tokyo).unwrap();
    let now = db_now(&mut c);
    assert!(r.changed);
    assert_eq!(
        r.next_tick,
        Calendar::new("0 30 9 * * *", "Asia/Tokyo")
            .unwrap()
            .next_after(now)
    );
    assert_eq!(live_ticks(&mut c, &q, "job"), (1, 0));
    assert_eq!(
        ticks(&mut c, &q, "job")
            .iter()
            .filter(|t| t.1 == "replaced")
            .count(),
        3
    );

    assert!(q.remove_schedule(&mut c, "job").unwrap());
    assert!(!q.remove_schedule(&mut c, "job").unwrap());
    assert_eq!(live_ticks(&mut c, &q, "job"), (0, 0));
    assert!(q.schedules(&mut c).unwrap().is_empty());
}

#[test]
fn the_high_water_mark_refuses_old_ticks_and_bad_input_is_refused() {
    let (mut c, q) = queue("t_cal_gate");
    let s = CalendarSchedule::new("g", EVERY_SECOND, "UTC", "tick");
    let p = q.register_schedule(&mut c, &s).unwrap().next_tick.unwrap();
    let sec = Duration::from_secs(1);
    // A tick is pending: nothing else goes in.
    assert!(!q.offer_tick(&mut c, "g", p + sec).unwrap());
    assert!(!q.offer_tick(&mut c, "g", p).unwrap());
    // The tick is gone (as if it ran): the mark still refuses it and
    // anything before it, as a slow node's insert would be.
    assert!(q.cancel(&mut c, &tick_key("g", p)).unwrap());
    assert!(!q.offer_tick(&mut c, "g", p).unwrap());
    assert!(!q.offer_tick(&mut c, "g", p - sec).unwrap());
    assert_eq!(live_ticks(&mut c, &q, "g"), (0, 0));
    assert!(q.offer_tick(&mut c, "g", p + sec).unwrap());
    assert_eq!(live_ticks(&mut c, &q, "g"), (1, 0));
    assert_eq!(q.schedules(&mut c).unwrap()[0].last_tick, Some(p + sec));
    assert!(matches!(
        q.offer_tick(&mut c, "g", p + sec * 3 / 2),
        Err(Error::InvalidConfig(_))
    ));
    assert!(!q.offer_tick(&mut c, "nobody", p).unwrap());
    // A cancelled tick is skipped: the top-up enqueues a later one.
    assert!(q.cancel(&mut c, &tick_key("g", p + sec)).unwrap());
    let t = q.top_up_schedule(&mut c, "g").unwrap().unwrap();
    assert!(t > p + sec);
    assert_eq!(q.due_of(&mut c, &tick_key("g", t)).unwrap(), Some(t));
    assert_eq!(live_ticks(&mut c, &q, "g"), (1, 0));

    let bad = |s: CalendarSchedule| q.register_schedule(&mut client(), &s).unwrap_err();
    let e = bad(CalendarSchedule::new("x", "61 * * * *", "UTC", "tick"));
    assert!(matches!(e, Error::Calendar(_)), "{e}");
    let e = bad(CalendarSchedule::new("x", "@daily", "Mars/Olympus", "tick"));
    assert!(matches!(e, Error::Calendar(_)), "{e}");
    assert!(e.to_string().contains("Mars/Olympus"), "{e}");
    let e = bad(CalendarSchedule::new("", "@daily", "UTC", "tick"));
    assert!(
        matches!(
            e,
            Error::InvalidName {
                what: "schedule",
                ..
            }
        ),
        "{e}"
    );
    let e = bad(CalendarSchedule::new("x", "@daily", "UTC", "tick")
        .backfill(Backfill::All(MAX_BACKFILL + 1)));
    assert!(matches!(e, Error::InvalidConfig(_)), "{e}");
    let e = bad(CalendarSchedule::new("x", "@daily", "UTC", "tick").max_attempts(0));
    assert!(matches!(e, Error::InvalidConfig(_)), "{e}");
    assert_eq!(
        q.schedules(&mut c).unwrap().len(),
        1,
        "nothing refused was stored"
    );
}

/// After an outage: a schedule ticking every second of one minute that is
/// over (its next tick is a year away), whose mark is just before that
/// minute and whose pending tick, the minute's first second, was enqueued
/// before every node went down. A node starts and registers the
/// schedule; `expect(missed)` is how many of the missed ticks must run.
fn backfill_case(schema: &str, policy: Backfill, expect: impl Fn(usize) -> usize) {
    let (mut c, q) = queue(schema);
    let r = c
        .query_one(
            "SELECT extract(epoch FROM m)::int8, extract(minute FROM m)::int4,
                    extract(hour FROM m)::int4, extract(day FROM m)::int4,
                    extract(month FROM m)::int4
             FROM (SELECT date_trunc('minute', (now() - interval '2 minutes') AT TIME ZONE 'UTC')
                          AS m) x",
            &[],
        )
        .unwrap();
    let start = UNIX_EPOCH + Duration::from_secs(r.get::<_, i64>(0).unsigned_abs());
    let (min, hour, day, month): (i32, i32, i32, i32) = (r.get(1), r.get(2), r.get(3), r.get(4));
    let expr = format!("* {min} {hour} {day} {month} *");
    let cal = Calendar::new(&expr, "UTC").unwrap();
    let s = CalendarSchedule::new("m", &expr, "UTC", "tick").backfill(policy);
    q.register_schedule(&mut c, &s).unwrap();
    // The outage: the mark before the minute, its first second pending.
    c.execute(&format!("DELETE FROM {schema}.tasks"), &[])
        .unwrap();
    c.execute(
        &format!("UPDATE {schema}.calendars SET last_tick = $1"),
        &[&(start - Duration::from_secs(1))],
    )
    .unwrap();
    assert!(q.offer_tick(&mut c, "m", start).unwrap());
    let now = db_now(&mut c);
    let missed = ticks_between(&cal, start, now);
    assert!(
        missed.len() > 1,
        "the minute is over: {} ticks",
        missed.len()
    );

    let runs = Arc::new(Mutex::new(Vec::new()));
    let n = node(&q, &runs);
    let r = q.register_schedule(&mut c, &s).unwrap();
    assert!(!r.created && !r.changed);
    let next_year = cal.next_after(now).unwrap();
    // Quiet: no tick running, and the pending one is next year's.
    let quiet = |c: &mut postgres::Client| {
        live_ticks(c, &q, "m") == (1, 0) && q.schedules(c).unwrap()[0].next_tick == Some(next_year)
    };
    assert!(wait_until(LONG, || quiet(&mut c)), "the backfill ends");
    n.shutdown();

    let done = ticks(&mut c, &q, "m");
    let by: BTreeMap<&str, usize> = done.iter().fold(BTreeMap::new(), |mut m, t| {
        *m.entry(t.1.as_str()).or_default() += 1;
        m
    });
    let ran: Vec<String> = done
        .iter()
        .filter(|t| t.1 == "completed")
        .map(|t| t.0.clone())
        .collect();
    let want = expect(missed.len());
    assert_eq!(ran.len(), want, "{policy:?}: {by:?}");
    // The newest `want` missed ticks, oldest first, each once.
    let newest: Vec<String> = missed[missed.len() - want..]
        .iter()
        .map(|t| tick_key("m", *t))
        .collect();
    assert_eq!(ran, newest);
    assert_eq!(*runs.lock().unwrap(), ran);
    // The stale pending tick ran only if the policy keeps it.
    let first = done.iter().find(|t| t.0 == tick_key("m", start)).unwrap();
    let kept = want == missed.len();
    assert_eq!(first.1, if kept { "completed" } else { "expired" });
    assert_eq!(done.len(), want + usize::from(!kept), "{by:?}");
    if !kept {
        // An expired tick keeps what a retry reruns it with.
        let row = c
            .query_one(
                &format!("SELECT payload, max_attempts FROM {schema}.outcomes WHERE key = $1"),
                &[&tick_key("m", start)],
            )
            .unwrap();
        let (payload, bound): (Option<Vec<u8>>, Option<i32>) = (row.get(0), row.get(1));
        assert!(
            payload.is_some() && bound.is_some(),
            "{payload:?} {bound:?}"
        );
    }
}

#[test]
fn backfill_none_runs_no_missed_tick() {
    backfill_case("t_cal_fill_none", Backfill::None, |_| 0);
}

#[test]
fn backfill_last_runs_the_newest_missed_tick_once() {
    backfill_case("t_cal_fill_last", Backfill::Last, |_| 1);
}

#[test]
fn backfill_all_runs_the_newest_n_missed_ticks() {
    backfill_case("t_cal_fill_all5", Backfill::All(5), |missed| missed.min(5));
}

#[test]
fn backfill_all_with_room_runs_every_missed_tick() {
    backfill_case("t_cal_fill_all", Backfill::All(MAX_BACKFILL), |missed| {
        missed
    });
}

/// The `pg_nodes` example, built beside this test by `cargo test`.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let bin = dir.join("examples").join("pg_nodes");
    assert!(
        bin.exists(),
        "{} is missing: run cargo build -p timerpool-pg --example pg_nodes",
        bin.display()
    );
    bin
}

/// Node processes, killed on drop if the test fails before it stops them.
struct Procs(Vec<(Child, String)>);

impl Drop for Procs {
    fn drop(&mut self) {
        for (child, _) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

const PROCS: &str = "t_cal_procs";

/// A node process whose handler takes `work_ms` per tick.
fn spawn_node(work_ms: u64) -> (Child, String) {
    let mut child = Command::new(example())
        .args(["node", "--schema", PROCS, "--queue", "q", "--workers", "2"])
        .args(["--lease-ms", "1000", "--work-ms", &work_ms.to_string()])
        .args(["--cron", EVERY_SECOND, "--calendar", "every"])
        .env("TIMERPOOL_PG_URL", url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let id = line.trim().strip_prefix("ready ").expect("ready <id>");
    (child, id.to_string())
}

#[test]
fn three_processes_run_each_tick_once_with_one_killed() {
    let (mut c, q) = queue(PROCS);
    c.batch_execute(&format!(
        "CREATE TABLE {PROCS}.runs (id bigint, attempt int, node text,
                                    at timestamptz DEFAULT clock_timestamp())"
    ))
    .unwrap();
    // The first node's ticks take long enough that it is surely still
    // running the one it is seen running when it is killed.
    let mut procs = Procs([5000, 200, 200].into_iter().map(spawn_node).collect());
    let victim = procs.0[0].1.clone();
    let before = 4;
    assert!(wait_until(LONG, || ticks(&mut c, &q, "every").len() >= before));
    // Kill the first node while it runs a tick.
    let owned = format!(
        "SELECT key FROM {PROCS}.tasks WHERE owner = $1 AND state = 'running' AND key LIKE 'cron:%' LIMIT 1"
    );
    let mut held = None;
    assert!(
        wait_until(LONG, || {
            held = c
                .query_opt(&owned, &[&victim])
                .unwrap()
                .map(|r| r.get::<_, String>(0));
            held.is_some()
        }),
        "the victim runs a tick"
    );
    procs.0[0].0.kill().unwrap();
    procs.0[0].0.wait().unwrap();
    let held = held.unwrap();
    let killed_at = db_now(&mut c);
    // Ticks go on: wait for one due well after the victim's lease.
    let later = killed_at + Duration::from_secs(4);
    assert!(wait_until(LONG, || ticks(&mut c, &q, "every")
        .iter()
        .any(|t| t.3 >= later && t.1 == "completed")));
    assert!(q.remove_schedule(&mut c, "every").unwrap());
    assert!(wait_until(LONG, || live_ticks(&mut c, &q, "every") == (0, 0)));
    for (mut child, _) in procs.0.drain(1..) {
        drop(child.stdin.take());
        let mut out = String::new();
        let _ = child.stdout.take().unwrap().read_to_string(&mut out);
        assert!(child.wait().unwrap().success(), "{out}");
    }

    let done = ticks(&mut c, &q, "every");
    let cal = Calendar::new(EVERY_SECOND, "UTC").unwrap();
    assert_consecutive(&cal, "every", &done);
    let (last, ran) = done.split_last().unwrap();
    assert!(ran.iter().all(|t| t.1 == "completed"), "{ran:?}");
    assert!(
        ["completed", "cancelled"].contains(&last.1.as_str()),
        "{last:?}"
    );
    // Runs: one per tick, except the ticks the victim had started, which
    // ran again elsewhere.
    let runs: Vec<(String, i32, String)> = c
        .query(
            &format!(
                "SELECT o.key, r.attempt, r.node FROM {PROCS}.runs r
                 JOIN {PROCS}.outcomes o USING (id) ORDER BY r.at"
            ),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let mut per_tick: BTreeMap<&str, Vec<(i32, &str)>> = BTreeMap::new();
    for (key, attempt, node) in &runs {
        per_tick.entry(key).or_default().push((*attempt, node));
    }
    for (key, rs) in &per_tick {
        if rs.len() > 1 {
            assert!(
                rs[..rs.len() - 1].iter().all(|r| r.1 == victim),
                "{key}: {rs:?}"
            );
            assert_ne!(rs.last().unwrap().1, victim);
        }
    }
    // The tick the victim held ran again elsewhere (it may have died
    // before its handler wrote the first run).
    let again = &per_tick[held.as_str()];
    assert_ne!(again.last().unwrap().1, victim, "{held}: {again:?}");
    let held_done = done.iter().find(|t| t.0 == held).unwrap();
    assert!(
        held_done.1 == "completed" && held_done.2 >= 2,
        "{held_done:?}"
    );
    let nodes: HashSet<&str> = runs.iter().map(|r| r.2.as_str()).collect();
    assert!(nodes.len() >= 2, "ticks spread over nodes: {nodes:?}");
}

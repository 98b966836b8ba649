//! Calendar tasks on a manual clock: daylight-saving vectors in five zones,
//! leap days, refusals, missed-tick policies, cancel and replace, and steps
//! of the wall clock. The daylight-saving vectors are those the next-tick
//! function is held to (`src/calendar/tests/vectors.rs`, computed
//! independently of jiff and croner), included here by path.

mod common;
use common::*;

#[path = "../src/calendar/tests/vectors.rs"]
mod vectors;
use vectors::*;

use jiff::Timestamp;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, SystemTime};
use timerpool::{
    Calendar, CalendarError, Clock, CompletionReceiver, ManualClock, MissedTicks, Next, OnPanic,
    Outcome, PeriodicHandle, Repeat, TimerPool,
};

const MIN: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The instant written `s` (RFC 3339) as a `SystemTime`.
fn at(s: &str) -> SystemTime {
    let t: Timestamp = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
    SystemTime::try_from(t).unwrap()
}

/// `t` written in RFC 3339, UTC.
fn show(t: SystemTime) -> String {
    Timestamp::try_from(t).unwrap().to_string()
}

/// A one-worker pool on a manual clock whose wall time reads `wall`.
fn pool_at(wall: &str) -> (ManualClock, TimerPool<u64>) {
    let (clock, pool) = manual_pool(1);
    clock.set_wall_time(at(wall));
    (clock, pool)
}

/// A closure that sends the wall time at each run.
fn ticker(clock: &ManualClock) -> (impl FnMut() + Send + 'static, Receiver<SystemTime>) {
    let (tx, rx) = channel();
    let c = clock.clone();
    (move || tx.send(c.wall_time()).unwrap(), rx)
}

/// Schedule under `key` a task that runs from `first` on as `repeat` says
/// and sends the wall time at each run.
fn ticking(
    pool: &TimerPool<u64>,
    clock: &ManualClock,
    key: u64,
    first: Duration,
    repeat: Repeat,
) -> (PeriodicHandle<u64>, Receiver<SystemTime>) {
    let (f, rx) = ticker(clock);
    (pool.schedule_repeating(key, first, repeat, f).unwrap(), rx)
}

/// `expr` read in UTC.
fn utc(expr: &str) -> Repeat {
    Repeat::cron(expr, "UTC").unwrap()
}

/// Every wall time sent so far.
fn drain(rx: &Receiver<SystemTime>) -> Vec<String> {
    rx.try_iter().map(show).collect()
}

/// Run `expr` in `zone` on a manual clock from `from` until `until` and
/// return the wall times of its runs.
fn runs(expr: &str, zone: &str, from: &str, until: &str) -> Vec<String> {
    let (clock, pool) = pool_at(from);
    let repeat = Repeat::calendar(Calendar::new(expr, zone).unwrap());
    let (h, rx) = ticking(&pool, &clock, 1, Duration::ZERO, repeat);
    let span = at(until).duration_since(at(from)).unwrap();
    pool.advance(span).unwrap();
    assert_eq!(h.missed(), 0, "{expr} in {zone}");
    drain(&rx)
}

/// The outcomes of every record on the completion stream so far.
fn outcomes(done: &CompletionReceiver<u64>) -> Vec<Outcome<()>> {
    done.try_iter().map(|r| r.outcome).collect()
}

/// The instants of `v` in the form [`show`] gives.
fn want(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| show(at(s))).collect()
}

/// A pool on a manual clock runs `v`'s calendar at exactly `v`'s ticks.
fn check(v: &Vector) {
    assert_eq!(
        runs(v.expr, v.zone, v.from, v.until),
        want(v.ticks),
        "{} in {}",
        v.expr,
        v.zone
    );
}

#[test]
fn new_york_spring_forward() {
    check(&NEW_YORK_SPRING_FIXED);
    check(&NEW_YORK_SPRING_INTERVAL);
    check(&NEW_YORK_SPRING_TWO_TIMES_ONE_INSTANT);
}

#[test]
fn new_york_fall_back() {
    check(&NEW_YORK_FALL_FIXED);
    check(&NEW_YORK_FALL_INTERVAL);
}

#[test]
fn berlin_both_transitions() {
    BERLIN.iter().for_each(check);
}

#[test]
fn sydney_both_transitions() {
    SYDNEY.iter().for_each(check);
}

#[test]
fn lord_howe_half_hour_shifts() {
    LORD_HOWE.iter().for_each(check);
}

#[test]
fn santiago_missing_midnight() {
    check(&SANTIAGO);
}

#[test]
fn leap_days() {
    for (expr, from, until, tick) in [
        (
            "0 12 29 2 *",
            "2028-02-28T00:00Z",
            "2028-03-01T00:00Z",
            "2028-02-29T17:00Z",
        ),
        (
            "0 0 L 2 *",
            "2028-02-28T00:00Z",
            "2028-03-01T00:00Z",
            "2028-02-29T05:00Z",
        ),
        // In a common year the last day of February is the 28th.
        (
            "0 0 L 2 *",
            "2027-02-27T00:00Z",
            "2027-03-01T00:00Z",
            "2027-02-28T05:00Z",
        ),
    ] {
        assert_eq!(
            runs(expr, "America/New_York", from, until),
            want(&[tick]),
            "{expr} from {from}"
        );
    }
    // After a leap day the 29th is four years away.
    let leap = Calendar::new("0 12 29 2 *", "America/New_York").unwrap();
    assert_eq!(
        show(leap.next_after(at("2028-03-01T00:00Z")).unwrap()),
        show(at("2032-02-29T17:00Z"))
    );
}

#[test]
fn bad_expressions_and_zones_are_clear_errors() {
    let e = Calendar::new("0 25 * * *", "Europe/Berlin").unwrap_err();
    assert!(
        matches!(&e, CalendarError::Expression { expression, .. } if expression == "0 25 * * *")
    );
    assert!(e.to_string().contains("0 25 * * *"), "{e}");
    let e = Repeat::cron("0 9 * * MON-FRI", "Europe/Atlantis").unwrap_err();
    assert!(matches!(&e, CalendarError::Zone { zone, .. } if zone == "Europe/Atlantis"));
    assert!(e.to_string().contains("Europe/Atlantis"), "{e}");
    // The error is a std error, so `?` carries it into `Box<dyn Error>`.
    let boxed: Box<dyn std::error::Error> = e.into();
    assert!(!boxed.to_string().is_empty());
}

/// A `*/15` task whose only worker is busy from 10:14 to 10:50 (the ticks
/// of 10:15, 10:30 and 10:45 pass meanwhile): the wall times of its runs
/// up to 11:05 and its missed ticks.
fn busy(policy: MissedTicks) -> (Vec<String>, u64) {
    let (clock, pool) = pool_at("2026-06-01T10:01Z");
    let repeat = utc("*/15 * * * *").missed_ticks(policy);
    let (h, rx) = ticking(&pool, &clock, 1, Duration::ZERO, repeat);
    let (started_tx, started_rx) = channel();
    let (release_tx, release_rx) = channel::<()>();
    pool.schedule(2, MIN * 13, move || {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(BOUND);
    })
    .unwrap();
    pool.advance(MIN * 12).unwrap();
    clock.advance(MIN);
    started_rx.recv_timeout(BOUND).expect("the blocker started");
    clock.advance(MIN * 36);
    assert_eq!(show(clock.wall_time()), show(at("2026-06-01T10:50Z")));
    release_tx.send(()).unwrap();
    pool.settle(BOUND).unwrap();
    pool.advance(MIN * 15).unwrap();
    (drain(&rx), h.missed())
}

#[test]
fn a_tick_missed_while_busy_follows_each_policy() {
    let (late, next) = ("2026-06-01T10:50Z", "2026-06-01T11:00Z");
    for (policy, ran, missed) in [
        (MissedTicks::Skip, &[late, next][..], 2),
        (MissedTicks::Burst, &[late, late, late, next], 0),
        // A calendar has no period to shift by: `Delay` keeps to it as
        // `Skip` does.
        (MissedTicks::Delay, &[late, next], 2),
    ] {
        assert_eq!(busy(policy), (want(ran), missed), "{policy:?}");
    }
}

#[test]
fn cancel_and_replace_a_calendar_task() {
    let (clock, pool) = pool_at("2026-06-01T08:59Z");
    let (h, rx) = ticking(&pool, &clock, 7, Duration::ZERO, utc("0 9 * * *"));
    pool.advance(MIN * 2).unwrap();
    assert_eq!(drain(&rx), want(&["2026-06-01T09:00Z"]));
    assert!(h.cancel());
    assert_eq!(h.wait_timeout(BOUND).unwrap(), Outcome::Cancelled);
    assert!(!pool.is_pending(&7));

    let (old, rx) = ticking(&pool, &clock, 7, Duration::ZERO, utc("0 10 * * *"));
    let (new, rx2) = ticking(&pool, &clock, 7, Duration::ZERO, utc("30 9 * * *"));
    assert_eq!(old.wait_timeout(BOUND).unwrap(), Outcome::Replaced);
    pool.advance(MIN * 90).unwrap();
    assert!(drain(&rx).is_empty(), "the replaced task never runs");
    assert_eq!(drain(&rx2), want(&["2026-06-01T09:30Z"]));
    assert_eq!(new.runs(), 1);
    pool.shutdown();
}

#[test]
fn a_wall_clock_stepped_back_neither_runs_early_nor_repeats_a_tick() {
    let (clock, pool) = pool_at("2026-06-01T08:30Z");
    let (h, rx) = ticking(&pool, &clock, 1, Duration::ZERO, utc("0 9 * * *"));
    // Back an hour before the tick: the monotonic deadline passes, the wall
    // clock has not reached 09:00, nothing runs.
    clock.set_wall_time(at("2026-06-01T07:30Z"));
    pool.advance(MIN * 60).unwrap();
    assert!(drain(&rx).is_empty());
    pool.advance(MIN * 31).unwrap();
    assert_eq!(drain(&rx), want(&["2026-06-01T09:00Z"]));
    // Back two hours after the tick: 09:00 comes again on the wall clock,
    // but that tick has run.
    clock.set_wall_time(at("2026-06-01T07:01Z"));
    pool.advance(MIN * 180).unwrap();
    assert!(drain(&rx).is_empty());
    pool.advance(DAY).unwrap();
    assert_eq!(drain(&rx), want(&["2026-06-02T09:00Z"]));
    assert_eq!((h.runs(), h.missed()), (2, 0));
}

/// A `0 9 * * *` task whose wall clock jumps from 08:00 on the 1st to 10:30
/// on the 4th (a resume from suspend, an NTP step): the runs within one
/// recheck and its missed ticks.
fn jump(policy: MissedTicks) -> (Vec<String>, u64) {
    let (clock, pool) = pool_at("2026-06-01T08:00Z");
    let repeat = utc("0 9 * * *").missed_ticks(policy);
    let (h, rx) = ticking(&pool, &clock, 1, Duration::ZERO, repeat);
    pool.advance(MIN * 10).unwrap();
    clock.set_wall_time(at("2026-06-04T10:30Z"));
    pool.advance(MIN).unwrap();
    (drain(&rx), h.missed())
}

#[test]
fn a_wall_clock_jump_forward_is_seen_within_a_minute_and_caught_up_by_policy() {
    let (ran, missed) = jump(MissedTicks::Skip);
    assert_eq!(ran.len(), 1, "{ran:?}");
    let first = at(&ran[0]);
    assert!(
        first >= at("2026-06-04T10:30Z") && first <= at("2026-06-04T10:31Z"),
        "{ran:?}"
    );
    assert_eq!(missed, 3, "the ticks of the 2nd, 3rd and 4th");
    let (ran, missed) = jump(MissedTicks::Burst);
    assert_eq!(
        ran.len(),
        4,
        "the 1st's tick late, then the 2nd, 3rd and 4th: {ran:?}"
    );
    assert_eq!(missed, 0);
}

#[test]
fn the_first_tick_is_the_first_at_or_after_first() {
    let (clock, pool) = pool_at("2026-06-01T08:00Z");
    // Not before 09:30: the 09:00 tick is passed over, 10:00 is the first.
    let (h, rx) = ticking(&pool, &clock, 1, MIN * 90, utc("0 * * * *"));
    pool.advance(MIN * 150).unwrap();
    assert_eq!(drain(&rx), want(&["2026-06-01T10:00Z"]));
    assert_eq!(h.missed(), 0);
}

#[test]
fn a_calendar_that_runs_out_completes() {
    let (clock, pool) = pool_at("2030-12-31T23:00Z");
    let (h, rx) = ticking(&pool, &clock, 1, Duration::ZERO, utc("0 0 0 1 1 * 2031"));
    pool.advance(MIN * 120).unwrap();
    assert_eq!(drain(&rx), want(&["2031-01-01T00:00Z"]));
    assert_eq!(h.wait_timeout(BOUND).unwrap(), Outcome::Completed(()));
}

/// Schedule under key 1 a dynamic task on `0 9 * * *` (UTC) that sends the
/// wall time at each run, asks for one extra run ten minutes after its
/// first, and keeps to its calendar after that.
fn one_extra_run(
    pool: &TimerPool<u64>,
    clock: &ManualClock,
) -> (PeriodicHandle<u64>, Receiver<SystemTime>) {
    let (mut tick, rx) = ticker(clock);
    let mut first = true;
    let f = move || {
        tick();
        match std::mem::take(&mut first) {
            true => Next::After(MIN * 10),
            false => Next::OnSchedule,
        }
    };
    let h = pool
        .schedule_dynamic(1, Duration::ZERO, utc("0 9 * * *"), f)
        .unwrap();
    (h, rx)
}

#[test]
fn a_dynamic_calendar_task_adds_a_run_and_resumes_its_calendar() {
    let (clock, pool) = pool_at("2026-06-01T08:59Z");
    let (h, rx) = one_extra_run(&pool, &clock);
    pool.advance(DAY + MIN * 60).unwrap();
    assert_eq!(
        drain(&rx),
        want(&[
            "2026-06-01T09:00Z",
            "2026-06-01T09:10Z",
            "2026-06-02T09:00Z"
        ])
    );
    assert_eq!(h.missed(), 0);
}

#[test]
fn a_panicking_calendar_run_follows_the_panic_policy() {
    let (clock, pool) = pool_at("2026-06-01T08:59Z");
    let (mut tick, rx) = ticker(&clock);
    let repeat = utc("0 9 * * *").on_panic(OnPanic::Continue);
    let h = pool
        .schedule_repeating(1, Duration::ZERO, repeat, move || {
            tick();
            panic!("report failed");
        })
        .unwrap();
    pool.advance(DAY + MIN * 60).unwrap();
    assert_eq!(
        drain(&rx),
        want(&["2026-06-01T09:00Z", "2026-06-02T09:00Z"])
    );
    assert_eq!(h.panics(), 2);
    let stop = utc("0 9 * * *");
    let h = pool
        .schedule_repeating(2, Duration::ZERO, stop, || panic!("report failed"))
        .unwrap();
    pool.advance(DAY).unwrap();
    assert_eq!(
        h.wait_timeout(BOUND).unwrap(),
        Outcome::Panicked("report failed".to_string())
    );
}

/// A pool on a manual clock whose wall time reads `wall`, expiring tasks
/// that start more than a second late, with a completion stream.
fn expiring_pool_at(wall: &str) -> (ManualClock, TimerPool<u64>) {
    let clock = ManualClock::new();
    clock.set_wall_time(at(wall));
    let pool = TimerPool::builder()
        .workers(1)
        .clock(clock.clone())
        .expire_after(Duration::from_secs(1))
        .completions(64)
        .build()
        .unwrap();
    (clock, pool)
}

#[test]
fn a_late_recheck_is_no_expired_run_but_a_late_tick_is() {
    let (clock, pool) = expiring_pool_at("2026-06-01T08:00Z");
    let done = pool.completions().unwrap();
    let (h, rx) = ticking(&pool, &clock, 1, Duration::ZERO, utc("0 9 * * *"));
    // The entry wakes at 08:01 to read the wall clock; the clock moves to
    // 08:05 in one step, so that wake starts four minutes late, far past
    // the tolerance, with nothing due on the wall clock.
    clock.advance(MIN * 5);
    pool.settle(BOUND).unwrap();
    let records = outcomes(&done);
    assert!(records.is_empty(), "a recheck reported as {records:?}");
    assert_eq!((h.runs(), h.missed()), (0, 0));
    assert_eq!(pool.stats().lateness.count, 0, "a recheck is no sample");
    assert!(drain(&rx).is_empty());
    // The tick itself starting an hour late is expired: missed, reported,
    // and the next day's tick runs.
    clock.advance(MIN * 65);
    pool.settle(BOUND).unwrap();
    assert_eq!(outcomes(&done), vec![Outcome::Expired]);
    assert_eq!((h.runs(), h.missed()), (0, 1));
    pool.advance(DAY).unwrap();
    assert_eq!(drain(&rx), want(&["2026-06-02T09:00Z"]));
    assert_eq!(outcomes(&done), vec![Outcome::Completed(())]);
    assert_eq!((h.runs(), h.missed()), (1, 1));
}

#[test]
fn due_of_a_calendar_task_is_its_tick_and_next_due_its_next_wake() {
    let (clock, pool) = pool_at("2026-06-01T08:00Z");
    let (h, rx) = one_extra_run(&pool, &clock);
    // The tick is an hour ahead; the entry wakes within a minute to read
    // the wall clock again, and that is the pool's next wake.
    assert_eq!(pool.due_of(&1), Some(pool.now() + MIN * 60));
    assert_eq!(pool.next_due(), Some(pool.now() + MIN));
    assert!(pool.is_pending(&1));
    pool.advance(MIN * 30).unwrap();
    assert_eq!(pool.due_of(&1), Some(pool.now() + MIN * 30));
    // The wall clock stepped back half an hour: the tick is an hour away
    // again, by the latest reading of both clocks.
    clock.set_wall_time(at("2026-06-01T08:00Z"));
    assert_eq!(pool.due_of(&1), Some(pool.now() + MIN * 60));
    // Stepped forward past the tick: it runs at the entry's next wake, no
    // earlier, and that is its due time.
    clock.set_wall_time(at("2026-06-01T09:30Z"));
    let wake = pool.next_due().unwrap();
    assert!(wake > pool.now() && wake <= pool.now() + MIN, "{wake:?}");
    assert_eq!(pool.due_of(&1), Some(wake));
    pool.advance(MIN).unwrap();
    assert_eq!(drain(&rx).len(), 1);
    // An extra run the closure asked for is due at its own time, before
    // the next tick.
    assert_eq!(pool.due_of(&1), Some(pool.now() + MIN * 10));
    pool.advance(MIN * 10).unwrap();
    assert_eq!(drain(&rx).len(), 1);
    // Then the calendar's next tick, tomorrow at 09:00.
    let wall = clock.wall_time();
    let ahead = at("2026-06-02T09:00Z").duration_since(wall).unwrap();
    assert_eq!(pool.due_of(&1), Some(pool.now() + ahead));
    assert_eq!((h.runs(), h.missed()), (2, 0));
}

//! croner's own zoned search as an oracle for `Calendar::next_after`, tick
//! by tick over two years in six zones, on the expressions where croner and
//! timerpool read daylight saving alike: a single value, or a wildcard,
//! step or range, in each of the time fields. They differ on lists of plain
//! values (croner runs `30 1,13 * * *` twice on fall-back night, timerpool,
//! with cronie, once), so no list is compared here; the vectors in
//! `src/calendar/tests.rs` pin those down.

use croner::Cron;
use jiff02::tz::TimeZoneDatabase;
use std::time::{Duration, SystemTime};
use timerpool::Calendar;

/// The zones of the daylight-saving vectors, and London (croner-rust#67).
const ZONES: [&str; 6] = [
    "America/New_York",
    "Europe/Berlin",
    "Europe/London",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
];

/// 2026-01-01T00:00Z and 2028-01-01T00:00Z.
const FROM: i64 = 1_767_225_600;
const UNTIL: i64 = 1_830_297_600;

/// Seconds since the epoch of `t`.
fn secs(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Compare every tick of `expr` in `zone` in `[from, until)`; the number of
/// ticks compared.
fn compare(expr: &str, zone: &str, from: i64, until: i64) -> usize {
    let ours = Calendar::new(expr, zone).unwrap();
    let cron: Cron = expr.parse().unwrap();
    let tz = TimeZoneDatabase::bundled().get(zone).unwrap();
    let start = jiff02::Timestamp::from_second(from).unwrap().to_zoned(tz);
    let mut at = SystemTime::UNIX_EPOCH + Duration::from_secs(from as u64);
    let mut n = 0;
    for theirs in cron.iter_after(start) {
        let theirs = theirs.timestamp().as_second();
        if theirs >= until {
            break;
        }
        at = ours.next_after(at).expect("a tick");
        assert_eq!(
            secs(at),
            theirs,
            "{expr} in {zone}, tick {n}: ours {}, croner's {}",
            jiff::Timestamp::from_second(secs(at)).unwrap(),
            jiff::Timestamp::from_second(theirs).unwrap(),
        );
        n += 1;
    }
    n
}

#[test]
fn fixed_times_agree_with_croner() {
    for zone in ZONES {
        for expr in [
            "0 9 * * *",
            "30 2 * * *",
            "45 1 * * *",
            "15 2 * * *",
            "@daily",
            "0 9 * * MON-FRI",
            "0 0 L 2 *",
            "0 0 1 * *",
        ] {
            assert!(compare(expr, zone, FROM, UNTIL) >= 2, "{expr} in {zone}");
        }
    }
}

#[test]
fn intervals_agree_with_croner() {
    for zone in ZONES {
        for expr in ["0 */6 * * *", "*/30 0-3 * * *"] {
            assert!(compare(expr, zone, FROM, UNTIL) > 700, "{expr} in {zone}");
        }
    }
}

/// Every quarter hour and every minute from two days before to two days
/// after each transition of the two years.
#[test]
fn short_intervals_agree_with_croner_around_every_transition() {
    const DAYS_2: i64 = 2 * 24 * 3600;
    for zone in ZONES {
        let tz = jiff::tz::TimeZone::get(zone).unwrap();
        let from = jiff::Timestamp::from_second(FROM).unwrap();
        let transitions: Vec<i64> = tz
            .following(from)
            .map(|t| t.timestamp().as_second())
            .take_while(|&t| t < UNTIL)
            .collect();
        assert!(transitions.len() >= 4, "{zone}: {transitions:?}");
        for t in transitions {
            assert!(compare("*/15 * * * *", zone, t - DAYS_2, t + DAYS_2) > 300);
            assert!(compare("* 0-4 * * *", zone, t - DAYS_2, t + DAYS_2) > 600);
        }
    }
}

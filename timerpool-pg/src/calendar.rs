//! Durable calendar schedules: a named cron expression in an IANA time
//! zone whose ticks are keyed tasks of the queue, each run once however
//! many nodes hold the schedule (`docs/durable.md`, "Calendar schedules").
//!
//! # Ground rules
//!
//! - A tick is the task `cron:<name>:<unix seconds>`, due at its instant.
//! - A tick is enqueued only by [`Queue::top_up_schedule`]'s gated insert:
//!   holding the schedule row's lock, with no live pending tick, and
//!   moving `last_tick` strictly forward to it in the same transaction.
//!   The pending tick, if any, is therefore always the one at `last_tick`.
//! - Ticks are computed here, with [`timerpool::Calendar`] (jiff's bundled
//!   time-zone data), from the database's clock; the database stores the
//!   expression and zone and never converts a time zone itself.

use crate::connect::harden;
use crate::names::{check_key, check_name, check_payload};
use crate::{Error, HandlerResult, Job, NewTask, Queue};
use parking_lot::Mutex;
use postgres::types::Type;
use postgres::{Client, GenericClient, Transaction};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use timerpool::Calendar;

mod statements;

/// The largest bound of [`Backfill::All`]: catching up computes up to this
/// many ticks per enqueued tick.
pub const MAX_BACKFILL: u32 = 1000;

/// The prefix of every tick's key.
const PREFIX: &str = "cron:";

/// What a schedule does with ticks that passed while no node ran it (every
/// node down, or its queue too busy to claim a tick before the next one
/// was due). A tick counts as missed once a later tick is due as well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backfill {
    /// Missed ticks are skipped: the next tick is the first one after now.
    None,
    /// The newest missed tick runs once, then the schedule goes on.
    Last,
    /// Every missed tick runs, oldest first, but at most the newest `n` of
    /// them (1 to [`MAX_BACKFILL`]; 0 means [`Backfill::None`]).
    All(u32),
}

impl Backfill {
    fn from_row(kind: &str, n: i32) -> Backfill {
        match kind {
            "last" => Backfill::Last,
            "all" => Backfill::All(u32::try_from(n).unwrap_or(0)),
            _ => Backfill::None,
        }
    }

    fn to_row(self) -> (&'static str, i32) {
        match self {
            Backfill::None => ("none", 0),
            Backfill::Last => ("last", 0),
            Backfill::All(n) => ("all", i32::try_from(n).unwrap_or(i32::MAX)),
        }
    }

    /// How many ticks after a tick make it missed (its expiry).
    fn window(self) -> u32 {
        match self {
            Backfill::All(n) if n > 0 => n,
            _ => 1,
        }
    }
}

/// A named calendar schedule of a queue, to register with
/// [`Queue::register_schedule`].
///
/// # Examples
///
/// ```
/// use timerpool_pg::{Backfill, CalendarSchedule};
///
/// let report = CalendarSchedule::new("daily-report", "0 9 * * MON-FRI", "Europe/Berlin", "report")
///     .payload(b"sales".to_vec())
///     .backfill(Backfill::Last);
/// assert_eq!(report.name(), "daily-report");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarSchedule {
    name: String,
    expression: String,
    zone: String,
    handler: String,
    payload: Vec<u8>,
    backfill: Backfill,
    max_attempts: u32,
}

impl CalendarSchedule {
    /// The schedule `name` (1 to 128 bytes), ticking at `expression` (5 or
    /// 6 cron fields, or a descriptor such as `@daily`) read in the IANA
    /// `zone`, each tick a task for `handler`. Empty payload, backfill
    /// [`Backfill::Last`], [`DEFAULT_MAX_ATTEMPTS`](crate::DEFAULT_MAX_ATTEMPTS)
    /// attempts per tick. Checked at registration.
    pub fn new(name: &str, expression: &str, zone: &str, handler: &str) -> CalendarSchedule {
        CalendarSchedule {
            name: name.to_string(),
            expression: expression.to_string(),
            zone: zone.to_string(),
            handler: handler.to_string(),
            payload: Vec::new(),
            backfill: Backfill::Last,
            max_attempts: crate::DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// The payload every tick carries.
    pub fn payload(mut self, payload: Vec<u8>) -> CalendarSchedule {
        self.payload = payload;
        self
    }

    /// The policy for missed ticks.
    pub fn backfill(mut self, backfill: Backfill) -> CalendarSchedule {
        self.backfill = backfill;
        self
    }

    /// The attempt bound of each tick (at-least-once delivery inside a
    /// tick: a failed or interrupted attempt runs again up to this bound).
    pub fn max_attempts(mut self, n: u32) -> CalendarSchedule {
        self.max_attempts = n;
        self
    }

    /// The schedule's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Checks every field; the calendar it ticks on.
    fn check(&self) -> Result<Calendar, Error> {
        check_name("schedule", &self.name)?;
        check_name("handler", &self.handler)?;
        check_payload(&self.payload)?;
        // The longest schedule name leaves the key well inside its limit.
        check_key(&tick_key(&self.name, UNIX_EPOCH))?;
        if self.max_attempts == 0 || i32::try_from(self.max_attempts).is_err() {
            return Err(Error::InvalidConfig(format!(
                "max_attempts must be 1..={}, got {}",
                i32::MAX,
                self.max_attempts
            )));
        }
        if let Backfill::All(n) = self.backfill {
            if n > MAX_BACKFILL {
                return Err(Error::InvalidConfig(format!(
                    "backfill bound must be 0..={MAX_BACKFILL}, got {n}"
                )));
            }
        }
        Calendar::new(&self.expression, &self.zone).map_err(Error::Calendar)
    }
}

/// A registered schedule as [`Queue::schedules`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The schedule's name.
    pub name: String,
    /// The cron expression.
    pub expression: String,
    /// The IANA zone, as the time-zone database spells it.
    pub zone: String,
    /// The handler of its ticks.
    pub handler: String,
    /// The policy for missed ticks.
    pub backfill: Backfill,
    /// The high-water mark: the newest tick ever enqueued (running, done,
    /// or pending), `None` before the first.
    pub last_tick: Option<SystemTime>,
    /// The due time of its pending tick, `None` if it has none (the
    /// calendar has no tick left, or no node has topped it up yet).
    pub next_tick: Option<SystemTime>,
}

/// What [`Queue::register_schedule`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The schedule did not exist.
    pub created: bool,
    /// It existed with another definition, which was replaced, and with it
    /// its pending tick (outcome `Replaced`).
    pub changed: bool,
    /// The due time of its pending tick after registration, `None` if the
    /// calendar has no tick left.
    pub next_tick: Option<SystemTime>,
}

/// The key of `name`'s tick at `tick`: `cron:<name>:<unix seconds>`.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let key = timerpool_pg::tick_key("report", UNIX_EPOCH + Duration::from_secs(1_772_784_000));
/// assert_eq!(key, "cron:report:1772784000");
/// assert_eq!(timerpool_pg::parse_tick_key(&key), Some(("report", UNIX_EPOCH + Duration::from_secs(1_772_784_000))));
/// ```
pub fn tick_key(name: &str, tick: SystemTime) -> String {
    format!("{PREFIX}{name}:{}", unix_secs(tick))
}

/// The schedule name and tick instant of a tick's key, `None` if `key` is
/// not one.
pub fn parse_tick_key(key: &str) -> Option<(&str, SystemTime)> {
    let (name, secs) = key.strip_prefix(PREFIX)?.rsplit_once(':')?;
    let secs: i64 = secs.parse().ok()?;
    let at = if secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(secs.unsigned_abs()))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    }?;
    (!name.is_empty()).then_some((name, at))
}

/// Whole seconds since the epoch, rounded down (ticks fall on whole
/// seconds).
fn unix_secs(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => {
            let d = e.duration();
            let s = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() > 0 {
                -s - 1
            } else {
                -s
            }
        }
    }
}

/// A schedule row, locked.
struct Row {
    expression: String,
    zone: String,
    handler: String,
    payload: Vec<u8>,
    backfill: Backfill,
    max_attempts: i32,
    last_tick: Option<SystemTime>,
    /// The database's clock when the row was locked.
    now: SystemTime,
}

impl Row {
    fn same_as(&self, s: &CalendarSchedule, cal: &Calendar) -> bool {
        self.expression == s.expression
            && self.zone == cal.zone()
            && self.handler == s.handler
            && self.payload == s.payload
            && self.backfill == s.backfill
            && i64::from(self.max_attempts) == i64::from(s.max_attempts)
    }

    fn calendar(&self) -> Result<Calendar, Error> {
        Calendar::new(&self.expression, &self.zone).map_err(Error::Calendar)
    }
}

/// The first tick to enqueue after the high-water mark `base` at the
/// database time `now`, by the backfill policy; `None` if the calendar has
/// no tick left.
fn pick(
    cal: &Calendar,
    backfill: Backfill,
    base: Option<SystemTime>,
    now: SystemTime,
) -> Option<SystemTime> {
    let Some(base) = base else {
        return cal.next_after(now);
    };
    let first = cal.next_after(base)?;
    if first > now {
        return Some(first);
    }
    let n = match backfill {
        Backfill::None | Backfill::All(0) => return cal.next_after(now),
        Backfill::Last => 1,
        Backfill::All(n) => n,
    };
    // Up to `n` missed ticks: all of them run, from the first.
    let mut t = first;
    let mut missed = 1;
    loop {
        match cal.next_after(t) {
            Some(x) if x <= now => {
                missed += 1;
                if missed > n {
                    break;
                }
                t = x;
            }
            _ => return Some(first),
        }
    }
    // More than `n`: the n-th newest, found backwards from now.
    let mut cur = prev_before(cal, now.checked_add(Duration::from_nanos(1))?, base)?;
    for _ in 1..n {
        cur = prev_before(cal, cur, base)?;
    }
    Some(cur)
}

/// The newest tick in (`floor`, `t`), searching windows that double
/// backwards from `t`.
fn prev_before(cal: &Calendar, t: SystemTime, floor: SystemTime) -> Option<SystemTime> {
    let mut w = Duration::from_secs(1);
    loop {
        let lo = t.checked_sub(w).map_or(floor, |x| x.max(floor));
        if let Some(first) = cal.next_after(lo).filter(|x| *x < t) {
            let mut best = first;
            while let Some(x) = cal.next_after(best).filter(|x| *x < t) {
                best = x;
            }
            return Some(best);
        }
        if lo <= floor {
            return None;
        }
        w = w.checked_mul(2)?;
    }
}

/// How long after its instant tick `t` is missed: until the policy's
/// window of later ticks is due (`None`: never).
fn expiry(cal: &Calendar, backfill: Backfill, t: SystemTime) -> Option<Duration> {
    let mut x = t;
    for _ in 0..backfill.window() {
        x = cal.next_after(x)?;
    }
    x.duration_since(t).ok()
}

/// The names of the calendar schedules of queue `$1` (text) in schema `s`
/// that have no live pending tick: none at their high-water mark, or only
/// one past its expiry. A node's re-check claim asks whether there is any
/// (`EXISTS`), and only then the node reads them and tops them up.
pub(crate) fn stalled(s: &str) -> String {
    format!(
        "SELECT c.name FROM {s}.calendars c
         WHERE c.queue = $1 AND NOT EXISTS (
             SELECT 1 FROM {s}.tasks t
             WHERE t.queue = c.queue AND t.state = 'pending'
               AND t.key = '{PREFIX}' || c.name || ':'
                           || floor(extract(epoch FROM c.last_tick))::int8::text
               AND (t.expires IS NULL OR t.expires >= clock_timestamp()))
         ORDER BY c.name"
    )
}

/// Wraps the handler `f` of a calendar schedule's ticks: when a tick
/// starts, before `f` runs, the next tick is enqueued
/// ([`Queue::top_up_schedule`] on `queue` over a connection of its own,
/// made from `config`). If the database fails, the attempt fails without
/// running `f` and is retried; if this node's calendar refuses the stored
/// expression or zone, `f` runs and the next tick is left to nodes that
/// can compute it. A task of the same handler whose key is not a tick's
/// runs `f` alone.
///
/// Because the next tick is enqueued when a tick starts, a slow handler
/// delays no tick; ticks of one schedule may then overlap.
///
/// # Examples
///
/// ```no_run
/// use timerpool_pg::{tick_handler, Node, Queue};
///
/// let config: postgres::Config = "postgres://postgres@127.0.0.1/test".parse()?;
/// let queue = Queue::new("timerpool", "reports")?;
/// let node = Node::builder(config.clone(), "reports")
///     .handler("report", tick_handler(config, queue, |job| {
///         println!("report for tick {}", job.key());
///         Ok(())
///     }))
///     .start()?;
/// # drop(node);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn tick_handler<F>(
    config: postgres::Config,
    queue: Queue,
    f: F,
) -> impl Fn(&Job) -> HandlerResult + Send + Sync + 'static
where
    F: Fn(&Job) -> HandlerResult + Send + Sync + 'static,
{
    let config = harden(config, "timerpool calendar");
    let conn: Mutex<Option<Client>> = Mutex::new(None);
    move |job: &Job| {
        if let Some((name, _)) = parse_tick_key(job.key()) {
            let mut slot = conn.lock();
            let mut client = match slot.take() {
                Some(c) if !c.is_closed() => c,
                _ => connect(&config)?,
            };
            match queue.top_up_schedule(&mut client, name) {
                Ok(_) => *slot = Some(client),
                // This node's calendar refuses the stored expression or
                // zone (older time-zone data): the tick, enqueued by a
                // node that could compute it, still runs.
                Err(Error::Calendar(_)) => *slot = Some(client),
                Err(e) => {
                    return Err(format!(
                        "the next tick of schedule {name:?} could not be enqueued: {e}"
                    )
                    .into())
                }
            }
        }
        f(job)
    }
}

/// A connection for the calendar's own statements, with the node's
/// statement and lock timeouts.
fn connect(config: &postgres::Config) -> Result<Client, Error> {
    let mut c = config
        .connect(postgres::NoTls)
        .map_err(Error::Unreachable)?;
    c.batch_execute("SET statement_timeout = '10s'; SET lock_timeout = '10s'")?;
    Ok(c)
}

#[cfg(test)]
mod tests;

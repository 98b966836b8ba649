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

impl Queue {
    /// Registers the calendar schedule `s` of this queue, or confirms it:
    /// idempotent, so every node may register its schedules at start-up.
    /// A schedule registered before with another definition (expression,
    /// zone, handler, payload, backfill or attempts) is replaced, and its
    /// pending tick with it (outcome `Replaced`); the new definition's
    /// first tick is the first one after now. Then it tops the schedule up
    /// as [`top_up_schedule`](Queue::top_up_schedule) does, which applies
    /// the backfill policy after an outage.
    ///
    /// Its ticks run on the queue's nodes. Wrap their handler for `s`'s
    /// handler name in [`tick_handler`], which enqueues each next tick as
    /// a tick starts; without it, the next tick waits for the nodes'
    /// periodic top-up (at each safety re-check).
    ///
    /// # Errors
    ///
    /// [`Error::Calendar`] for an expression or zone the calendar refuses,
    /// [`Error::InvalidName`], [`Error::PayloadTooLarge`] or
    /// [`Error::InvalidConfig`] for other bad fields (before anything is
    /// sent); [`Error::Db`] if a statement fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use timerpool_pg::{CalendarSchedule, Queue};
    ///
    /// let mut client = postgres::Client::connect("postgres://postgres@127.0.0.1/test", postgres::NoTls)?;
    /// let reports = Queue::new("timerpool", "reports")?;
    /// reports.install(&mut client)?;
    /// let r = reports.register_schedule(
    ///     &mut client,
    ///     &CalendarSchedule::new("daily-report", "0 9 * * MON-FRI", "Europe/Berlin", "report"),
    /// )?;
    /// println!("next report at {:?}", r.next_tick);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register_schedule<C: GenericClient>(
        &self,
        client: &mut C,
        s: &CalendarSchedule,
    ) -> Result<Registered, Error> {
        let cal = s.check()?;
        let (kind, bound) = s.backfill.to_row();
        let attempts = i32::try_from(s.max_attempts).unwrap_or(i32::MAX);
        let schema = self.schema();
        let mut tx = client.transaction()?;
        let created = tx.execute(
            &format!(
                "INSERT INTO {schema}.calendars (queue, name, expression, zone, handler, payload,
                                                 backfill, backfill_max, max_attempts)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (queue, name) DO NOTHING"
            ),
            &[
                &self.name(),
                &s.name,
                &s.expression,
                &cal.zone(),
                &s.handler,
                &s.payload,
                &kind,
                &bound,
                &attempts,
            ],
        )? == 1;
        let Some(mut row) = self.lock_schedule(&mut tx, &s.name)? else {
            // Inserted or present above, in this transaction.
            return Err(Error::InvalidConfig(format!(
                "schedule {:?} vanished while it was registered",
                s.name
            )));
        };
        let changed = !created && !row.same_as(s, &cal);
        if changed {
            let removed = match row.last_tick {
                Some(last) => self.remove_pending(&mut tx, &s.name, last, "replaced", false)?,
                None => false,
            };
            // Every tick enqueued before the removed one has run or is
            // running, so is due by now: `now` is a safe mark. Otherwise
            // the mark only moves forward.
            let mark = match row.last_tick {
                Some(last) if !removed => last.max(row.now),
                _ => row.now,
            };
            tx.execute(
                &format!(
                    "UPDATE {schema}.calendars SET expression = $3, zone = $4, handler = $5,
                         payload = $6, backfill = $7, backfill_max = $8, max_attempts = $9,
                         last_tick = $10, registered = clock_timestamp()
                     WHERE queue = $1 AND name = $2"
                ),
                &[
                    &self.name(),
                    &s.name,
                    &s.expression,
                    &cal.zone(),
                    &s.handler,
                    &s.payload,
                    &kind,
                    &bound,
                    &attempts,
                    &mark,
                ],
            )?;
            row = Row {
                expression: s.expression.clone(),
                zone: cal.zone().to_string(),
                handler: s.handler.clone(),
                payload: s.payload.clone(),
                backfill: s.backfill,
                max_attempts: attempts,
                last_tick: Some(mark),
                now: row.now,
            };
        }
        let next_tick = self.top_up_locked(&mut tx, &s.name, &row, &cal)?;
        tx.commit()?;
        Ok(Registered {
            created,
            changed,
            next_tick,
        })
    }

    /// Removes the schedule `name` and cancels its pending tick (outcome
    /// `Cancelled`); a running tick finishes. True iff it existed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a bad name, [`Error::Db`] if a statement
    /// fails.
    pub fn remove_schedule<C: GenericClient>(
        &self,
        client: &mut C,
        name: &str,
    ) -> Result<bool, Error> {
        check_name("schedule", name)?;
        let mut tx = client.transaction()?;
        let Some(row) = self.lock_schedule(&mut tx, name)? else {
            return Ok(false);
        };
        if let Some(last) = row.last_tick {
            self.remove_pending(&mut tx, name, last, "cancelled", false)?;
        }
        tx.execute(
            &format!(
                "DELETE FROM {}.calendars WHERE queue = $1 AND name = $2",
                self.schema()
            ),
            &[&self.name(), &name],
        )?;
        tx.commit()?;
        Ok(true)
    }

    /// Every calendar schedule of this queue with its high-water mark and
    /// the due time of its pending tick, by name.
    ///
    /// # Errors
    ///
    /// [`Error::Db`] if the statement fails.
    pub fn schedules<C: GenericClient>(&self, client: &mut C) -> Result<Vec<ScheduleInfo>, Error> {
        let s = self.schema();
        let rows = client.query(
            &format!(
                "SELECT c.name, c.expression, c.zone, c.handler, c.backfill, c.backfill_max,
                        c.last_tick, t.due
                 FROM {s}.calendars c
                 LEFT JOIN {s}.tasks t ON t.queue = c.queue AND t.state = 'pending'
                     AND t.key = '{PREFIX}' || c.name || ':'
                                 || floor(extract(epoch FROM c.last_tick))::int8::text
                 WHERE c.queue = $1 ORDER BY c.name"
            ),
            &[&self.name()],
        )?;
        Ok(rows
            .iter()
            .map(|r| ScheduleInfo {
                name: r.get(0),
                expression: r.get(1),
                zone: r.get(2),
                handler: r.get(3),
                backfill: Backfill::from_row(r.get(4), r.get(5)),
                last_tick: r.get(6),
                next_tick: r.get(7),
            })
            .collect())
    }

    /// Makes sure the schedule `name` has its pending tick: if it has none
    /// (or only one that is already missed by its policy, which then gets
    /// the outcome `Expired` and never runs), enqueues the next one by the
    /// backfill policy through the gated insert. Returns the pending
    /// tick's due time; `None` if the schedule does not exist or its
    /// calendar has no tick left.
    ///
    /// [`tick_handler`] calls it when a tick starts, registration when it
    /// is called, and every node of the queue ([`Node`](crate::Node) and
    /// `AsyncNode`) for each schedule without a live pending tick when it
    /// starts and at each safety re-check
    /// ([`NodeBuilder::safety_recheck`](crate::NodeBuilder::safety_recheck));
    /// whichever runs first enqueues, the others find the tick pending.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a bad name, [`Error::Calendar`] if this
    /// node's calendar refuses the stored expression or zone,
    /// [`Error::Db`] if a statement fails.
    pub fn top_up_schedule<C: GenericClient>(
        &self,
        client: &mut C,
        name: &str,
    ) -> Result<Option<SystemTime>, Error> {
        check_name("schedule", name)?;
        let mut tx = client.transaction()?;
        let Some(row) = self.lock_schedule(&mut tx, name)? else {
            return Ok(None);
        };
        let cal = row.calendar()?;
        let due = self.top_up_locked(&mut tx, name, &row, &cal)?;
        tx.commit()?;
        Ok(due)
    }

    /// Tops up the schedules of this queue that have no live pending tick
    /// (none, or one past its expiry), each in its own transaction; one
    /// that fails does not stop the others, and is tried again at the next
    /// call. A node calls it when the claim of its start or of a safety
    /// re-check reports such a schedule (`sql::claim_recheck`), so a
    /// queue whose schedules all have their tick costs it nothing.
    pub(crate) fn top_up_stalled(&self, client: &mut Client) -> Result<(), Error> {
        // One round trip: a statement prepared first would cost the server
        // a transaction of its own.
        let names: Vec<String> = client
            .query_typed(&stalled(self.schema()), &[(&self.name(), Type::TEXT)])?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for name in names {
            // A schedule this node's calendar refuses, or a statement that
            // failed, is left to the next call or to another node.
            let _ = self.top_up_schedule(client, &name);
        }
        Ok(())
    }

    /// The gated insert on its own: enqueues `name`'s tick at `tick` iff
    /// `tick` is after the schedule's high-water mark and the schedule has
    /// no pending tick, moving the mark to `tick` in the same transaction.
    /// False when refused, or when there is no such schedule. Nodes use
    /// [`top_up_schedule`](Queue::top_up_schedule), which picks the tick;
    /// this is for a tick chosen by hand (a test, a manual catch-up).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if `tick` is not an instant of the
    /// schedule's calendar, otherwise as
    /// [`top_up_schedule`](Queue::top_up_schedule).
    pub fn offer_tick<C: GenericClient>(
        &self,
        client: &mut C,
        name: &str,
        tick: SystemTime,
    ) -> Result<bool, Error> {
        check_name("schedule", name)?;
        let mut tx = client.transaction()?;
        let Some(row) = self.lock_schedule(&mut tx, name)? else {
            return Ok(false);
        };
        let cal = row.calendar()?;
        let is_tick = tick
            .checked_sub(Duration::from_secs(1))
            .and_then(|t| cal.next_after(t))
            == Some(tick);
        if !is_tick {
            return Err(Error::InvalidConfig(format!(
                "{tick:?} is not a tick of schedule {name:?} ({cal})"
            )));
        }
        if let Some(last) = row.last_tick {
            if self.pending_of(&mut tx, name, last)?.is_some() {
                return Ok(false);
            }
        }
        let done = self.gated_insert(&mut tx, name, &row, &cal, tick)?;
        tx.commit()?;
        Ok(done)
    }

    /// Locks the schedule row; `None` if there is none.
    fn lock_schedule(&self, tx: &mut Transaction<'_>, name: &str) -> Result<Option<Row>, Error> {
        let row = tx.query_opt(
            &format!(
                "SELECT expression, zone, handler, payload, backfill, backfill_max,
                        max_attempts, last_tick, clock_timestamp()
                 FROM {}.calendars WHERE queue = $1 AND name = $2 FOR UPDATE",
                self.schema()
            ),
            &[&self.name(), &name],
        )?;
        Ok(row.map(|r| Row {
            expression: r.get(0),
            zone: r.get(1),
            handler: r.get(2),
            payload: r.get(3),
            backfill: Backfill::from_row(r.get(4), r.get(5)),
            max_attempts: r.get(6),
            last_tick: r.get(7),
            now: r.get(8),
        }))
    }

    /// The pending tick of `name` at `tick`: its due time and whether its
    /// expiry has passed.
    fn pending_of(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        tick: SystemTime,
    ) -> Result<Option<(SystemTime, bool)>, Error> {
        let row = tx.query_opt(
            &format!(
                "SELECT due, coalesce(expires < clock_timestamp(), false) FROM {}.tasks
                 WHERE queue = $1 AND key = $2 AND state = 'pending'",
                self.schema()
            ),
            &[&self.name(), &tick_key(name, tick)],
        )?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Deletes the pending tick of `name` at `tick`, recording `outcome`
    /// (only if it has expired when `expired_only`); true iff it was
    /// pending. A tick a node claimed meanwhile is running and stays.
    fn remove_pending(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        tick: SystemTime,
        outcome: &str,
        expired_only: bool,
    ) -> Result<bool, Error> {
        let s = self.schema();
        let n = tx.execute(
            &format!(
                "WITH d AS (
                    DELETE FROM {s}.tasks t
                    WHERE t.queue = $1 AND t.key = $2 AND t.state = 'pending'
                      AND (NOT $4 OR t.expires < clock_timestamp())
                    RETURNING t.id, t.queue, t.key, t.handler, t.due, t.created,
                              t.payload, t.max_attempts
                )
                INSERT INTO {s}.outcomes (id, queue, key, handler, outcome, due, created,
                                          finished, attempts, payload, max_attempts)
                SELECT d.id, d.queue, d.key, d.handler, $3, d.due, d.created,
                       clock_timestamp(), 0,
                       CASE WHEN $3 = 'expired' THEN d.payload END,
                       CASE WHEN $3 = 'expired' THEN d.max_attempts END FROM d"
            ),
            &[&self.name(), &tick_key(name, tick), &outcome, &expired_only],
        )?;
        Ok(n > 0)
    }

    /// The top-up under the row's lock (see
    /// [`top_up_schedule`](Queue::top_up_schedule)).
    fn top_up_locked(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        row: &Row,
        cal: &Calendar,
    ) -> Result<Option<SystemTime>, Error> {
        if let Some(last) = row.last_tick {
            match self.pending_of(tx, name, last)? {
                Some((due, false)) => return Ok(Some(due)),
                Some((_, true)) => {
                    self.remove_pending(tx, name, last, "expired", true)?;
                }
                None => {}
            }
        }
        let Some(tick) = pick(cal, row.backfill, row.last_tick, row.now) else {
            return Ok(None);
        };
        Ok(self.gated_insert(tx, name, row, cal, tick)?.then_some(tick))
    }

    /// Enqueues `tick` iff it is after the mark, moving the mark to it in
    /// this transaction.
    fn gated_insert(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        row: &Row,
        cal: &Calendar,
        tick: SystemTime,
    ) -> Result<bool, Error> {
        if row.last_tick.is_some_and(|last| tick <= last) {
            return Ok(false);
        }
        let moved = tx.execute(
            &format!(
                "UPDATE {}.calendars SET last_tick = $3
                 WHERE queue = $1 AND name = $2 AND (last_tick IS NULL OR last_tick < $3)",
                self.schema()
            ),
            &[&self.name(), &name, &tick],
        )?;
        if moved == 0 {
            return Ok(false);
        }
        let mut task = NewTask::new(tick_key(name, tick), row.handler.clone())
            .at(tick)
            .payload(row.payload.clone())
            .max_attempts(u32::try_from(row.max_attempts).unwrap_or(1));
        if let Some(window) = expiry(cal, row.backfill, tick) {
            task = task.expire_after(window);
        }
        self.schedule(tx, &task)?;
        Ok(true)
    }
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
mod tests {
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
}

//! A task to schedule: key, handler name, payload, due time and attempt
//! bound, checked before it reaches the database.

use crate::names::{check_key, check_name, check_payload};
use crate::Error;
use std::time::{Duration, SystemTime};

/// The longest delay or expiry accepted: far inside `timestamptz`'s range.
const MAX_DELAY: Duration = Duration::from_secs(10_000 * 365 * 86_400);

/// Default bound on attempts of a task.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// When a task falls due, on the database's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// This long after the database's `clock_timestamp()` when the schedule
    /// statement runs (not when the caller's transaction commits).
    After(Duration),
    /// At this wall-clock instant, compared with the database's clock. A
    /// time in the past means "due now".
    At(SystemTime),
}

/// A task to schedule: the builder [`Queue::schedule`](crate::Queue::schedule)
/// takes.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use timerpool_pg::NewTask;
///
/// let task = NewTask::new("trip-42", "redispatch")
///     .payload(b"driver-7".to_vec())
///     .after(Duration::from_secs(15))
///     .max_attempts(3);
/// assert_eq!(task.key(), "trip-42");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    /// The key: at most one pending task per (queue, key).
    key: String,
    /// Name of the handler that runs it.
    handler: String,
    /// Bytes handed to the handler.
    payload: Vec<u8>,
    /// When it falls due.
    due: Due,
    /// How long after `due` it may still start; later it expires unrun.
    expire_after: Option<Duration>,
    /// Attempts before it ends failed or abandoned.
    max_attempts: u32,
}

impl NewTask {
    /// A task for `key` run by the handler named `handler`, due now, with an
    /// empty payload and [`DEFAULT_MAX_ATTEMPTS`] attempts.
    pub fn new(key: impl Into<String>, handler: impl Into<String>) -> NewTask {
        NewTask {
            key: key.into(),
            handler: handler.into(),
            payload: Vec::new(),
            due: Due::After(Duration::ZERO),
            expire_after: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// The bytes the handler receives (default: empty).
    pub fn payload(mut self, payload: Vec<u8>) -> NewTask {
        self.payload = payload;
        self
    }

    /// Due `delay` after the database's clock at the schedule statement.
    pub fn after(mut self, delay: Duration) -> NewTask {
        self.due = Due::After(delay);
        self
    }

    /// Due at `at` on the database's clock.
    pub fn at(mut self, at: SystemTime) -> NewTask {
        self.due = Due::At(at);
        self
    }

    /// A task claimed more than `window` after its due time is not run; its
    /// outcome is `Expired` (default: never expires).
    pub fn expire_after(mut self, window: Duration) -> NewTask {
        self.expire_after = Some(window);
        self
    }

    /// At most `n` attempts (default [`DEFAULT_MAX_ATTEMPTS`]); zero is
    /// refused when the task is scheduled.
    pub fn max_attempts(mut self, n: u32) -> NewTask {
        self.max_attempts = n;
        self
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The handler name.
    pub fn handler(&self) -> &str {
        &self.handler
    }

    /// Checks every field and converts it to the statement's parameters.
    pub(crate) fn params(&self) -> Result<Params<'_>, Error> {
        check_key(&self.key)?;
        check_name("handler", &self.handler)?;
        check_payload(&self.payload)?;
        let max_attempts = i32::try_from(self.max_attempts)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "max_attempts must be 1..={}, got {}",
                    i32::MAX,
                    self.max_attempts
                ))
            })?;
        let (due_at, delay_us) = due_params(self.due)?;
        let expire_us = self.expire_after.map(micros_ceil).transpose()?;
        Ok(Params {
            key: &self.key,
            handler: &self.handler,
            payload: &self.payload,
            due_at,
            delay_us,
            expire_us,
            max_attempts,
        })
    }
}

/// A checked task, as statement parameters.
#[derive(Debug)]
pub(crate) struct Params<'a> {
    /// The key.
    pub key: &'a str,
    /// The handler name.
    pub handler: &'a str,
    /// The payload.
    pub payload: &'a [u8],
    /// Absolute due time, or `None` for a delay.
    pub due_at: Option<SystemTime>,
    /// Delay in µs after the database's clock, or `None`.
    pub delay_us: Option<i64>,
    /// Expiry window in µs after due, or `None`.
    pub expire_us: Option<i64>,
    /// Attempt bound.
    pub max_attempts: i32,
}

/// A due time as the statements' parameters: an absolute time, or a delay
/// in µs after the database's clock.
pub(crate) fn due_params(due: Due) -> Result<(Option<SystemTime>, Option<i64>), Error> {
    Ok(match due {
        Due::At(t) => (Some(check_time(t)?), None),
        Due::After(d) => (None, Some(micros_ceil(d)?)),
    })
}

/// `d` in whole microseconds, rounded up so nothing becomes early.
pub(crate) fn micros_ceil(d: Duration) -> Result<i64, Error> {
    if d > MAX_DELAY {
        return Err(Error::DueOutOfRange);
    }
    let us = d.as_nanos().div_ceil(1000);
    i64::try_from(us).map_err(|_| Error::DueOutOfRange)
}

/// Accepts times between the epoch and [`MAX_DELAY`] after it, rounded up
/// to the next microsecond.
fn check_time(t: SystemTime) -> Result<SystemTime, Error> {
    let since = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| Error::DueOutOfRange)?;
    let us = micros_ceil(since)?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_micros(us as u64))
}

/// What a schedule did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    /// The new task's id (a replace gives the key a new task id; the old
    /// task's outcome is `Replaced`).
    pub id: i64,
    /// The key.
    pub key: String,
    /// True if a pending task of the key was replaced, false if inserted.
    pub replaced: bool,
    /// The due time the database computed.
    pub due: SystemTime,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_KEY_BYTES;

    #[test]
    fn bad_fields_are_error_values() {
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(matches!(
            NewTask::new(long, "h").params(),
            Err(Error::KeyTooLong { .. })
        ));
        assert!(NewTask::new("k", "").params().is_err());
        assert!(NewTask::new("k", "h").max_attempts(0).params().is_err());
        assert!(NewTask::new("k", "h")
            .after(Duration::MAX)
            .params()
            .is_err());
        let before_epoch = SystemTime::UNIX_EPOCH - Duration::from_secs(1);
        assert!(NewTask::new("k", "h").at(before_epoch).params().is_err());
    }

    #[test]
    fn delays_round_up_to_the_microsecond() {
        assert_eq!(micros_ceil(Duration::from_nanos(1)).unwrap(), 1);
        assert_eq!(micros_ceil(Duration::from_nanos(1000)).unwrap(), 1);
        assert_eq!(micros_ceil(Duration::from_nanos(1001)).unwrap(), 2);
    }
}

//! The error type of the durable timers: bad input, an unreachable or
//! failing database, and a node that could not start.

use std::fmt;

/// Everything [`pg`](crate) can refuse or fail with, with a message that
/// says why. Bad input never reaches the database and never panics.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A key longer than [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES).
    KeyTooLong {
        /// Length of the key given, in bytes.
        len: usize,
        /// The longest accepted key, in bytes.
        max: usize,
    },
    /// A payload larger than [`MAX_PAYLOAD_BYTES`](crate::MAX_PAYLOAD_BYTES).
    PayloadTooLarge {
        /// Size of the payload given, in bytes.
        len: usize,
        /// The largest accepted payload, in bytes.
        max: usize,
    },
    /// A name (queue, handler or key) that is empty where it may not be,
    /// too long, or holds a NUL byte, which PostgreSQL text cannot store.
    InvalidName {
        /// Which name: `"queue"`, `"handler"`, `"key"`, `"schema"` or
        /// `"schedule"` (a calendar schedule's).
        what: &'static str,
        /// Why it was refused.
        why: String,
    },
    /// A setting out of its range (zero workers, a lease shorter than its
    /// heartbeat, zero attempts, ...).
    InvalidConfig(String),
    /// A due time that PostgreSQL's `timestamptz` cannot hold.
    DueOutOfRange,
    /// A batch names the same key twice; one statement cannot both insert
    /// and replace one key.
    DuplicateKeyInBatch(String),
    /// The database could not be reached when a node started or a schema
    /// was installed.
    Unreachable(postgres::Error),
    /// The database answered with an error (through the `postgres` or
    /// `tokio-postgres` driver, which share this error type).
    Db(postgres::Error),
    /// The database answered with an error through sqlx, or sqlx could not
    /// reach it.
    #[cfg(feature = "sqlx")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
    Sqlx(sqlx::Error),
    /// The database answered something the statements rule out (a NULL
    /// where the schema has none, an unknown state): the schema was
    /// changed by something other than this crate.
    Unexpected(String),
    /// The schema in the database is newer than this version of the crate.
    SchemaTooNew {
        /// Version found in the database.
        found: i32,
        /// Newest version this crate knows.
        known: i32,
    },
    /// The operating system refused to start a node thread.
    Spawn(String),
    /// A calendar schedule's cron expression or time zone was refused
    /// (at registration, or when a stored schedule is read back).
    Calendar(timerpool::CalendarError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::KeyTooLong { len, max } => {
                write!(f, "key of {len} bytes is longer than the maximum {max}")
            }
            Error::PayloadTooLarge { len, max } => {
                write!(f, "payload of {len} bytes is larger than the maximum {max}")
            }
            Error::InvalidName { what, why } => write!(f, "invalid {what} name: {why}"),
            Error::InvalidConfig(why) => write!(f, "invalid configuration: {why}"),
            Error::DueOutOfRange => f.write_str("due time out of range for timestamptz"),
            Error::DuplicateKeyInBatch(key) => {
                write!(f, "key {key:?} appears more than once in one batch")
            }
            Error::Unreachable(e) => write!(f, "database unreachable: {e}"),
            Error::Db(e) => write!(f, "database error: {e}"),
            Error::SchemaTooNew { found, known } => write!(
                f,
                "schema version {found} is newer than the newest this crate knows ({known})"
            ),
            Error::Spawn(why) => write!(f, "could not start a node thread: {why}"),
            #[cfg(feature = "sqlx")]
            Error::Sqlx(e) => write!(f, "database error: {e}"),
            Error::Unexpected(what) => write!(f, "unexpected answer from the database: {what}"),
            Error::Calendar(e) => write!(f, "calendar schedule: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Unreachable(e) | Error::Db(e) => Some(e),
            #[cfg(feature = "sqlx")]
            Error::Sqlx(e) => Some(e),
            Error::Calendar(e) => Some(e),
            _ => None,
        }
    }
}

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        Error::Db(e)
    }
}

#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Sqlx(e)
    }
}

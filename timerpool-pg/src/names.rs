//! Limits and validation of names, keys and payloads, checked before any
//! statement is sent.

use crate::Error;

/// The longest key, in bytes (a B-tree index entry must stay well under
/// PostgreSQL's limit of about 2,700 bytes).
pub const MAX_KEY_BYTES: usize = 1024;
/// The largest payload, in bytes.
pub const MAX_PAYLOAD_BYTES: usize = 1 << 20;
/// The longest queue or handler name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// The longest schema name: a PostgreSQL identifier.
const MAX_SCHEMA_BYTES: usize = 63;

/// Checks a queue or handler name: 1 to [`MAX_NAME_BYTES`] bytes, no NUL.
pub(crate) fn check_name(what: &'static str, name: &str) -> Result<(), Error> {
    let why = if name.is_empty() {
        "it is empty".to_string()
    } else if name.len() > MAX_NAME_BYTES {
        format!("{} bytes, the maximum is {MAX_NAME_BYTES}", name.len())
    } else if name.contains('\0') {
        "it contains a NUL byte".to_string()
    } else {
        return Ok(());
    };
    Err(Error::InvalidName { what, why })
}

/// Checks a key: at most [`MAX_KEY_BYTES`] bytes and no NUL (may be empty).
pub(crate) fn check_key(key: &str) -> Result<(), Error> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::KeyTooLong {
            len: key.len(),
            max: MAX_KEY_BYTES,
        });
    }
    if key.contains('\0') {
        return Err(Error::InvalidName {
            what: "key",
            why: "it contains a NUL byte".to_string(),
        });
    }
    Ok(())
}

/// Checks a payload size.
pub(crate) fn check_payload(payload: &[u8]) -> Result<(), Error> {
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(Error::PayloadTooLarge {
            len: payload.len(),
            max: MAX_PAYLOAD_BYTES,
        });
    }
    Ok(())
}

/// Checks a schema name: a lower-case identifier (`[a-z_][a-z0-9_]*`, at
/// most 63 bytes, not starting `pg_`), so it can be written into
/// statements unquoted.
pub(crate) fn check_schema(name: &str) -> Result<(), Error> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    // PostgreSQL reserves the prefix `pg_` for system schemas.
    if first_ok && rest_ok && name.len() <= MAX_SCHEMA_BYTES && !name.starts_with("pg_") {
        return Ok(());
    }
    Err(Error::InvalidName {
        what: "schema",
        why: format!(
            "{name:?} is not a lower-case identifier of at most {MAX_SCHEMA_BYTES} bytes \
             outside the reserved prefix pg_"
        ),
    })
}

/// A short channel name for `LISTEN`, derived from the schema and queue
/// (queue names may be any text; channel names are identifiers of at most
/// 63 bytes).
pub(crate) fn channel(schema: &str, queue: &str) -> String {
    // FNV-1a: stable across processes and versions, unlike std's hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in schema.bytes().chain([0]).chain(queue.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("timerpool_{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("queue", "orders").is_ok());
        assert!(check_name("queue", "").is_err());
        assert!(check_name("queue", "a\0b").is_err());
        assert!(check_name("queue", &"x".repeat(MAX_NAME_BYTES + 1)).is_err());
        assert!(check_schema("timerpool_1").is_ok());
        assert!(check_schema("Timerpool").is_err());
        assert!(check_schema("1x").is_err());
        assert!(check_schema("a;drop").is_err());
        assert!(check_schema("pg_x").is_err());
    }

    #[test]
    fn channel_differs_per_queue_and_fits_an_identifier() {
        let a = channel("s", "q1");
        assert_ne!(a, channel("s", "q2"));
        assert_ne!(channel("s1", "q"), channel("s", "1q"));
        assert!(a.len() <= 63);
    }
}

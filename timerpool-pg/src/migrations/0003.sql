-- Version 3: calendar schedules (`src/calendar.rs`). One row per schedule
-- of a queue: the cron expression and IANA zone it is read in (the nodes
-- compute every tick; nothing here does time-zone arithmetic), the
-- handler, payload and attempt bound of its ticks, the backfill policy,
-- and the high-water mark `last_tick`: the newest tick ever enqueued. A
-- tick is enqueued only in the transaction that moves `last_tick` forward
-- to it while holding this row's lock, so a tick at or before the mark is
-- never enqueued again. Additive: older nodes ignore the table.
-- `{s}` is the schema.
CREATE TABLE IF NOT EXISTS {s}.calendars (
    queue        text NOT NULL,
    name         text NOT NULL,
    expression   text NOT NULL,
    zone         text NOT NULL,
    handler      text NOT NULL,
    payload      bytea NOT NULL,
    backfill     text NOT NULL CHECK (backfill IN ('none', 'last', 'all')),
    backfill_max integer NOT NULL CHECK (backfill_max >= 0),
    max_attempts integer NOT NULL CHECK (max_attempts > 0),
    last_tick    timestamptz,
    registered   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (queue, name)
);

-- Version 2: the client operations as functions, so that any language, and
-- psql, schedules, reschedules and cancels inside its own transaction with
-- the same statements the Rust `Queue` runs (it calls these functions).
-- Every name is schema-qualified and every function runs with
-- `search_path = pg_catalog, pg_temp`, so no object of the caller's can
-- stand in for ours. Named parameters with defaults, no overloads.
-- `{s}` is the schema.

-- The LISTEN channel of a queue: 'timerpool_' and the 64-bit FNV-1a hash
-- of the schema name, a zero byte and the queue name, in hex, the same as
-- the nodes compute (`names::channel`). The hash is kept in two 32-bit
-- halves so that no bigint operation overflows.
CREATE OR REPLACE FUNCTION {s}.channel(queue text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    bytes bytea := convert_to('{s}', 'UTF8') || '\x00'::bytea || convert_to(queue, 'UTF8');
    hi bigint := 3421674724;  -- 0xcbf29ce4
    lo bigint := 2216829733;  -- 0x84222325
    b integer;
    low bigint;
BEGIN
    FOR i IN 0 .. length(bytes) - 1 LOOP
        b := get_byte(bytes, i);
        lo := lo # b;
        -- h * 0x100000001b3 mod 2^64 = h * 0x1b3 + (h << 40)
        low := lo * 435;  -- 0x1b3
        hi := (hi * 435 + (low >> 32) + ((lo << 8) & 4294967295)) & 4294967295;
        lo := low & 4294967295;
    END LOOP;
    RETURN 'timerpool_' || lpad(to_hex(hi), 8, '0') || lpad(to_hex(lo), 8, '0');
END
$fn$;

-- Refuses a bad queue or handler name with a clear error: 1 to 128 bytes.
CREATE OR REPLACE FUNCTION {s}.check_name(what text, name text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF name IS NULL OR name = '' THEN
        RAISE EXCEPTION 'timerpool: invalid % name: it is empty', what
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF octet_length(name) > 128 THEN
        RAISE EXCEPTION 'timerpool: invalid % name: % bytes, the maximum is 128',
            what, octet_length(name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$fn$;

-- Refuses a bad key: NULL or longer than 1,024 bytes (it may be empty, as
-- in the Rust API).
CREATE OR REPLACE FUNCTION {s}.check_key(key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'timerpool: the key is NULL'
            USING ERRCODE = 'null_value_not_allowed';
    ELSIF octet_length(key) > 1024 THEN
        RAISE EXCEPTION 'timerpool: key of % bytes is longer than the maximum 1024',
            octet_length(key)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$fn$;

-- Schedules many tasks of one queue in one statement: each inserted, or
-- replacing the key's pending task atomically (the replaced task gets its
-- `replaced` outcome row in the same statement). A key whose task is
-- running gets a new pending task beside it. Element i of every array
-- belongs to task i; `payloads`, `max_attempts` and `expire_afters` may be
-- NULL (empty payload, 5 attempts, no expiry), a NULL `run_ats` or element
-- means due now.
--
-- Every call that schedules anything notifies the queue's channel with the
-- earliest new due time (µs since the epoch). Notifications are delivered
-- at commit, never after a rollback; nodes ignore one that is not before
-- the end of their current wait. Whether a sleeping node must wake
-- depends on what it saw when it last looked, which may be after this
-- statement and before the caller's commit, so no test of the queue's rows
-- here could decide it: every schedule notifies.
CREATE OR REPLACE FUNCTION {s}.schedule_many(
    queue text,
    keys text[],
    handlers text[],
    run_ats timestamptz[] DEFAULT NULL,
    payloads bytea[] DEFAULT NULL,
    max_attempts integer[] DEFAULT NULL,
    expire_afters interval[] DEFAULT NULL
)
RETURNS TABLE (id bigint, key text, inserted boolean, due timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    n integer := coalesce(cardinality(keys), 0);
    bad text;
BEGIN
    PERFORM {s}.check_name('queue', schedule_many.queue);
    IF coalesce(cardinality(handlers), 0) <> n
        OR (run_ats IS NOT NULL AND cardinality(run_ats) <> n)
        OR (payloads IS NOT NULL AND cardinality(payloads) <> n)
        OR (schedule_many.max_attempts IS NOT NULL AND cardinality(schedule_many.max_attempts) <> n)
        OR (expire_afters IS NOT NULL AND cardinality(expire_afters) <> n) THEN
        RAISE EXCEPTION 'timerpool: the arrays of a batch must have one element per key (% keys)', n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    PERFORM {s}.check_key(k) FROM unnest(keys) AS u(k);
    PERFORM {s}.check_name('handler', h) FROM unnest(handlers) AS u(h);
    SELECT k INTO bad FROM unnest(keys) AS u(k) GROUP BY k HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'timerpool: key % appears more than once in one batch', quote_literal(bad)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT octet_length(p)::text INTO bad FROM unnest(payloads) AS u(p)
        WHERE octet_length(p) > 1048576 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'timerpool: payload of % bytes is larger than the maximum 1048576', bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT m::text INTO bad FROM unnest(schedule_many.max_attempts) AS u(m)
        WHERE m IS NULL OR m < 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'timerpool: max_attempts must be at least 1, got %', coalesce(bad, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT d::text INTO bad FROM unnest(run_ats) AS u(d) WHERE NOT isfinite(d) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'timerpool: due time % is not a finite timestamp', bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT x::text INTO bad FROM unnest(expire_afters) AS u(x) WHERE x < interval '0' LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'timerpool: expire_after % is negative', bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    RETURN QUERY
    WITH r AS (
        SELECT u.k, u.h, coalesce(u.p, '\x'::bytea) AS p,
               coalesce(u.d, now()) AS d, u.x, coalesce(u.m, 5) AS m
        FROM unnest(keys, handlers,
                    coalesce(run_ats, array_fill(NULL::timestamptz, ARRAY[n])),
                    coalesce(payloads, array_fill(NULL::bytea, ARRAY[n])),
                    coalesce(schedule_many.max_attempts, array_fill(NULL::integer, ARRAY[n])),
                    coalesce(expire_afters, array_fill(NULL::interval, ARRAY[n])))
             AS u(k, h, d, p, m, x)
    ), up AS (
        INSERT INTO {s}.tasks AS t (queue, key, handler, payload, due, run_at, expires, max_attempts)
        SELECT schedule_many.queue, r.k, r.h, r.p, r.d, r.d, r.d + r.x, r.m FROM r
        ON CONFLICT (queue, key) WHERE state = 'pending' DO UPDATE SET
            id = EXCLUDED.id, handler = EXCLUDED.handler, payload = EXCLUDED.payload,
            due = EXCLUDED.due, run_at = EXCLUDED.run_at, expires = EXCLUDED.expires,
            max_attempts = EXCLUDED.max_attempts, created = EXCLUDED.created,
            prev_id = t.id, prev_handler = t.handler, prev_due = t.due,
            prev_created = t.created
        RETURNING t.id, t.key, (t.xmax = 0) AS inserted, t.due, t.prev_id, t.prev_handler,
                  t.prev_due, t.prev_created
    ), gone AS (
        INSERT INTO {s}.outcomes (id, queue, key, handler, outcome, due, created, finished, attempts)
        SELECT up.prev_id, schedule_many.queue, up.key, up.prev_handler, 'replaced', up.prev_due,
               up.prev_created, clock_timestamp(), 0
        FROM up WHERE NOT up.inserted
    )
    SELECT up.id, up.key, up.inserted, up.due FROM up;
    -- The earliest new due time is the least of the inputs' (every task
    -- gets its own `r.d`).
    PERFORM pg_notify({s}.channel(schedule_many.queue),
                      (extract(epoch FROM min(coalesce(u.d, now()))) * 1000000)::int8::text)
    FROM unnest(coalesce(run_ats, array_fill(NULL::timestamptz, ARRAY[n]))) AS u(d);
END
$fn$;

-- Schedules one task: inserts it, or replaces the key's pending task
-- atomically, as `schedule_many` does (and notifies the same way).
-- `inserted` is false for a replace. `expire_after`: a task claimed more
-- than this after its due time is not run (outcome `expired`).
CREATE OR REPLACE FUNCTION {s}.schedule(
    queue text,
    key text,
    handler text,
    run_at timestamptz DEFAULT now(),
    payload bytea DEFAULT NULL,
    max_attempts integer DEFAULT 5,
    expire_after interval DEFAULT NULL
)
RETURNS TABLE (id bigint, inserted boolean, due timestamptz)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN QUERY
    SELECT m.id, m.inserted, m.due
    FROM {s}.schedule_many(schedule.queue, ARRAY[schedule.key], ARRAY[schedule.handler],
                           ARRAY[schedule.run_at], ARRAY[schedule.payload],
                           ARRAY[schedule.max_attempts], ARRAY[schedule.expire_after]) AS m;
END
$fn$;

-- Moves the due time of the key's pending task in place (same id, no
-- `replaced` record; its expiry window moves with it). True iff a pending
-- task was moved; a running task is not touched. Notifies like a
-- schedule, so a move to an earlier time wakes the nodes at commit.
CREATE OR REPLACE FUNCTION {s}.reschedule(queue text, key text, run_at timestamptz)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    moved timestamptz;
BEGIN
    PERFORM {s}.check_name('queue', reschedule.queue);
    PERFORM {s}.check_key(reschedule.key);
    IF reschedule.run_at IS NULL OR NOT isfinite(reschedule.run_at) THEN
        RAISE EXCEPTION 'timerpool: due time % is not a finite timestamp',
            coalesce(reschedule.run_at::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE {s}.tasks AS t
    SET due = reschedule.run_at, run_at = reschedule.run_at,
        expires = reschedule.run_at + (t.expires - t.due)
    WHERE t.queue = reschedule.queue AND t.key = reschedule.key AND t.state = 'pending'
    RETURNING t.due INTO moved;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pg_notify({s}.channel(reschedule.queue),
                      (extract(epoch FROM moved) * 1000000)::int8::text);
    RETURN true;
END
$fn$;

-- Cancels the key's pending task, recording its `cancelled` outcome: true
-- iff it was pending, and then it never runs. A running task cannot be
-- stopped: false. A claim holds the row lock until it commits, so a cancel
-- racing a claim either deletes the pending row first or waits for the
-- claim, re-reads the row as running and returns false.
CREATE OR REPLACE FUNCTION {s}.cancel(queue text, key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    PERFORM {s}.check_name('queue', cancel.queue);
    PERFORM {s}.check_key(cancel.key);
    WITH d AS (
        DELETE FROM {s}.tasks AS t
        WHERE t.queue = cancel.queue AND t.key = cancel.key AND t.state = 'pending'
        RETURNING t.id, t.queue, t.key, t.handler, t.due, t.created
    )
    INSERT INTO {s}.outcomes (id, queue, key, handler, outcome, due, created, finished, attempts)
    SELECT d.id, d.queue, d.key, d.handler, 'cancelled', d.due, d.created, clock_timestamp(), 0
    FROM d;
    RETURN FOUND;
END
$fn$;

-- The due time of the key's pending task, NULL if it has none.
CREATE OR REPLACE FUNCTION {s}.due_of(queue text, key text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
DECLARE
    found_due timestamptz;
BEGIN
    PERFORM {s}.check_name('queue', due_of.queue);
    PERFORM {s}.check_key(due_of.key);
    SELECT t.due INTO found_due FROM {s}.tasks AS t
    WHERE t.queue = due_of.queue AND t.key = due_of.key AND t.state = 'pending';
    RETURN found_due;
END
$fn$;

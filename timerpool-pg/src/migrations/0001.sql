CREATE SEQUENCE IF NOT EXISTS {s}.task_ids;
CREATE TABLE IF NOT EXISTS {s}.tasks (
    id           bigint PRIMARY KEY DEFAULT nextval('{s}.task_ids'),
    queue        text NOT NULL,
    key          text NOT NULL,
    handler      text NOT NULL,
    payload      bytea NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running')),
    due          timestamptz NOT NULL,
    run_at       timestamptz NOT NULL,
    expires      timestamptz,
    created      timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempt      integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL CHECK (max_attempts > 0),
    owner        text,
    claimed      timestamptz,
    last_error   text,
    prev_id      bigint,
    prev_handler text,
    prev_due     timestamptz,
    prev_created timestamptz
);
CREATE UNIQUE INDEX IF NOT EXISTS tasks_one_pending ON {s}.tasks (queue, key) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS tasks_run_at ON {s}.tasks (queue, run_at);
CREATE INDEX IF NOT EXISTS tasks_owner ON {s}.tasks (owner) WHERE owner IS NOT NULL;
CREATE INDEX IF NOT EXISTS tasks_key ON {s}.tasks (queue, key);
CREATE TABLE IF NOT EXISTS {s}.outcomes (
    id       bigint PRIMARY KEY,
    queue    text NOT NULL,
    key      text NOT NULL,
    handler  text NOT NULL,
    outcome  text NOT NULL CHECK (outcome IN
             ('completed', 'failed', 'cancelled', 'replaced', 'expired', 'abandoned')),
    due      timestamptz NOT NULL,
    created  timestamptz NOT NULL,
    claimed  timestamptz,
    started  timestamptz,
    finished timestamptz NOT NULL,
    attempts integer NOT NULL,
    owner    text,
    error    text
);
CREATE INDEX IF NOT EXISTS outcomes_key ON {s}.outcomes (queue, key);
CREATE INDEX IF NOT EXISTS outcomes_finished ON {s}.outcomes (queue, finished);

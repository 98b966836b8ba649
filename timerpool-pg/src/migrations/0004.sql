-- Version 4: the outcome rows an operator may retry (`failed`, `abandoned`,
-- `expired`) keep the task's payload and attempt bound, so a retry
-- (`admin::Retry`, `timerpool-pg retry`) runs the task again as it was.
-- The other outcomes leave both NULL, and so do the rows recorded before
-- this migration, or by code that does not know it: a retry of such a row
-- falls back to an empty payload and the default bound, and says so.
-- Additive: nullable columns without a default change no existing row, and
-- older nodes' inserts, which name their columns, leave them NULL.
-- `{s}` is the schema.
ALTER TABLE {s}.outcomes
    ADD COLUMN IF NOT EXISTS payload bytea,
    ADD COLUMN IF NOT EXISTS max_attempts integer;

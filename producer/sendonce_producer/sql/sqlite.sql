-- The sendonce SQL outbox for SQLite: sendonce_producer.sql_outbox.add writes a row in the application's own
-- transaction; sendonce-outbox-relay moves each committed row to the job queue (SQLite's single writer keeps two
-- relays apart). Rename the table by replacing sendonce_outbox everywhere (schema("sqlite", table=...) does it),
-- and give the relay the same --table. WAL mode (PRAGMA journal_mode = WAL, once per database file) lets the
-- application read while the relay writes.
CREATE TABLE sendonce_outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dedupe_key TEXT NOT NULL UNIQUE,             -- the job's key: one row per email, the same event added twice is one
    job TEXT NOT NULL,                           -- the SQS body, exactly as enqueue would send it
    group_id TEXT,                               -- the FIFO message group, when the producer named one
    created_at_ms INTEGER NOT NULL,              -- when add wrote it (epoch ms): the relay's lag
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'relayed', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,         -- batches that held the row, relayed or kept back
    relayed_at_ms INTEGER,                       -- when SQS accepted it (or it was refused): retention counts from it
    failure TEXT                                 -- why a failed row was refused, for good
);
-- The relay claims the oldest pending rows, and deletes relayed rows past their retention, through this index.
CREATE INDEX sendonce_outbox_state_id ON sendonce_outbox (state, id);

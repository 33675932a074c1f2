-- The sendonce SQL outbox for MySQL 8 and MariaDB 10.6 or newer (the relay claims rows with SKIP LOCKED):
-- sendonce_producer.sql_outbox.add writes a row in the application's own transaction; sendonce-outbox-relay moves
-- each committed row to the job queue. Rename the table by replacing sendonce_outbox everywhere
-- (schema("mysql", table=...) does it), and give the relay the same --table.
CREATE TABLE sendonce_outbox (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    -- Binary: keys compare byte for byte (a case-insensitive collation would make "A" and "a" one email), and the
    -- contract's 1,024-byte limit fits InnoDB's index.
    dedupe_key VARBINARY(1024) NOT NULL,
    job MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL, -- the SQS body, exactly as enqueue would send it
    group_id VARCHAR(128) CHARACTER SET utf8mb4,  -- the FIFO message group, when the producer named one
    created_at_ms BIGINT NOT NULL,                -- when add wrote it (epoch ms): the relay's lag
    state VARCHAR(7) NOT NULL DEFAULT 'pending',  -- pending, relayed or failed
    attempts INT NOT NULL DEFAULT 0,              -- batches that held the row, relayed or kept back
    relayed_at_ms BIGINT,                         -- when SQS accepted it (or it was refused): retention counts from it
    failure TEXT CHARACTER SET utf8mb4,           -- why a failed row was refused, for good
    UNIQUE KEY sendonce_outbox_dedupe_key (dedupe_key),
    -- The relay claims the oldest pending rows, and deletes relayed rows past their retention, through this index.
    KEY sendonce_outbox_state_id (state, id)
) ENGINE = InnoDB;

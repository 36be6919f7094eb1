-- How often a job's worker stopped while running it (a crash, running out of memory, a lost
-- lease): the reaper re-queues a job once and fails it (`worker_lost`) the second time, so a job
-- that crashes its worker cannot crash every process that claims it (issue 27 item 1).
ALTER TABLE jobs ADD COLUMN interruptions BIGINT NOT NULL DEFAULT 0;

-- The search algorithm a job names, as a column of its row: job lists show it without reading
-- each job's specification or report. NULL for tasks without search (and jobs queued before).
ALTER TABLE jobs ADD COLUMN algorithm TEXT;

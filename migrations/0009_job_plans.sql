-- The recoding plan of a job's result CSV (JSON; GET /v1/jobs/{id}/plan), written with the
-- job's fenced completion beside its report. NULL for jobs without one.
ALTER TABLE job_documents ADD COLUMN plan TEXT;

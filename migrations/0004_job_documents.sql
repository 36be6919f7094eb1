-- A job's specification and result report move beside its row. Status polling reads the row
-- only; on SQLite a large specification (hierarchies inline: ~4 MB for creditcard_int) sat in
-- overflow pages that every read of the columns behind it walked through (issue 11 item 6).
CREATE TABLE job_documents (
    job_id TEXT PRIMARY KEY,
    -- The validated specification with stored hierarchies resolved inline (JSON).
    spec TEXT NOT NULL,
    -- The result report (JSON), written with the job's fenced completion.
    result TEXT
);
INSERT INTO job_documents (job_id, spec, result) SELECT id, spec, result FROM jobs;
ALTER TABLE jobs DROP COLUMN spec;
ALTER TABLE jobs DROP COLUMN result;
-- What the job does: 'anonymize' (a search), 'evaluate' (one given transformation) or 'risk'
-- (risk analysis of the data as they are).
ALTER TABLE jobs ADD COLUMN task TEXT NOT NULL DEFAULT 'anonymize';

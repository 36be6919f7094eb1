-- deid schema, version 1. One dialect for PostgreSQL and SQLite: TEXT, BIGINT and BYTEA only
-- (SQLite stores blobs as given whatever the declared type). Times are milliseconds since the
-- Unix epoch, ids are UUIDv7 strings (they sort by creation time), JSON documents are TEXT.

CREATE TABLE datasets (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    -- 'uploading' while the body streams in, 'ready' once parsed and profiled.
    status TEXT NOT NULL CHECK (status IN ('uploading', 'ready')),
    delimiter TEXT NOT NULL,
    has_header BIGINT NOT NULL,
    size_bytes BIGINT NOT NULL,
    row_count BIGINT NOT NULL,
    chunk_count BIGINT NOT NULL,
    -- JSON array of {name, detected_type, distinct_count}.
    columns TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX datasets_by_tenant ON datasets (tenant, id);

-- The uploaded CSV bytes, in order, about 1 MiB per chunk.
CREATE TABLE dataset_chunks (
    dataset_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (dataset_id, seq)
);

-- Distinct values of each column (JSON array of strings), kept for columns with few enough of
-- them, to validate hierarchies and job specifications without reading the data again.
CREATE TABLE dataset_values (
    dataset_id TEXT NOT NULL,
    position BIGINT NOT NULL,
    dict_values TEXT NOT NULL,
    PRIMARY KEY (dataset_id, position)
);

CREATE TABLE hierarchies (
    dataset_id TEXT NOT NULL,
    column_name TEXT NOT NULL,
    delimiter TEXT NOT NULL,
    csv TEXT NOT NULL,
    levels BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (dataset_id, column_name)
);

CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    dataset_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    -- The validated specification with stored hierarchies resolved inline (JSON).
    spec TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    max_attempts BIGINT NOT NULL,
    run_at BIGINT NOT NULL,
    lease_owner TEXT,
    lease_expires_at BIGINT,
    heartbeat_at BIGINT,
    cancel_requested BIGINT NOT NULL,
    -- Latest progress, best transformation so far and trace of improvements (JSON).
    progress TEXT,
    -- The result report (JSON) and the number of chunks of the anonymized CSV.
    result TEXT,
    result_chunks BIGINT,
    -- {"code", "message", "details"} like API errors.
    error TEXT,
    -- Webhook delivery state: NULL (none), 'pending', 'delivered', 'failed'.
    webhook TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT
);
CREATE INDEX jobs_queue ON jobs (run_at) WHERE status = 'queued';
CREATE INDEX jobs_by_tenant ON jobs (tenant, id);
CREATE INDEX jobs_by_dataset ON jobs (dataset_id);

-- The anonymized CSV of a job, in order. Written under the job's lease (fenced).
CREATE TABLE result_chunks (
    job_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (job_id, seq)
);

-- A job's callback URL and resolved time limit as columns of its row, read without parsing its
-- specification (the webhook of a job whose process stopped). Jobs created before have NULL here
-- and are read from their specification.
ALTER TABLE jobs ADD COLUMN callback_url TEXT;
ALTER TABLE jobs ADD COLUMN time_limit_ms BIGINT;

-- Hierarchies stored as builder specifications. `spec` holds the specification (JSON) and is
-- NULL for ARX tables uploaded as CSV (every row written by version 1); `csv` then holds the
-- table the specification produced when it was stored (`;`-separated), so readers that only
-- know `csv` keep working.
ALTER TABLE hierarchies ADD COLUMN spec TEXT;

-- A dataset uploaded as a frequency table (POST /v1/datasets?count_column=…): the column that
-- counts the records of each row, and the sum of its counts (the dataset's records). NULL for
-- other datasets.
ALTER TABLE datasets ADD COLUMN count_column TEXT;
ALTER TABLE datasets ADD COLUMN record_count BIGINT;

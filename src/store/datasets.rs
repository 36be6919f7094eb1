//! Datasets (metadata plus the CSV bytes in ordered chunks), the distinct values of their columns
//! and their hierarchies.

use super::{Result, Store, on_pool};
use crate::job::id::{DatasetId, TenantId};

/// A dataset's row in `datasets`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DatasetRow {
    /// UUIDv7.
    pub id: DatasetId,
    /// Owning tenant.
    pub tenant: TenantId,
    /// Display name.
    pub name: String,
    /// `uploading` or `ready`.
    pub status: String,
    /// Field delimiter (one character).
    pub delimiter: String,
    /// 1 if the first record is a header.
    pub has_header: i64,
    /// Size of the CSV in bytes.
    pub size_bytes: i64,
    /// Data rows.
    pub row_count: i64,
    /// Number of stored chunks.
    pub chunk_count: i64,
    /// JSON array of column profiles.
    pub columns: String,
    /// Creation time (ms since the epoch).
    pub created_at: i64,
    /// The count column of a frequency table (each row stands for that many records).
    pub count_column: Option<String>,
    /// The records of a frequency table: the sum of its counts.
    pub record_count: Option<i64>,
}

impl DatasetRow {
    /// Records of the dataset: the sum of the counts of a frequency table, else its rows.
    pub fn records(&self) -> i64 {
        self.record_count.unwrap_or(self.row_count).max(0)
    }
}

/// A new dataset, before its bytes arrive.
#[derive(Debug, Clone)]
pub struct NewDataset<'a> {
    /// UUIDv7.
    pub id: &'a DatasetId,
    /// Owning tenant.
    pub tenant: &'a TenantId,
    /// Display name.
    pub name: &'a str,
    /// Field delimiter.
    pub delimiter: &'a str,
    /// Whether the first record is a header.
    pub has_header: bool,
}

/// What is known of a dataset once its upload is complete.
#[derive(Debug, Clone)]
pub struct FinishedDataset<'a> {
    /// The dataset.
    pub id: &'a DatasetId,
    /// Its field delimiter (given or detected).
    pub delimiter: &'a str,
    /// Size of the CSV in bytes.
    pub size_bytes: i64,
    /// Data rows.
    pub rows: i64,
    /// Number of stored chunks.
    pub chunks: i64,
    /// JSON array of the column profiles.
    pub columns_json: &'a str,
    /// (column position, JSON array of its distinct values) of the columns whose values are kept.
    pub values: &'a [(i64, String)],
    /// A frequency table's count column and the sum of its counts.
    pub frequency: Option<(&'a str, i64)>,
}

/// A stored hierarchy.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HierarchyRow {
    /// The column.
    pub column_name: String,
    /// Field delimiter of the CSV.
    pub delimiter: String,
    /// ARX-format CSV text: as uploaded, or the table `spec` produced when it was stored.
    pub csv: String,
    /// Number of levels.
    pub levels: i64,
    /// The builder specification (JSON), `None` for a hierarchy uploaded as CSV.
    pub spec: Option<String>,
    /// Upload time (ms since the epoch).
    pub created_at: i64,
}

impl HierarchyRow {
    /// `builder` for a stored specification, `csv` for an uploaded table.
    pub fn kind(&self) -> &'static str {
        if self.spec.is_some() {
            "builder"
        } else {
            "csv"
        }
    }
}

/// A hierarchy to store: an ARX table, plus the specification it was built from (if any).
#[derive(Debug, Clone)]
pub struct NewHierarchy<'a> {
    /// The column.
    pub column: &'a str,
    /// Field delimiter of `csv`.
    pub delimiter: &'a str,
    /// ARX-format CSV text.
    pub csv: &'a str,
    /// Number of levels.
    pub levels: i64,
    /// The builder specification (JSON) that produced `csv`.
    pub spec: Option<&'a str>,
}

/// One line of a dataset's hierarchy summary: column, levels and kind (`csv` or `builder`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HierarchyLevels {
    /// The column.
    pub column_name: String,
    /// Number of levels.
    pub levels: i64,
    /// `csv` or `builder`.
    pub kind: String,
}

macro_rules! select_dataset {
    ($rest:literal) => {
        concat!(
            "SELECT id, tenant, name, status, delimiter, has_header, size_bytes, row_count, chunk_count, columns, created_at, count_column, record_count FROM datasets ",
            $rest
        )
    };
}

impl Store {
    /// Inserts a dataset in state `uploading`.
    pub async fn create_dataset(&self, new: &NewDataset<'_>) -> Result<()> {
        const SQL: &str = "INSERT INTO datasets (id, tenant, name, status, delimiter, has_header, size_bytes, row_count, chunk_count, columns, created_at) \
             VALUES ($1, $2, $3, 'uploading', $4, $5, 0, 0, 0, '[]', $6)";
        on_pool!(self, pool => sqlx::query(SQL)
            .bind(new.id)
            .bind(new.tenant)
            .bind(new.name)
            .bind(new.delimiter)
            .bind(new.has_header as i64)
            .bind(super::now_ms())
            .execute(pool)
            .await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Stores chunk `seq` of a dataset's bytes.
    pub async fn insert_dataset_chunk(
        &self,
        dataset_id: &DatasetId,
        seq: i64,
        data: &[u8],
    ) -> Result<()> {
        const SQL: &str = "INSERT INTO dataset_chunks (dataset_id, seq, data) VALUES ($1, $2, $3)";
        on_pool!(self, pool => sqlx::query(SQL).bind(dataset_id).bind(seq).bind(data).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Marks an upload complete with its profile and the distinct values of small columns
    /// (`(position, JSON array)`), in one transaction.
    pub async fn finish_dataset(&self, done: &FinishedDataset<'_>) -> Result<()> {
        const VALUES: &str =
            "INSERT INTO dataset_values (dataset_id, position, dict_values) VALUES ($1, $2, $3)";
        const FINISH: &str = "UPDATE datasets SET status = 'ready', size_bytes = $2, row_count = $3, chunk_count = $4, columns = $5, delimiter = $6, count_column = $7, record_count = $8 WHERE id = $1";
        on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            for (position, json) in done.values {
                sqlx::query(VALUES).bind(done.id).bind(*position).bind(json.as_str()).execute(&mut *tx).await?;
            }
            sqlx::query(FINISH)
                .bind(done.id)
                .bind(done.size_bytes)
                .bind(done.rows)
                .bind(done.chunks)
                .bind(done.columns_json)
                .bind(done.delimiter)
                .bind(done.frequency.map(|(c, _)| c))
                .bind(done.frequency.map(|(_, n)| n))
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        })?;
        Ok(())
    }

    /// Removes a dataset with everything stored for it (used for failed uploads too).
    pub async fn purge_dataset(&self, dataset_id: &DatasetId) -> Result<()> {
        const CHUNKS: &str = "DELETE FROM dataset_chunks WHERE dataset_id = $1";
        const VALUES: &str = "DELETE FROM dataset_values WHERE dataset_id = $1";
        const HIERARCHIES: &str = "DELETE FROM hierarchies WHERE dataset_id = $1";
        const DATASET: &str = "DELETE FROM datasets WHERE id = $1";
        on_pool!(self, pool => {
            let mut tx = pool.begin().await?;
            for sql in [CHUNKS, VALUES, HIERARCHIES, DATASET] {
                sqlx::query(sql).bind(dataset_id).execute(&mut *tx).await?;
            }
            tx.commit().await
        })?;
        Ok(())
    }

    /// Deletes a tenant's dataset unless a queued or running job uses it.
    pub async fn delete_dataset(
        &self,
        tenant: &TenantId,
        dataset_id: &DatasetId,
    ) -> Result<DeleteOutcome> {
        // The job check and the delete are one statement, so a job claimed in between cannot
        // lose its data; a job queued concurrently fails cleanly when its dataset is gone.
        const SQL: &str = "DELETE FROM datasets WHERE id = $1 AND tenant = $2 AND status = 'ready' \
             AND NOT EXISTS (SELECT 1 FROM jobs WHERE dataset_id = $1 AND status IN ('queued', 'running'))";
        let deleted = on_pool!(self, pool => sqlx::query(SQL).bind(dataset_id).bind(tenant).execute(pool).await.map(|r| r.rows_affected()))?;
        if deleted == 0 {
            return Ok(match self.dataset(tenant, dataset_id).await? {
                Some(_) => DeleteOutcome::InUse,
                None => DeleteOutcome::NotFound,
            });
        }
        self.purge_dataset(dataset_id).await?;
        Ok(DeleteOutcome::Deleted)
    }

    /// A tenant's dataset in state `ready`.
    pub async fn dataset(
        &self,
        tenant: &TenantId,
        dataset_id: &DatasetId,
    ) -> Result<Option<DatasetRow>> {
        const SQL: &str = select_dataset!("WHERE id = $1 AND tenant = $2 AND status = 'ready'");
        Ok(
            on_pool!(self, pool => sqlx::query_as::<_, DatasetRow>(SQL).bind(dataset_id).bind(tenant).fetch_optional(pool).await)?,
        )
    }

    /// A page of a tenant's datasets, newest first, strictly older than `before` (an id).
    pub async fn list_datasets(
        &self,
        tenant: &TenantId,
        before: Option<&DatasetId>,
        limit: i64,
    ) -> Result<Vec<DatasetRow>> {
        const FIRST: &str =
            select_dataset!("WHERE tenant = $1 AND status = 'ready' ORDER BY id DESC LIMIT $2");
        const NEXT: &str = select_dataset!(
            "WHERE tenant = $1 AND status = 'ready' AND id < $3 ORDER BY id DESC LIMIT $2"
        );
        Ok(match before {
            None => {
                on_pool!(self, pool => sqlx::query_as::<_, DatasetRow>(FIRST).bind(tenant).bind(limit).fetch_all(pool).await)?
            }
            Some(b) => {
                on_pool!(self, pool => sqlx::query_as::<_, DatasetRow>(NEXT).bind(tenant).bind(limit).bind(b).fetch_all(pool).await)?
            }
        })
    }

    /// Chunk `seq` of a dataset's bytes.
    pub async fn dataset_chunk(&self, dataset_id: &DatasetId, seq: i64) -> Result<Option<Vec<u8>>> {
        const SQL: &str = "SELECT data FROM dataset_chunks WHERE dataset_id = $1 AND seq = $2";
        Ok(
            on_pool!(self, pool => sqlx::query_scalar::<_, Vec<u8>>(SQL).bind(dataset_id).bind(seq).fetch_optional(pool).await)?,
        )
    }

    /// The distinct values of column `position` (JSON array), if they were kept.
    pub async fn column_values(
        &self,
        dataset_id: &DatasetId,
        position: i64,
    ) -> Result<Option<String>> {
        const SQL: &str =
            "SELECT dict_values FROM dataset_values WHERE dataset_id = $1 AND position = $2";
        Ok(
            on_pool!(self, pool => sqlx::query_scalar::<_, String>(SQL).bind(dataset_id).bind(position).fetch_optional(pool).await)?,
        )
    }

    /// Stores (or replaces) the hierarchy of a column.
    pub async fn put_hierarchy(&self, dataset_id: &DatasetId, h: &NewHierarchy<'_>) -> Result<()> {
        const SQL: &str = "INSERT INTO hierarchies (dataset_id, column_name, delimiter, csv, levels, spec, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (dataset_id, column_name) DO UPDATE SET delimiter = excluded.delimiter, csv = excluded.csv, \
             levels = excluded.levels, spec = excluded.spec, created_at = excluded.created_at";
        on_pool!(self, pool => sqlx::query(SQL)
            .bind(dataset_id)
            .bind(h.column)
            .bind(h.delimiter)
            .bind(h.csv)
            .bind(h.levels)
            .bind(h.spec)
            .bind(super::now_ms())
            .execute(pool)
            .await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// The hierarchy of a column, if one was stored.
    pub async fn hierarchy(
        &self,
        dataset_id: &DatasetId,
        column: &str,
    ) -> Result<Option<HierarchyRow>> {
        const SQL: &str = "SELECT column_name, delimiter, csv, levels, spec, created_at FROM hierarchies WHERE dataset_id = $1 AND column_name = $2";
        Ok(
            on_pool!(self, pool => sqlx::query_as::<_, HierarchyRow>(SQL).bind(dataset_id).bind(column).fetch_optional(pool).await)?,
        )
    }

    /// Columns with a stored hierarchy, their number of levels and kind, by column name.
    pub async fn hierarchy_levels(&self, dataset_id: &DatasetId) -> Result<Vec<HierarchyLevels>> {
        const SQL: &str = "SELECT column_name, levels, CASE WHEN spec IS NULL THEN 'csv' ELSE 'builder' END AS kind \
             FROM hierarchies WHERE dataset_id = $1 ORDER BY column_name";
        Ok(
            on_pool!(self, pool => sqlx::query_as::<_, HierarchyLevels>(SQL).bind(dataset_id).fetch_all(pool).await)?,
        )
    }

    /// Deletes uploads that never completed (after a crash), older than `older_than_ms`.
    pub async fn purge_stale_uploads(&self, older_than_ms: i64) -> Result<u64> {
        const SQL: &str = "SELECT id FROM datasets WHERE status = 'uploading' AND created_at < $1";
        let ids: Vec<DatasetId> = on_pool!(self, pool => sqlx::query_scalar::<_, DatasetId>(SQL).bind(older_than_ms).fetch_all(pool).await)?;
        for id in &ids {
            self.purge_dataset(id).await?;
        }
        Ok(ids.len() as u64)
    }
}

/// What [`Store::delete_dataset`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The dataset is gone.
    Deleted,
    /// A queued or running job uses it.
    InUse,
    /// No such dataset for this tenant.
    NotFound,
}

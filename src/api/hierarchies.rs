//! Hierarchies of a dataset's columns, stored one per column either as an ARX table uploaded as
//! CSV or as a builder specification (`{"type": "interval", …}`), plus a preview of what a
//! specification produces.
//!
//! - `POST …/hierarchies/{column}/preview`: builds the specification against the column's
//!   distinct values and returns the table (JSON with the analytic domain shares, or ARX CSV);
//!   stores nothing.
//! - `PUT …/hierarchies/{column}`: `application/json` bodies are specifications, anything else is
//!   an ARX CSV. A specification is validated by building it; the specification and the table it
//!   produced (`;`-separated) are both stored. Jobs that use the stored hierarchy get the
//!   specification inlined and build it against the full data (same values, same table, with
//!   the analytic shares for the Loss model).
//! - `GET …/hierarchies/{column}`: the table as CSV (as uploaded, or as built), or as JSON with
//!   the kind and the specification.
//!
//! The distinct values come from the dataset's stored values, or, for columns with more than
//! [`MAX_STORED_VALUES`](super::datasets::MAX_STORED_VALUES) of them, from one pass over the
//! stored CSV.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cancel::CancelOnDrop;
use super::datasets::{
    column_profiles, find_dataset, missing_values_error, parse_delimiter, stored_column,
};
use super::error::{ApiError, ErrorCode, Result};
use super::extract::{ApiQuery, body_rejection, parse_json};
use super::state::AppState;
use crate::job::error::SpecError;
use crate::job::id::DatasetId;
use crate::job::id::TenantId;
use crate::store::datasets::{DatasetRow, NewHierarchy};
use crate::worker::chunks::ChunkReader;
use deid_engine::data::Column;
use deid_engine::{CancelFlag, CsvOptions, EngineError, Hierarchy, HierarchySpec};

/// Delimiter of tables built from specifications (stored and previewed): `;`, as ARX and
/// `deid hierarchy` write them.
pub const BUILT_DELIMITER: u8 = b';';

/// Query parameters of `PUT …/hierarchies/{column}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HierarchyParams {
    /// Field delimiter of a CSV body (default: detected, `job::hierarchy::sniff_delimiter`).
    pub delimiter: Option<String>,
}

/// Query parameters of `GET …/hierarchies/{column}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    /// `csv` or `json`; overrides the `Accept` header.
    pub format: Option<String>,
}

/// Query parameters of `POST …/hierarchies/{column}/preview`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewParams {
    /// `json` or `csv`; overrides the `Accept` header.
    pub format: Option<String>,
    /// Field delimiter of a CSV answer (default `;`).
    pub delimiter: Option<String>,
    /// Answer with the first `limit` rows only (≥ 1); the total is in `total_rows` (JSON) or
    /// `X-Deid-Total-Rows` (CSV).
    pub limit: Option<usize>,
}

/// A stored hierarchy's summary (the answer to `PUT`).
#[derive(Debug, Serialize)]
pub struct HierarchyView {
    /// The column.
    pub column: String,
    /// `csv` (an uploaded table) or `builder` (a specification).
    pub kind: &'static str,
    /// Number of levels, including the original values.
    pub levels: i64,
    /// Rows (distinct original values) of the hierarchy.
    pub rows: usize,
}

/// A hierarchy table as JSON (preview, and `GET` with `Accept: application/json`).
#[derive(Debug, Serialize)]
pub struct HierarchyTable {
    /// The column.
    pub column: String,
    /// `csv` (an uploaded table) or `builder` (a specification).
    pub kind: &'static str,
    /// The specification, with defaults filled in (builder hierarchies only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<serde_json::Value>,
    /// Number of levels, including the original values.
    pub levels: usize,
    /// One row per distinct value: the value, then its label on each level.
    pub rows: Vec<Vec<String>>,
    /// Analytic domain share of each cell of `rows` (what the Loss model uses); previews only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<Vec<Vec<f64>>>,
    /// Rows of the whole table (previews only; more than `rows` holds when `?limit=` cut it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_rows: Option<usize>,
}

/// The representation a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Csv,
}

/// Picks the representation: the `format` query parameter if given, else the `Accept` media
/// type with the highest `q` among `application/json` and `text/csv` (the first on ties), else
/// `default`.
fn negotiate(headers: &HeaderMap, format: Option<&str>, default: Format) -> Result<Format> {
    if let Some(f) = format {
        return match f {
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            other => Err(ApiError::new(
                ErrorCode::InvalidQuery,
                format!("format must be 'json' or 'csv', got '{other}'"),
            )
            .with_details(json!({"field": "format"}))),
        };
    }
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(default);
    };
    let mut best: Option<(f32, Format)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .next()
            .and_then(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let format = match media.as_str() {
            "text/csv" => Format::Csv,
            "application/json" => Format::Json,
            _ => continue,
        };
        if q > 0.0 && best.is_none_or(|(b, _)| q > b) {
            best = Some((q, format));
        }
    }
    Ok(best.map_or(default, |(_, f)| f))
}

/// A CSV answer with its delimiter in `X-Deid-Delimiter`.
fn csv_response(text: String, delimiter: &str, kind: &'static str) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(d) = HeaderValue::from_str(delimiter) {
        headers.insert(HeaderName::from_static("x-deid-delimiter"), d);
    }
    headers.insert(
        HeaderName::from_static("x-deid-hierarchy-kind"),
        HeaderValue::from_static(kind),
    );
    (headers, text).into_response()
}

/// Position of `column` in the dataset, or 404 `column_not_found` listing the columns.
fn column_position(dataset: &DatasetRow, column: &str) -> Result<usize> {
    let columns = column_profiles(dataset);
    columns
        .iter()
        .position(|c| c.name == column)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::ColumnNotFound,
                format!(
                    "the dataset has no column '{column}'; its columns are: {}",
                    columns
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .with_details(json!({"column": column}))
        })
}

/// The distinct values of a column: the stored ones, or one pass over the stored CSV for
/// columns with too many of them to be kept.
async fn distinct_values(
    state: &AppState,
    dataset: &DatasetRow,
    column: &str,
    position: usize,
) -> Result<Column> {
    if let Some(col) = stored_column(state, dataset, column).await? {
        return Ok(col);
    }
    let reader = ChunkReader::new(
        state.store.clone(),
        tokio::runtime::Handle::current(),
        dataset.id.clone(),
        dataset.chunk_count,
    );
    let options = CsvOptions {
        delimiter: dataset.delimiter.bytes().next().unwrap_or(b','),
        has_header: dataset.has_header != 0,
    };
    let name = column.to_string();
    tokio::task::spawn_blocking(move || {
        deid_engine::profile::scan_column(
            std::io::BufReader::with_capacity(1 << 16, reader),
            options,
            "dataset",
            position,
            &name,
        )
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(ApiError::internal)
}

/// Parses a specification body: malformed JSON is 400, anything that is not a valid
/// specification 422 `invalid_spec` naming the field.
/// Everything that does not depend on the data (e.g. more `levels` than a hierarchy may have)
/// is checked here, before any value is read.
fn parse_spec(body: &[u8], column: &str) -> Result<HierarchySpec> {
    let value: serde_json::Value = parse_json(body, ErrorCode::InvalidSpec)?;
    let spec = crate::job::hierarchy::parse_builder(&value, "$")
        .map_err(|e| ApiError::from(e.with_code(ErrorCode::InvalidSpec)))?;
    spec.validate().map_err(|e| builder_error(e, column))?;
    Ok(spec)
}

/// Builds `spec` for the values of `column` on a blocking thread. Errors are 422
/// `invalid_spec` whose `details.field` is the path inside the specification (`intervals[2]`,
/// `format`, or `$` for the whole) and whose message names the offending value. Abandoning the
/// returned future cancels the build.
async fn build(spec: HierarchySpec, column: Column) -> Result<Hierarchy> {
    let cancel = CancelFlag::new();
    let _guard = CancelOnDrop(cancel.clone());
    tokio::task::spawn_blocking(move || {
        spec.build_cancellable(&column, &cancel)
            .map_err(|e| builder_error(e, &column.name))
    })
    .await
    .map_err(ApiError::internal)?
}

fn builder_error(e: EngineError, column: &str) -> ApiError {
    let (path, message) = match e {
        // The engine's path is relative to the specification; empty: the whole.
        EngineError::InvalidConfig { field, message } if field.is_empty() => {
            ("$".to_string(), message)
        }
        EngineError::InvalidConfig { field, message } => (field, message),
        other => ("$".to_string(), other.to_string()),
    };
    ApiError::from(SpecError::new(path.clone(), message))
        .with_details(json!({"field": path, "column": column}))
}

/// The specification as stored and shown: with every default filled in.
fn normalized(spec: &HierarchySpec) -> Result<serde_json::Value> {
    serde_json::to_value(spec).map_err(ApiError::internal)
}

/// `POST /v1/datasets/{id}/hierarchies/{column}/preview`: the table a specification produces
/// for the column, as JSON (default, with the domain shares) or ARX CSV (`Accept: text/csv` or
/// `?format=csv`; `;`-separated unless `?delimiter=`). Stores nothing.
pub async fn preview_hierarchy(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path((id, column)): Path<(DatasetId, String)>,
    ApiQuery(params): ApiQuery<PreviewParams>,
    headers: HeaderMap,
    body: std::result::Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response> {
    let format = negotiate(&headers, params.format.as_deref(), Format::Json)?;
    let delimiter = parse_delimiter(params.delimiter.as_deref(), BUILT_DELIMITER, "delimiter")?;
    if params.limit == Some(0) {
        return Err(ApiError::new(
            ErrorCode::InvalidQuery,
            "limit: expected at least 1 row, got 0",
        )
        .with_details(json!({"field": "limit"})));
    }
    let dataset = find_dataset(&state, &tenant, &id).await?;
    let position = column_position(&dataset, &column)?;
    let body = body.map_err(body_rejection)?;
    let spec = parse_spec(&body, &column)?;
    let values = distinct_values(&state, &dataset, &column, position).await?;
    let hierarchy = build(spec.clone(), values).await?;
    let total = hierarchy.rows().len();
    let shown = params.limit.unwrap_or(total).min(total);
    let rows = &hierarchy.rows()[..shown];
    Ok(match format {
        Format::Csv => {
            let mut r = csv_response(
                deid_engine::hierarchy::rows_to_csv(rows, delimiter),
                &(delimiter as char).to_string(),
                "builder",
            );
            r.headers_mut().insert(
                HeaderName::from_static("x-deid-total-rows"),
                HeaderValue::from(total),
            );
            r
        }
        Format::Json => Json(HierarchyTable {
            column,
            kind: "builder",
            spec: Some(normalized(&spec)?),
            levels: hierarchy.height(),
            shares: hierarchy.shares().map(|s| s[..shown].to_vec()),
            rows: rows.to_vec(),
            total_rows: Some(total),
        })
        .into_response(),
    })
}

/// True for `application/json` and `application/*+json` content types.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase())
        .is_some_and(|m| {
            m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
        })
}

/// True if a body sent as CSV is a JSON object with a `type` (a specification sent without
/// `Content-Type: application/json`, e.g. by `curl -d`); only used to improve error messages.
fn looks_like_spec(text: &str) -> bool {
    text.trim_start().starts_with('{')
        && serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.get("type").is_some())
}

/// `PUT /v1/datasets/{id}/hierarchies/{column}`: stores (or replaces) the column's hierarchy.
/// An `application/json` body is a builder specification, built at once against the column's
/// values; any other body is an ARX CSV, validated against them.
pub async fn put_hierarchy(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path((id, column)): Path<(DatasetId, String)>,
    ApiQuery(params): ApiQuery<HierarchyParams>,
    headers: HeaderMap,
    body: std::result::Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Json<HierarchyView>> {
    let dataset = find_dataset(&state, &tenant, &id).await?;
    let position = column_position(&dataset, &column)?;
    let body = body.map_err(body_rejection)?;
    let (new, rows) = if is_json(&headers) {
        if params.delimiter.is_some() {
            return Err(ApiError::new(
                ErrorCode::InvalidQuery,
                "delimiter applies to CSV hierarchies only, not to specifications",
            )
            .with_details(json!({"field": "delimiter"})));
        }
        let spec = parse_spec(&body, &column)?;
        let values = distinct_values(&state, &dataset, &column, position).await?;
        let hierarchy = build(spec.clone(), values).await?;
        let stored = StoredHierarchy {
            delimiter: BUILT_DELIMITER,
            csv: hierarchy.to_csv(BUILT_DELIMITER),
            levels: hierarchy.height() as i64,
            spec: Some(normalized(&spec)?.to_string()),
        };
        (stored, hierarchy.rows().len())
    } else {
        checked_csv(
            &state,
            &dataset,
            &column,
            &body,
            params.delimiter.as_deref(),
        )
        .await?
    };
    state
        .store
        .put_hierarchy(
            &id,
            &NewHierarchy {
                column: &column,
                delimiter: &(new.delimiter as char).to_string(),
                csv: &new.csv,
                levels: new.levels,
                spec: new.spec.as_deref(),
            },
        )
        .await?;
    Ok(Json(HierarchyView {
        column,
        kind: if new.spec.is_some() { "builder" } else { "csv" },
        levels: new.levels,
        rows,
    }))
}

/// A hierarchy about to be stored.
struct StoredHierarchy {
    delimiter: u8,
    csv: String,
    levels: i64,
    spec: Option<String>,
}

/// Validates an ARX CSV hierarchy for `column` (against its stored values, when kept); returns
/// it with its number of rows.
async fn checked_csv(
    state: &AppState,
    dataset: &DatasetRow,
    column: &str,
    body: &[u8],
    delimiter: Option<&str>,
) -> Result<(StoredHierarchy, usize)> {
    let text = std::str::from_utf8(body).map_err(|_| {
        ApiError::new(
            ErrorCode::InvalidHierarchy,
            "the hierarchy is not valid UTF-8",
        )
    })?;
    let delimiter = match delimiter {
        Some(d) => parse_delimiter(Some(d), b';', "delimiter")?,
        None => crate::job::hierarchy::sniff_delimiter(text.as_bytes()),
    };
    let hint = |mut e: ApiError| {
        if looks_like_spec(text) {
            e.message.push_str(
                "; the body looks like a builder specification: send it with Content-Type: application/json",
            );
        }
        e
    };
    let hierarchy = Hierarchy::read_csv(text.as_bytes(), delimiter, column).map_err(|e| {
        hint(
            ApiError::new(ErrorCode::InvalidHierarchy, e.to_string())
                .with_details(json!({"column": column})),
        )
    })?;
    if hierarchy.rows().is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidHierarchy,
            "the hierarchy has no rows",
        ));
    }
    if let Some(col) = stored_column(state, dataset, column).await? {
        hierarchy
            .encode(&col)
            .map_err(|e| hint(missing_values_error(e, "body")))?;
    }
    let stored = StoredHierarchy {
        delimiter,
        csv: text.to_string(),
        levels: hierarchy.height() as i64,
        spec: None,
    };
    Ok((stored, hierarchy.rows().len()))
}

/// `GET /v1/datasets/{id}/hierarchies/{column}`: the table as CSV (default: as uploaded, or as
/// built from the specification, `;`-separated; the delimiter in `X-Deid-Delimiter`), or as
/// JSON with the kind and the specification (`Accept: application/json` or `?format=json`).
pub async fn get_hierarchy(
    State(state): State<AppState>,
    Extension(tenant): Extension<TenantId>,
    Path((id, column)): Path<(DatasetId, String)>,
    ApiQuery(params): ApiQuery<GetParams>,
    headers: HeaderMap,
) -> Result<Response> {
    let format = negotiate(&headers, params.format.as_deref(), Format::Csv)?;
    find_dataset(&state, &tenant, &id).await?;
    let h = state.store.hierarchy(&id, &column).await?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::HierarchyNotFound,
            format!("no hierarchy stored for column '{column}'"),
        )
        .with_details(json!({"column": column}))
    })?;
    let kind = h.kind();
    if format == Format::Csv {
        return Ok(csv_response(h.csv, &h.delimiter, kind));
    }
    let delimiter = h.delimiter.bytes().next().unwrap_or(BUILT_DELIMITER);
    // Stored tables were validated when they were stored.
    let table =
        Hierarchy::read_csv(h.csv.as_bytes(), delimiter, &column).map_err(ApiError::internal)?;
    let spec = match &h.spec {
        Some(s) => Some(serde_json::from_str(s).map_err(ApiError::internal)?),
        None => None,
    };
    Ok(Json(HierarchyTable {
        column,
        kind,
        spec,
        levels: table.height(),
        rows: table.rows().to_vec(),
        shares: None,
        total_rows: None,
    })
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn negotiates_by_query_then_accept() {
        let none = HeaderMap::new();
        assert_eq!(negotiate(&none, None, Format::Json).unwrap(), Format::Json);
        assert_eq!(negotiate(&none, None, Format::Csv).unwrap(), Format::Csv);
        assert_eq!(
            negotiate(&accept("text/csv"), None, Format::Json).unwrap(),
            Format::Csv
        );
        assert_eq!(
            negotiate(&accept("*/*"), None, Format::Csv).unwrap(),
            Format::Csv
        );
        assert_eq!(
            negotiate(
                &accept("text/csv;q=0.5, application/json"),
                None,
                Format::Csv
            )
            .unwrap(),
            Format::Json
        );
        assert_eq!(
            negotiate(&accept("text/csv, application/json"), None, Format::Json).unwrap(),
            Format::Csv,
            "the first wins on ties"
        );
        assert_eq!(
            negotiate(&accept("text/csv;q=0"), None, Format::Json).unwrap(),
            Format::Json
        );
        assert_eq!(
            negotiate(&accept("text/csv"), Some("json"), Format::Csv).unwrap(),
            Format::Json,
            "the query parameter wins"
        );
        let err = negotiate(&none, Some("xml"), Format::Json).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidQuery);
    }

    #[test]
    fn builder_errors_name_the_path_inside_the_specification() {
        let e = builder_error(EngineError::config("intervals[1]", "overlaps"), "a.b");
        assert_eq!(e.code, ErrorCode::InvalidSpec);
        assert_eq!(e.details["field"], "intervals[1]");
        assert_eq!(e.details["column"], "a.b");
        let e = builder_error(EngineError::config("", "no values"), "a");
        assert_eq!(e.details["field"], "$");
    }
}

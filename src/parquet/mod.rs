//! Apache Parquet in and out (docs/definitions.md §8). Parquet is read as the CSV text the rest
//! of deid reads — the upload, `deid anonymize | evaluate | risk | profile | verify | apply` —
//! so that equal values are equal everywhere: [`text`] is the one typed→text rule, [`read`]
//! applies it to a file, row group by row group; [`write`] writes deid's CSV output as Parquet
//! (text columns, a frequency table's count column as INT64).
//!
//! Codecs: uncompressed, Snappy, gzip, LZ4 and LZ4_RAW are read; Snappy is written. Others
//! (ZSTD, Brotli, LZO) are an error naming the column and the codec.

pub mod read;
pub mod text;
pub mod write;

use std::path::Path;

pub use read::ParquetCsv;
pub use write::{ParquetSink, csv_to_parquet};

/// The media type of Parquet uploads and downloads.
pub const MEDIA_TYPE: &str = "application/vnd.apache.parquet";

/// What is wrong with a Parquet input (or output).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParquetError {
    /// A column whose type deid does not read (nested, INT96, …).
    #[error("column '{column}' is {kind}: {supported}")]
    Unsupported {
        /// The column.
        column: String,
        /// Its type.
        kind: String,
        /// What is supported.
        supported: String,
    },
    /// A column compressed with a codec deid cannot decompress.
    #[error(
        "column '{column}' is compressed with {codec}; deid reads uncompressed, SNAPPY, GZIP, \
         LZ4 and LZ4_RAW Parquet (write the file with one of them, e.g. snappy, the default of \
         Spark, pyarrow and DuckDB)"
    )]
    Codec {
        /// The column.
        column: String,
        /// The codec.
        codec: String,
    },
    /// A value the typed→text rule cannot convert.
    #[error("column '{column}', row {row}: {message}")]
    Value {
        /// The column.
        column: String,
        /// The 1-based data row.
        row: u64,
        /// What is wrong and what was expected.
        message: String,
    },
    /// The file cannot be read (truncated, not Parquet) or written.
    #[error("{0}")]
    File(String),
}

impl ParquetError {
    /// The column the error is about, if any.
    pub fn column(&self) -> Option<&str> {
        match self {
            ParquetError::Unsupported { column, .. }
            | ParquetError::Codec { column, .. }
            | ParquetError::Value { column, .. } => Some(column),
            ParquetError::File(_) => None,
        }
    }
}

/// Whether `path` names a Parquet file (its extension is `.parquet`, in any case).
pub fn is_parquet(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// Opens the Parquet file at `path` as CSV text with `delimiter`.
pub fn open(path: &Path, delimiter: u8) -> anyhow::Result<ParquetCsv<std::fs::File>> {
    use anyhow::Context;
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    ParquetCsv::new(file, delimiter).with_context(|| format!("{}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/parquet");
        std::fs::read(dir.join(name)).unwrap()
    }

    fn text_of(bytes: Vec<u8>) -> Result<String, String> {
        let mut reader =
            ParquetCsv::new(axum::body::Bytes::from(bytes), b',').map_err(|e| e.to_string())?;
        let mut text = String::new();
        reader
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
        Ok(text)
    }

    #[test]
    fn every_type_of_an_independent_writer_becomes_its_documented_text() {
        let expected = String::from_utf8(fixture("types.csv")).unwrap();
        assert_eq!(text_of(fixture("types.parquet")).unwrap(), expected);
        assert_eq!(
            text_of(fixture("decimal_int.parquet")).unwrap(),
            "dec_int\n-42\n0\n99999\n\"\"\n"
        );
    }

    #[test]
    fn our_writer_round_trips_text_nulls_and_counts() {
        let csv = "name;n;note\n*;3;Zürich\n;0;\"a;b\"\n\"\";12;\n";
        let parquet = csv_to_parquet(csv.as_bytes(), b';', Some("n"), Vec::new(), "t").unwrap();
        // Written twice: the same bytes.
        let again = csv_to_parquet(csv.as_bytes(), b';', Some("n"), Vec::new(), "t").unwrap();
        assert_eq!(parquet, again);
        let mut reader = ParquetCsv::new(axum::body::Bytes::from(parquet), b';').unwrap();
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        // An empty cell is written as NULL and read back as the empty cell.
        assert_eq!(text, "name;n;note\n*;3;Zürich\n;0;\"a;b\"\n;12;\n");
    }

    #[test]
    fn unsupported_inputs_are_named() {
        let err = |name: &str| text_of(fixture(name)).unwrap_err();
        assert!(err("nested.parquet").starts_with("column 'tags' is LIST: deid reads top-level"));
        assert!(err("zstd.parquet").starts_with("column 'a' is compressed with ZSTD;"));
        assert!(err("int96.parquet").starts_with("column 'when' is INT96"));
        assert_eq!(
            err("binary.parquet"),
            "column 'blob', row 2: binary value that is not UTF-8 text (invalid byte at offset \
             0): deid reads text, numbers, dates and times"
        );
        let mut truncated = fixture("types.parquet");
        truncated.truncate(truncated.len() - 100);
        assert!(
            err_of(truncated).starts_with("not a readable Parquet file:"),
            "{}",
            err_of(fixture("types.parquet")[..1000].to_vec())
        );
    }

    fn err_of(bytes: Vec<u8>) -> String {
        text_of(bytes).unwrap_err()
    }
}

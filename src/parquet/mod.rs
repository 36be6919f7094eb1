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

use std::path::{Path, PathBuf};

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

/// Whether `path` names Parquet input: a file whose extension is `.parquet` (in any case), or a
/// directory of part files ([`parts`]).
pub fn is_parquet(path: &Path) -> bool {
    path.is_dir() || parquet_extension(path)
}

/// Whether the extension of `path` is `.parquet` (in any case).
pub fn parquet_extension(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// The files of Parquet input at `path`: the file itself, or for a directory (Spark's layout)
/// every `*.parquet` file in it in name order — hidden files and those starting with `_`
/// (`_SUCCESS`, `.crc` checksums) left out. A directory without one is an error.
pub fn parts(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context;
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut parts = Vec::new();
    for entry in
        std::fs::read_dir(path).with_context(|| format!("cannot list {}", path.display()))?
    {
        let entry = entry.with_context(|| format!("cannot list {}", path.display()))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let data_file = !name.starts_with(['.', '_'])
            && parquet_extension(Path::new(name.as_ref()))
            && entry.file_type().is_ok_and(|t| t.is_file());
        if data_file {
            parts.push(entry.path());
        }
    }
    anyhow::ensure!(
        !parts.is_empty(),
        "{}: the directory holds no *.parquet file (a directory is read as the part files \
         Spark writes, part-*.parquet)",
        path.display()
    );
    parts.sort();
    Ok(parts)
}

/// Opens the Parquet input at `path` (a file, or a directory of part files read as one
/// table: [`ParquetInput`]) as CSV text with `delimiter`.
pub fn open(path: &Path, delimiter: u8) -> anyhow::Result<ParquetInput> {
    let parts = parts(path)?;
    let first = open_part(&parts[0], delimiter)?;
    let schema = first.schema();
    for part in &parts[1..] {
        check_schema(
            &schema,
            &parts[0],
            &open_part(part, delimiter)?.schema(),
            part,
        )?;
    }
    Ok(ParquetInput {
        current: first,
        current_path: parts[0].clone(),
        rest: parts.into_iter().skip(1).collect::<Vec<_>>().into_iter(),
        delimiter,
    })
}

/// Opens one Parquet file as CSV text with `delimiter`.
fn open_part(path: &Path, delimiter: u8) -> anyhow::Result<ParquetCsv<std::fs::File>> {
    use anyhow::Context;
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    ParquetCsv::new(file, delimiter).with_context(|| format!("{}", path.display()))
}

/// Refuses a part file whose schema (`found`, of `part`) is not the first one's (`expected`, of
/// `first`), naming the file and the first column that differs.
fn check_schema(
    expected: &[(String, String)],
    first: &Path,
    found: &[(String, String)],
    part: &Path,
) -> anyhow::Result<()> {
    let at = expected.iter().zip(found).position(|(e, f)| e != f);
    let difference = match at {
        Some(i) => format!(
            "column {} is '{}' of type {} where {} has '{}' of type {}",
            i + 1,
            found[i].0,
            found[i].1,
            first.display(),
            expected[i].0,
            expected[i].1
        ),
        None if found.len() > expected.len() => format!(
            "it has a column '{}' that {} does not have",
            found[expected.len()].0,
            first.display()
        ),
        None if found.len() < expected.len() => format!(
            "it has no column '{}' (column {} of {})",
            expected[found.len()].0,
            found.len() + 1,
            first.display()
        ),
        None => return Ok(()),
    };
    anyhow::bail!(
        "{}: {difference}; every part file of a directory must have the same schema",
        part.display()
    )
}

/// Parquet input as CSV text: one file, or the part files of a directory one after the other
/// (one header, then the rows of every part in name order). Errors while reading name the part
/// file.
pub struct ParquetInput {
    current: ParquetCsv<std::fs::File>,
    current_path: PathBuf,
    rest: std::vec::IntoIter<PathBuf>,
    delimiter: u8,
}

impl ParquetInput {
    /// The column names, in file order.
    pub fn column_names(&self) -> Vec<String> {
        self.current.column_names()
    }
}

impl std::io::Read for ParquetInput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = (self.current.read(buf)).map_err(|e| {
                std::io::Error::other(format!("{}: {e}", self.current_path.display()))
            })?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some(next) = self.rest.next() else {
                return Ok(0);
            };
            self.current = open_part(&next, self.delimiter)
                .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
            self.current.skip_header();
            self.current_path = next;
        }
    }
}

/// A Parquet file received as a stream (an upload, released data to verify), spooled to a
/// temporary file — Parquet needs random access, its footer is at the end — and read as CSV
/// text ([`ParquetCsv`]). The file is removed when this is dropped, or when opening it fails.
pub struct SpooledParquet {
    reader: Option<ParquetCsv<std::fs::File>>,
    path: std::path::PathBuf,
}

impl SpooledParquet {
    /// Copies `body` to a new file at `path`, then opens it as CSV text with `delimiter`.
    pub fn new(
        mut body: impl std::io::Read,
        path: std::path::PathBuf,
        delimiter: u8,
    ) -> Result<SpooledParquet, ParquetError> {
        let mut spooled = SpooledParquet { reader: None, path };
        let io = |e: std::io::Error| ParquetError::File(format!("spooling the upload failed: {e}"));
        let mut file = std::fs::File::create(&spooled.path).map_err(io)?;
        std::io::copy(&mut body, &mut file).map_err(io)?;
        drop(file);
        let file = std::fs::File::open(&spooled.path).map_err(io)?;
        spooled.reader = Some(ParquetCsv::new(file, delimiter)?);
        Ok(spooled)
    }
}

impl std::io::Read for SpooledParquet {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.reader {
            Some(reader) => reader.read(buf),
            None => Ok(0),
        }
    }
}

impl Drop for SpooledParquet {
    fn drop(&mut self) {
        self.reader = None;
        let _ = std::fs::remove_file(&self.path);
    }
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

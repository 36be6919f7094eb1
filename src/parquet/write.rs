//! Writing deid's CSV output as Parquet: every column is `optional binary (STRING)` — an empty
//! cell is NULL — except a frequency table's count column, `required int64`. Snappy-compressed,
//! one row group per [`GROUP_ROWS`] rows (or [`GROUP_BYTES`] of text), so memory follows one
//! row group; the same CSV always gives the same bytes.

use std::io::{Read, Write};
use std::sync::Arc;

use ::parquet::basic::{Compression, LogicalType, Repetition, Type as Physical};
use ::parquet::column::writer::ColumnWriter;
use ::parquet::data_type::ByteArray;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::types::Type as SchemaType;
use deid_engine::data::{CsvOptions, CsvScanner};

use super::ParquetError;

/// Rows per row group at most.
pub const GROUP_ROWS: usize = 1 << 17;
/// Bytes of text per row group at most (then a row group ends early).
pub const GROUP_BYTES: usize = 64 << 20;

/// The buffered values of one output column.
enum Buffer {
    /// Text cells; `defs` is 1 for a value, 0 for NULL (an empty cell).
    Text {
        values: Vec<ByteArray>,
        defs: Vec<i16>,
    },
    /// The count column.
    Count(Vec<i64>),
}

/// Reads a CSV as deid writes it (header, `delimiter`) from `input` and writes it to `out` as
/// Parquet; `count_column` (a frequency table's) becomes INT64. Returns `out`.
pub fn csv_to_parquet<R: Read, W: Write + Send>(
    input: R,
    delimiter: u8,
    count_column: Option<&str>,
    out: W,
    source_name: &str,
) -> Result<W, ParquetError> {
    let options = CsvOptions {
        delimiter,
        has_header: true,
    };
    let mut scanner = CsvScanner::table(input, options, source_name).map_err(engine_error)?;
    let names = scanner.columns().to_vec();
    let count = count_column.and_then(|c| names.iter().position(|n| n == c));
    let mut writer = SerializedFileWriter::new(out, schema(&names, count)?, properties())
        .map_err(write_error)?;
    let mut buffers: Vec<Buffer> = (0..names.len())
        .map(|i| match Some(i) == count {
            true => Buffer::Count(Vec::new()),
            false => Buffer::Text {
                values: Vec::new(),
                defs: Vec::new(),
            },
        })
        .collect();
    let (mut rows, mut bytes, mut row) = (0usize, 0usize, 0u64);
    while let Some(record) = scanner.next_record().map_err(engine_error)? {
        row += 1;
        for (i, (cell, buffer)) in record.iter().zip(&mut buffers).enumerate() {
            bytes += cell.len();
            push(buffer, cell, &names[i], row)?;
        }
        rows += 1;
        if rows == GROUP_ROWS || bytes >= GROUP_BYTES {
            write_group(&mut writer, &mut buffers)?;
            (rows, bytes) = (0, 0);
        }
    }
    if rows > 0 {
        write_group(&mut writer, &mut buffers)?;
    }
    let mut out = writer.into_inner().map_err(write_error)?;
    out.flush().map_err(|e| ParquetError::File(e.to_string()))?;
    Ok(out)
}

/// Adds one cell to its column's buffer.
fn push(buffer: &mut Buffer, cell: &str, column: &str, row: u64) -> Result<(), ParquetError> {
    match buffer {
        Buffer::Text { defs, .. } if cell.is_empty() => defs.push(0),
        Buffer::Text { values, defs } => {
            values.push(ByteArray::from(cell.as_bytes().to_vec()));
            defs.push(1);
        }
        Buffer::Count(counts) => {
            let n = cell.parse::<i64>().map_err(|_| ParquetError::Value {
                column: column.to_string(),
                row,
                message: format!("count '{cell}' is not a whole number"),
            })?;
            counts.push(n);
        }
    }
    Ok(())
}

/// Writes the buffered rows as one row group and empties the buffers.
fn write_group<W: Write + Send>(
    writer: &mut SerializedFileWriter<W>,
    buffers: &mut [Buffer],
) -> Result<(), ParquetError> {
    let mut group = writer.next_row_group().map_err(write_error)?;
    let mut buffers = buffers.iter_mut();
    while let Some(mut column) = group.next_column().map_err(write_error)? {
        let buffer = buffers
            .next()
            .ok_or_else(|| ParquetError::File("more Parquet columns than CSV columns".into()))?;
        match (column.untyped(), buffer) {
            (ColumnWriter::ByteArrayColumnWriter(w), Buffer::Text { values, defs }) => {
                w.write_batch(values, Some(defs), None)
                    .map_err(write_error)?;
                values.clear();
                defs.clear();
            }
            (ColumnWriter::Int64ColumnWriter(w), Buffer::Count(counts)) => {
                w.write_batch(counts, None, None).map_err(write_error)?;
                counts.clear();
            }
            _ => return Err(ParquetError::File("a column of an unexpected type".into())),
        }
        column.close().map_err(write_error)?;
    }
    group.close().map_err(write_error)?;
    Ok(())
}

/// The output schema: text columns, and the count column as INT64.
fn schema(names: &[String], count: Option<usize>) -> Result<Arc<SchemaType>, ParquetError> {
    let fields = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let field = if Some(i) == count {
                SchemaType::primitive_type_builder(name, Physical::INT64)
                    .with_repetition(Repetition::REQUIRED)
            } else {
                SchemaType::primitive_type_builder(name, Physical::BYTE_ARRAY)
                    .with_repetition(Repetition::OPTIONAL)
                    .with_logical_type(Some(LogicalType::String))
            };
            field.build().map(Arc::new).map_err(write_error)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let root = SchemaType::group_type_builder("deid")
        .with_fields(fields)
        .build()
        .map_err(write_error)?;
    Ok(Arc::new(root))
}

/// Snappy, and a `created_by` that names deid (the same for every file this version writes).
fn properties() -> Arc<WriterProperties> {
    Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("deid version {}", env!("CARGO_PKG_VERSION")))
            .build(),
    )
}

fn write_error(e: ::parquet::errors::ParquetError) -> ParquetError {
    ParquetError::File(format!("writing Parquet failed: {e}"))
}

fn engine_error(e: deid_engine::EngineError) -> ParquetError {
    ParquetError::File(e.to_string())
}

/// A `Write` for CSV text that a thread converts to a Parquet file as it arrives (through a
/// pipe, so memory follows one row group): what `deid anonymize --output x.parquet` and
/// `deid apply --output x.parquet` write into. [`ParquetSink::finish`] waits for the file.
pub struct ParquetSink {
    pipe: Option<std::io::PipeWriter>,
    thread: Option<std::thread::JoinHandle<Result<(), ParquetError>>>,
}

impl ParquetSink {
    /// Starts converting into `file` (CSV with `delimiter`; `count_column` as INT64).
    pub fn new(
        file: std::fs::File,
        delimiter: u8,
        count_column: Option<String>,
        name: String,
    ) -> std::io::Result<ParquetSink> {
        let (reader, writer) = std::io::pipe()?;
        let thread = std::thread::Builder::new()
            .name("parquet-writer".into())
            .spawn(move || {
                let input = std::io::BufReader::with_capacity(1 << 16, reader);
                let out = std::io::BufWriter::with_capacity(1 << 16, file);
                csv_to_parquet(input, delimiter, count_column.as_deref(), out, &name)?;
                Ok(())
            })?;
        Ok(ParquetSink {
            pipe: Some(writer),
            thread: Some(thread),
        })
    }

    /// Ends the CSV and waits until the Parquet file is written.
    pub fn finish(mut self) -> Result<(), ParquetError> {
        self.pipe = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ParquetError::File("the Parquet writer failed".into())),
            None => Ok(()),
        }
    }

    /// The converter's error after a failed write (it stopped reading the pipe).
    fn failure(&mut self) -> std::io::Error {
        self.pipe = None;
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Err(e))) => std::io::Error::other(e),
            _ => std::io::Error::other("the Parquet writer stopped"),
        }
    }
}

impl Write for ParquetSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let result = match &mut self.pipe {
            Some(p) => p.write(data),
            None => return Err(std::io::Error::other("the Parquet output is closed")),
        };
        result.map_err(|_| self.failure())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

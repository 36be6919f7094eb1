//! Reading Parquet as the CSV text the rest of deid reads: [`ParquetCsv`] checks the schema
//! once (top-level primitive columns of supported types, supported codecs), then converts row
//! group by row group, a batch of rows at a time, each value by the rule of [`super::text`].
//! Memory follows one batch, never the file.

use std::io::Read;

use ::parquet::basic::Type as Physical;
use ::parquet::basic::{Compression, ConvertedType, LogicalType, Repetition, TimeUnit};
use ::parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use ::parquet::data_type::DataType;
use ::parquet::file::reader::{ChunkReader, FileReader, SerializedFileReader};
use ::parquet::schema::types::{ColumnDescriptor, Type as SchemaType};

use super::ParquetError;
use super::text::{self, Unit};

/// Rows converted at a time.
const BATCH: usize = 4096;

/// How the values of one column become text (decided from its schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Boolean,
    /// INT32 or INT64, signed.
    Signed,
    /// INT32 read as `u32`.
    Unsigned32,
    /// INT64 read as `u64`.
    Unsigned64,
    /// DECIMAL of any physical type, with its scale.
    Decimal(u32),
    /// INT32 days since 1970-01-01.
    Date,
    Time(Unit),
    Timestamp(Unit),
    Float,
    Double,
    /// UTF-8 text (STRING, ENUM, JSON, or unannotated binary that is valid UTF-8).
    Text,
    /// FIXED_LEN_BYTE_ARRAY(16) UUID.
    Uuid,
}

/// One column: its name, its rule and its definition level of a present value.
struct Column {
    name: String,
    rule: Rule,
    max_def: i16,
}

/// A Parquet file read as CSV text (a header, then one record per row, `delimiter`-separated,
/// quoted where needed, LF-terminated), row group by row group.
pub struct ParquetCsv<R: ChunkReader + 'static> {
    file: SerializedFileReader<R>,
    columns: Vec<Column>,
    /// The next row group to open.
    next_group: usize,
    /// The open row group's column readers and rows left.
    group: Option<(Vec<ColumnReader>, usize)>,
    /// Data rows converted so far (for error messages: 1 = the first row).
    rows_done: u64,
    /// The cells of the current batch, column by column (reused).
    cells: Vec<Vec<String>>,
    delimiter: u8,
    /// Converted text not yet read, from `pos`.
    out: Vec<u8>,
    pos: usize,
}

impl<R: ChunkReader + 'static> ParquetCsv<R> {
    /// Opens `input` (a file or bytes) and checks its schema and codecs; the header is the
    /// first thing read.
    pub fn new(input: R, delimiter: u8) -> Result<Self, ParquetError> {
        let file = SerializedFileReader::new(input)
            .map_err(|e| ParquetError::File(format!("not a readable Parquet file: {e}")))?;
        let columns = schema_columns(&file)?;
        check_row_groups(&file, &columns)?;
        let mut out = Vec::new();
        write_record(&mut out, delimiter, columns.iter().map(|c| c.name.as_str()));
        let cells = columns.iter().map(|_| Vec::new()).collect();
        Ok(ParquetCsv {
            file,
            columns,
            next_group: 0,
            group: None,
            rows_done: 0,
            cells,
            delimiter,
            out,
            pos: 0,
        })
    }

    /// The column names, in file order.
    pub fn column_names(&self) -> Vec<String> {
        self.columns.iter().map(|c| c.name.clone()).collect()
    }

    /// The schema: every column's name and type, as messages name them, in file order.
    pub fn schema(&self) -> Vec<(String, String)> {
        let descriptor = self.file.metadata().file_metadata().schema_descr();
        (descriptor.columns().iter())
            .map(|c| (c.name().to_string(), type_name(c)))
            .collect()
    }

    /// Skips the header: the next read starts with the first data row.
    pub fn skip_header(&mut self) {
        self.pos = self.out.len();
    }

    /// Converts the next batch of rows into `out`; `false` at the end of the file.
    fn next_batch(&mut self) -> Result<bool, ParquetError> {
        loop {
            if let Some((_, 0)) = self.group {
                self.group = None;
            }
            if self.group.is_some() {
                break;
            }
            if self.next_group >= self.file.num_row_groups() {
                return Ok(false);
            }
            let group = self
                .file
                .get_row_group(self.next_group)
                .map_err(file_error)?;
            let rows = group.metadata().num_rows().max(0) as usize;
            let readers = (0..self.columns.len())
                .map(|i| group.get_column_reader(i))
                .collect::<Result<Vec<_>, _>>()
                .map_err(file_error)?;
            self.next_group += 1;
            self.group = Some((readers, rows));
        }
        let Some((readers, left)) = &mut self.group else {
            return Ok(false);
        };
        let n = (*left).min(BATCH);
        for ((reader, column), cells) in readers.iter_mut().zip(&self.columns).zip(&mut self.cells)
        {
            read_cells(reader, column, n, cells, self.rows_done)?;
        }
        *left -= n;
        self.out.clear();
        self.pos = 0;
        for row in 0..n {
            let record = self.cells.iter().map(|c| c[row].as_str());
            write_record(&mut self.out, self.delimiter, record);
        }
        self.rows_done += n as u64;
        Ok(true)
    }
}

impl<R: ChunkReader + 'static> Read for ParquetCsv<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.out.len() {
            if !self.next_batch().map_err(std::io::Error::other)? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.out.len() - self.pos);
        buf[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Appends one CSV record: a field is quoted when it holds the delimiter, a quote, CR or LF
/// (quotes doubled), a record of one empty field is `""`, and LF ends the record.
fn write_record<'a>(out: &mut Vec<u8>, delimiter: u8, fields: impl Iterator<Item = &'a str>) {
    let start = out.len();
    for (i, field) in fields.enumerate() {
        if i > 0 {
            out.push(delimiter);
        }
        let quote = field
            .bytes()
            .any(|b| b == delimiter || matches!(b, b'"' | b'\r' | b'\n'));
        if quote {
            out.push(b'"');
            for b in field.bytes() {
                if b == b'"' {
                    out.push(b'"');
                }
                out.push(b);
            }
            out.push(b'"');
        } else {
            out.extend_from_slice(field.as_bytes());
        }
    }
    if out.len() == start {
        out.extend_from_slice(b"\"\"");
    }
    out.push(b'\n');
}

fn file_error(e: ::parquet::errors::ParquetError) -> ParquetError {
    ParquetError::File(format!("the Parquet file cannot be read: {e}"))
}

/// The columns of the file's schema, each with its rule; nested or unsupported columns are
/// errors naming them.
fn schema_columns<R: ChunkReader + 'static>(
    file: &SerializedFileReader<R>,
) -> Result<Vec<Column>, ParquetError> {
    let schema = file.metadata().file_metadata().schema_descr();
    for field in schema.root_schema().get_fields() {
        if field.is_group() {
            return Err(unsupported(field.name(), nested_kind(field), NESTED));
        }
        if field.get_basic_info().repetition() == Repetition::REPEATED {
            return Err(unsupported(field.name(), "a repeated column", NESTED));
        }
    }
    if schema.num_columns() == 0 {
        return Err(ParquetError::File("the Parquet file has no columns".into()));
    }
    schema
        .columns()
        .iter()
        .map(|c| {
            Ok(Column {
                name: c.name().to_string(),
                rule: rule_of(c)?,
                max_def: c.max_def_level(),
            })
        })
        .collect()
}

/// What deid reads, for messages about columns it cannot.
const NESTED: &str = "deid reads top-level columns of primitive types only (see \
     docs/definitions.md §8): flatten the column first";

/// The kind of a nested field (`LIST`, `MAP` or `STRUCT`).
fn nested_kind(field: &SchemaType) -> &'static str {
    let info = field.get_basic_info();
    match (info.logical_type_ref(), info.converted_type()) {
        (Some(LogicalType::List), _) | (_, ConvertedType::LIST) => "LIST",
        (Some(LogicalType::Map), _) | (_, ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE) => {
            "MAP"
        }
        _ => "STRUCT",
    }
}

/// An unsupported column: its name, its type and what is supported.
fn unsupported(column: &str, kind: &str, supported: &str) -> ParquetError {
    ParquetError::Unsupported {
        column: column.to_string(),
        kind: kind.to_string(),
        supported: supported.to_string(),
    }
}

/// The types deid reads.
const SUPPORTED: &str = "supported: BOOLEAN, integers (INT32, INT64, any INTEGER width, \
     signed or unsigned), DECIMAL, FLOAT, DOUBLE, DATE, TIME, TIMESTAMP, STRING/UTF8, ENUM, \
     JSON, UUID and binary holding UTF-8 text";

/// The rule of a primitive column (docs/definitions.md §8).
fn rule_of(c: &ColumnDescriptor) -> Result<Rule, ParquetError> {
    let physical = c.physical_type();
    let logical = c.logical_type_ref();
    let converted = c.converted_type();
    let scale = c.type_scale().max(0) as u32;
    let rule = match (physical, &logical, converted) {
        (_, Some(LogicalType::Decimal(d)), _) => Some(Rule::Decimal(d.scale.max(0) as u32)),
        (_, None, ConvertedType::DECIMAL) => Some(Rule::Decimal(scale)),
        (Physical::BOOLEAN, _, _) => Some(Rule::Boolean),
        (Physical::INT32, Some(LogicalType::Date), _)
        | (Physical::INT32, None, ConvertedType::DATE) => Some(Rule::Date),
        (Physical::INT32 | Physical::INT64, Some(LogicalType::Time(t)), _) => {
            Some(Rule::Time(unit_of(&t.unit)))
        }
        (Physical::INT32, None, ConvertedType::TIME_MILLIS) => Some(Rule::Time(Unit::Millis)),
        (Physical::INT64, None, ConvertedType::TIME_MICROS) => Some(Rule::Time(Unit::Micros)),
        (Physical::INT64, Some(LogicalType::Timestamp(t)), _) => {
            Some(Rule::Timestamp(unit_of(&t.unit)))
        }
        (Physical::INT64, None, ConvertedType::TIMESTAMP_MILLIS) => {
            Some(Rule::Timestamp(Unit::Millis))
        }
        (Physical::INT64, None, ConvertedType::TIMESTAMP_MICROS) => {
            Some(Rule::Timestamp(Unit::Micros))
        }
        (Physical::INT32, Some(LogicalType::Integer(i)), _) if !i.is_signed => {
            Some(Rule::Unsigned32)
        }
        (Physical::INT64, Some(LogicalType::Integer(i)), _) if !i.is_signed => {
            Some(Rule::Unsigned64)
        }
        (
            Physical::INT32,
            None,
            ConvertedType::UINT_8 | ConvertedType::UINT_16 | ConvertedType::UINT_32,
        ) => Some(Rule::Unsigned32),
        (Physical::INT64, None, ConvertedType::UINT_64) => Some(Rule::Unsigned64),
        (Physical::INT32 | Physical::INT64, Some(LogicalType::Integer(_)) | None, _) => {
            Some(Rule::Signed)
        }
        (Physical::FLOAT, None, _) => Some(Rule::Float),
        (Physical::DOUBLE, None, _) => Some(Rule::Double),
        (
            Physical::BYTE_ARRAY,
            Some(LogicalType::String | LogicalType::Enum | LogicalType::Json) | None,
            _,
        ) if !matches!(converted, ConvertedType::BSON | ConvertedType::INTERVAL) => {
            Some(Rule::Text)
        }
        (Physical::FIXED_LEN_BYTE_ARRAY, Some(LogicalType::Uuid), _) if c.type_length() == 16 => {
            Some(Rule::Uuid)
        }
        _ => None,
    };
    rule.ok_or_else(|| unsupported(c.name(), &type_name(c), SUPPORTED))
}

fn unit_of(unit: &TimeUnit) -> Unit {
    match unit {
        TimeUnit::MILLIS => Unit::Millis,
        TimeUnit::MICROS => Unit::Micros,
        TimeUnit::NANOS => Unit::Nanos,
    }
}

/// The type of a column as messages name it: the physical type and its annotation.
fn type_name(c: &ColumnDescriptor) -> String {
    match (c.logical_type_ref(), c.converted_type()) {
        (Some(l), _) => format!("{} ({l:?})", c.physical_type()),
        (None, ConvertedType::NONE) => c.physical_type().to_string(),
        (None, conv) => format!("{} ({conv})", c.physical_type()),
    }
}

/// Checks every row group: the file's columns, codecs deid can decompress.
fn check_row_groups<R: ChunkReader + 'static>(
    file: &SerializedFileReader<R>,
    columns: &[Column],
) -> Result<(), ParquetError> {
    for (g, group) in file.metadata().row_groups().iter().enumerate() {
        if group.num_columns() != columns.len() {
            return Err(ParquetError::File(format!(
                "row group {} has {} columns, the schema {}: one schema per file is expected",
                g + 1,
                group.num_columns(),
                columns.len()
            )));
        }
        for (chunk, column) in group.columns().iter().zip(columns) {
            let codec = chunk.compression();
            if !matches!(
                codec,
                Compression::UNCOMPRESSED
                    | Compression::SNAPPY
                    | Compression::GZIP(_)
                    | Compression::LZ4
                    | Compression::LZ4_RAW
            ) {
                return Err(ParquetError::Codec {
                    column: column.name.clone(),
                    codec: codec_name(codec),
                });
            }
        }
    }
    Ok(())
}

/// A codec's name as Parquet writers call it.
fn codec_name(codec: Compression) -> String {
    let name = format!("{codec:?}");
    name.split('(').next().unwrap_or(&name).to_string()
}

/// Reads `n` rows of one column and writes their text into `cells` (`n` strings; a NULL is
/// the empty string).
fn read_cells(
    reader: &mut ColumnReader,
    column: &Column,
    n: usize,
    cells: &mut Vec<String>,
    rows_done: u64,
) -> Result<(), ParquetError> {
    cells.resize_with(n, String::new);
    cells.truncate(n);
    cells.iter_mut().for_each(String::clear);
    let mut put = Cells {
        cells,
        column,
        rows_done,
    };
    match reader {
        ColumnReader::BoolColumnReader(r) => put.fill(r, n, |s, v| {
            text::boolean(s, *v);
            Ok(())
        }),
        ColumnReader::Int32ColumnReader(r) => put.fill(r, n, |s, v| int32(s, *v, column.rule)),
        ColumnReader::Int64ColumnReader(r) => put.fill(r, n, |s, v| int64(s, *v, column.rule)),
        ColumnReader::FloatColumnReader(r) => put.fill(r, n, |s, v| {
            text::float(s, *v);
            Ok(())
        }),
        ColumnReader::DoubleColumnReader(r) => put.fill(r, n, |s, v| {
            text::double(s, *v);
            Ok(())
        }),
        ColumnReader::ByteArrayColumnReader(r) => {
            put.fill(r, n, |s, v| bytes(s, v.data(), column.rule))
        }
        ColumnReader::FixedLenByteArrayColumnReader(r) => {
            put.fill(r, n, |s, v| bytes(s, v.data(), column.rule))
        }
        ColumnReader::Int96ColumnReader(_) => Err(unsupported(&column.name, "INT96", SUPPORTED)),
    }
}

/// The cells of one column in a batch.
struct Cells<'a> {
    cells: &'a mut [String],
    column: &'a Column,
    rows_done: u64,
}

impl Cells<'_> {
    /// Reads `n` records of `reader` and writes each present value with `write`.
    fn fill<T: DataType>(
        &mut self,
        reader: &mut ColumnReaderImpl<T>,
        n: usize,
        write: impl Fn(&mut String, &T::T) -> Result<(), String>,
    ) -> Result<(), ParquetError> {
        let mut values = Vec::with_capacity(n);
        let mut defs = Vec::with_capacity(n);
        let mut records = 0;
        while records < n {
            let (r, _, _) = reader
                .read_records(n - records, Some(&mut defs), None, &mut values)
                .map_err(file_error)?;
            if r == 0 {
                return Err(ParquetError::File(format!(
                    "column '{}' ends before its row group's {n} rows",
                    self.column.name
                )));
            }
            records += r;
        }
        let mut next = values.iter();
        for (row, cell) in self.cells.iter_mut().enumerate() {
            let present = self.column.max_def == 0 || defs[row] == self.column.max_def;
            if !present {
                continue;
            }
            let Some(value) = next.next() else {
                return Err(ParquetError::File(format!(
                    "column '{}' has fewer values than rows",
                    self.column.name
                )));
            };
            write(cell, value).map_err(|message| ParquetError::Value {
                column: self.column.name.clone(),
                row: self.rows_done + row as u64 + 1,
                message,
            })?;
        }
        Ok(())
    }
}

fn int32(out: &mut String, v: i32, rule: Rule) -> Result<(), String> {
    match rule {
        Rule::Unsigned32 => text::integer(out, v as u32),
        Rule::Date => text::date(out, i64::from(v)).map_err(|e| e.0)?,
        Rule::Decimal(scale) => text::decimal(out, i128::from(v), scale),
        Rule::Time(unit) => text::time(out, i64::from(v), unit).map_err(|e| e.0)?,
        _ => text::integer(out, v),
    }
    Ok(())
}

fn int64(out: &mut String, v: i64, rule: Rule) -> Result<(), String> {
    match rule {
        Rule::Unsigned64 => text::integer(out, v as u64),
        Rule::Decimal(scale) => text::decimal(out, i128::from(v), scale),
        Rule::Time(unit) => text::time(out, v, unit).map_err(|e| e.0)?,
        Rule::Timestamp(unit) => text::timestamp(out, v, unit).map_err(|e| e.0)?,
        _ => text::integer(out, v),
    }
    Ok(())
}

fn bytes(out: &mut String, data: &[u8], rule: Rule) -> Result<(), String> {
    match rule {
        Rule::Decimal(scale) => {
            let v = text::decimal_bytes(data).ok_or_else(|| {
                format!(
                    "a DECIMAL of {} bytes is wider than 16 bytes (precision 38)",
                    data.len()
                )
            })?;
            text::decimal(out, v, scale);
        }
        Rule::Uuid => text::uuid(out, data),
        _ => match std::str::from_utf8(data) {
            Ok(s) => out.push_str(s),
            Err(e) => {
                return Err(format!(
                    "binary value that is not UTF-8 text (invalid byte at offset {}): deid \
                     reads text, numbers, dates and times",
                    e.valid_up_to()
                ));
            }
        },
    }
    Ok(())
}

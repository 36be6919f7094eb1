//! The one CSV scanner of the engine. It owns every rule about reading CSV input, so that the
//! table import ([`Table::read_csv`](super::Table::read_csv)), the hierarchy import
//! ([`Hierarchy::read_csv`](crate::hierarchy::Hierarchy::read_csv)), the streaming profile and
//! the column scan ([`crate::profile`]) read a file the same way:
//!
//! - the delimiter is given, `"` quotes, CRLF or LF ends a record, empty lines are skipped;
//! - a quoted field must be closed: one still open at the end of the input (which would
//!   swallow every later record into one cell) is an error naming its record;
//! - a UTF-8 byte order mark is removed from the first field of the first record;
//! - every field must be valid UTF-8 ([`EngineError::InvalidUtf8`] names record and column) and
//!   free of NUL bytes (a binary file or a broken export; [`EngineError::Csv`] names them too);
//! - an input without any record is [`EngineError::EmptyInput`];
//! - tables ([`CsvScanner::table`]): the header's names are non-empty and unique (without a
//!   header the columns are named `column1`, `column2`, …), every record has as many fields as
//!   the header ([`EngineError::RaggedRow`] with the record number, header = 1), and at least
//!   one data row follows the header;
//! - plain rows ([`CsvScanner::rows`], hierarchy tables): no header, any width (the caller
//!   checks the shape with its own errors).
//!
//! Records are handed out one at a time as `&str` fields; nothing holds more than one record.

use std::io::Read;

use csv::{ByteRecord, StringRecord};

use crate::data::CsvOptions;
use crate::error::{EngineError, Result};

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads CSV records with the project's rules (see the module documentation).
pub struct CsvScanner<R: Read> {
    reader: csv::Reader<QuoteCheck<R>>,
    source_name: String,
    /// Read buffer: the record just read, before its UTF-8 check.
    raw: ByteRecord,
    /// The record handed out last (valid UTF-8).
    record: StringRecord,
    /// Column names (tables), empty for plain rows.
    columns: Vec<String>,
    /// Whether records must have as many fields as there are columns (tables).
    table: bool,
    /// The first record, read at opening, is in `raw` and is the next one to hand out (tables
    /// without a header, plain rows).
    pending: bool,
    /// 1-based number of the last record read (header = 1).
    record_no: u64,
    /// Data records handed out so far.
    data_rows: u64,
}

impl<R: Read> std::fmt::Debug for CsvScanner<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvScanner")
            .field("source_name", &self.source_name)
            .field("columns", &self.columns)
            .field("record_no", &self.record_no)
            .field("data_rows", &self.data_rows)
            .finish_non_exhaustive()
    }
}

/// One record: its fields as UTF-8 strings (the byte order mark already removed).
#[derive(Debug, Clone, Copy)]
pub struct Record<'a>(&'a StringRecord);

impl<'a> Record<'a> {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if the record has no field (never the case for records read from a file).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Field `index` (0-based), if the record has it.
    pub fn get(&self, index: usize) -> Option<&'a str> {
        self.0.get(index)
    }

    /// All fields in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter()
    }
}

impl<R: Read> CsvScanner<R> {
    /// Opens a table: reads and checks the header (or, with `has_header: false`, names the
    /// columns `column1`, `column2`, … after the first record, which stays the first data
    /// record). `source_name` names the input in error messages.
    pub fn table(input: R, options: CsvOptions, source_name: &str) -> Result<Self> {
        let mut scanner = Self::open(input, options.delimiter, source_name, true)?;
        if options.has_header {
            let mut columns: Vec<String> = Vec::with_capacity(scanner.raw.len());
            for (index, raw) in scanner.raw.iter().enumerate() {
                let name = header_name(source_name, index, raw, &columns)?;
                columns.push(name);
            }
            scanner.columns = columns;
        } else {
            scanner.columns = (1..=scanner.raw.len())
                .map(|i| format!("column{i}"))
                .collect();
            scanner.pending = true;
        }
        Ok(scanner)
    }

    /// Opens plain rows: no header, no width rule (hierarchy tables). `source_name` names the
    /// input in error messages.
    pub fn rows(input: R, delimiter: u8, source_name: &str) -> Result<Self> {
        let mut scanner = Self::open(input, delimiter, source_name, false)?;
        scanner.pending = true;
        Ok(scanner)
    }

    /// A table scanner over `input`, the rest of a table whose header (`columns`) and first
    /// `records` data records were read elsewhere ([`super::blocks`]): its records and errors
    /// are numbered as in the whole table.
    pub(crate) fn resume(
        input: R,
        delimiter: u8,
        source_name: &str,
        columns: Vec<String>,
        records: u64,
    ) -> Self {
        let reader = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            .flexible(true)
            .from_reader(QuoteCheck::new(input, delimiter));
        CsvScanner {
            reader,
            source_name: source_name.to_string(),
            raw: ByteRecord::new(),
            record: StringRecord::new(),
            columns,
            table: true,
            pending: false,
            record_no: records + 1,
            data_rows: records,
        }
    }

    /// Reads the first record into `raw` (byte order mark removed, UTF-8 not checked yet):
    /// [`EngineError::EmptyInput`] if there is none.
    fn open(input: R, delimiter: u8, source_name: &str, table: bool) -> Result<Self> {
        let reader = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            .flexible(true)
            .from_reader(QuoteCheck::new(input, delimiter));
        let mut scanner = CsvScanner {
            reader,
            source_name: source_name.to_string(),
            raw: ByteRecord::new(),
            record: StringRecord::new(),
            columns: Vec::new(),
            table,
            pending: false,
            record_no: 0,
            data_rows: 0,
        };
        let more = scanner
            .reader
            .read_byte_record(&mut scanner.raw)
            .map_err(|e| csv_error(source_name, e))?;
        if !more {
            return Err(EngineError::EmptyInput {
                source_name: scanner.source_name,
            });
        }
        scanner.record_no = 1;
        scanner.refuse_open_quote()?;
        if scanner.raw.get(0).is_some_and(|f| f.starts_with(BOM)) {
            scanner.raw = scanner
                .raw
                .iter()
                .enumerate()
                .map(|(i, f)| if i == 0 { &f[BOM.len()..] } else { f })
                .collect();
        }
        Ok(scanner)
    }

    /// The column names (header or `column<N>`); empty for plain rows.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Name of the input, as used in error messages.
    pub fn source_name(&self) -> &str {
        &self.source_name
    }

    /// 1-based number of the last record read (the header is record 1).
    pub fn record_number(&self) -> u64 {
        self.record_no
    }

    /// Number of data records handed out so far.
    pub fn data_rows(&self) -> u64 {
        self.data_rows
    }

    /// After a record was read: if the input ended inside a quoted field, the error naming the
    /// record where that field opens (1-based, header = 1: the last record, which the parser
    /// reads to the end of the input).
    fn refuse_open_quote(&mut self) -> Result<()> {
        if !self.reader.get_ref().ended_quoted() {
            return Ok(());
        }
        while self
            .reader
            .read_byte_record(&mut self.raw)
            .map_err(|e| csv_error(&self.source_name, e))?
        {
            self.record_no += 1;
        }
        Err(EngineError::Csv {
            source_name: self.source_name.clone(),
            message: format!(
                "row {}: a quoted field is not closed: its opening '\"' has no closing '\"' \
                 before the end of the file",
                self.record_no
            ),
        })
    }

    /// The next data record, `None` at the end of the input. Errors, in this order: CSV
    /// syntax, a record of the wrong width (tables), invalid UTF-8 (the first bad field), and
    /// at the end a table with a header but no data rows.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>> {
        if self.pending {
            self.pending = false;
        } else {
            let more = self
                .reader
                .read_byte_record(&mut self.raw)
                .map_err(|e| csv_error(&self.source_name, e))?;
            if !more {
                if self.table && self.data_rows == 0 {
                    return Err(EngineError::Csv {
                        source_name: self.source_name.clone(),
                        message: "the file has a header but no data rows".to_string(),
                    });
                }
                return Ok(None);
            }
            self.record_no += 1;
            self.refuse_open_quote()?;
        }
        if self.table {
            let (expected, found) = (self.columns.len(), self.raw.len());
            super::check_width(&self.source_name, self.record_no, expected, found)?;
        }
        if self.raw.as_slice().contains(&0) {
            let column = self.raw.iter().position(|f| f.contains(&0)).unwrap_or(0) + 1;
            return Err(nul_error(&self.source_name, self.record_no, column));
        }
        // Swap the buffers: the checked record becomes `record`, the previous one's storage
        // is reused for reading.
        let spare = std::mem::take(&mut self.record).into_byte_record();
        let raw = std::mem::replace(&mut self.raw, spare);
        match StringRecord::from_byte_record(raw) {
            Ok(record) => self.record = record,
            Err(err) => {
                return Err(EngineError::InvalidUtf8 {
                    source_name: self.source_name.clone(),
                    row: self.record_no,
                    column: err.utf8_error().field() + 1,
                });
            }
        }
        self.data_rows += 1;
        Ok(Some(Record(&self.record)))
    }
}

/// Where the CSV grammar stands after the bytes read so far, as far as quotes matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quoting {
    /// At the start of a field (or of a record).
    FieldStart,
    /// Inside a field that did not start with a quote (quotes in it are literal).
    Unquoted,
    /// Inside a quoted field.
    Quoted,
    /// After a quote inside a quoted field: it closed the field, or escapes the next quote.
    QuoteInQuoted,
}

/// A reader that follows the quoting of the CSV it passes on (the grammar of the `csv` crate's
/// reader with its defaults: `"` quotes, `""` escapes, CR or LF ends a record), so that an input
/// ending inside a quoted field — which the parser takes as closed there — can be refused.
/// Text without quotes is passed through with one scan for `"`.
struct QuoteCheck<R> {
    inner: R,
    delimiter: u8,
    state: Quoting,
    ended: bool,
}

impl<R> QuoteCheck<R> {
    fn new(inner: R, delimiter: u8) -> Self {
        QuoteCheck {
            inner,
            delimiter,
            state: Quoting::FieldStart,
            ended: false,
        }
    }

    /// True once the input has ended inside a quoted field.
    fn ended_quoted(&self) -> bool {
        self.ended && self.state == Quoting::Quoted
    }

    fn follow(&mut self, bytes: &[u8]) {
        let Some(&last) = bytes.last() else { return };
        let ends_field = |b: u8| b == self.delimiter || b == b'\n' || b == b'\r';
        if self.state != Quoting::Quoted && !bytes.contains(&b'"') {
            self.state = if ends_field(last) {
                Quoting::FieldStart
            } else {
                Quoting::Unquoted
            };
            return;
        }
        for &b in bytes {
            self.state = match self.state {
                Quoting::FieldStart if b == b'"' => Quoting::Quoted,
                Quoting::Quoted if b == b'"' => Quoting::QuoteInQuoted,
                Quoting::Quoted => Quoting::Quoted,
                Quoting::QuoteInQuoted if b == b'"' => Quoting::Quoted,
                _ if ends_field(b) => Quoting::FieldStart,
                _ => Quoting::Unquoted,
            };
        }
    }
}

impl<R: Read> Read for QuoteCheck<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.ended = true;
        }
        self.follow(&buf[..n]);
        Ok(n)
    }
}

/// Converts a CSV parser error into an [`EngineError::Csv`] that names the input and position.
fn csv_error(source_name: &str, err: csv::Error) -> EngineError {
    let message = match err.position() {
        Some(pos) => format!("line {}: {}", pos.line(), err),
        None => err.to_string(),
    };
    EngineError::Csv {
        source_name: source_name.to_string(),
        message,
    }
}

/// The delimiter of a CSV whose delimiter was not given: the most frequent of `,`, `;`, tab and
/// `|` in the first line of `text` (outside double quotes), `default` on ties and when none
/// occurs.
pub fn sniff_delimiter(text: &[u8], default: u8) -> u8 {
    let first = text.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let mut counts = [(b',', 0usize), (b';', 0), (b'\t', 0), (b'|', 0)];
    let mut quoted = false;
    for &b in first {
        if b == b'"' {
            quoted = !quoted;
        } else if !quoted && let Some(c) = counts.iter_mut().find(|(d, _)| *d == b) {
            c.1 += 1;
        }
    }
    let best = counts.iter().map(|&(_, n)| n).max().unwrap_or(0);
    let default_count = counts
        .iter()
        .find(|(d, _)| *d == default)
        .map_or(0, |c| c.1);
    if best == 0 || default_count == best {
        return default;
    }
    counts
        .iter()
        .find(|(_, n)| *n == best)
        .map_or(default, |c| c.0)
}

/// The delimiter of rows of equal width whose delimiter was not given (hierarchy tables): of
/// `;`, `,`, tab and `|`, the one that splits each of the first [`SNIFFED_ROWS`] records
/// (quotes respected) into the same number of fields, at least two; if several do, the
/// [`sniff_delimiter`] of the first line among them; if none does, [`sniff_delimiter`].
pub fn sniff_rows_delimiter(text: &[u8], default: u8) -> u8 {
    let even: Vec<u8> = [b';', b',', b'\t', b'|']
        .into_iter()
        .filter(|&d| even_width(text, d))
        .collect();
    let first = sniff_delimiter(text, default);
    match even.as_slice() {
        [] => first,
        [only] => *only,
        several if several.contains(&first) => first,
        several if several.contains(&default) => default,
        several => several[0],
    }
}

/// Records [`sniff_rows_delimiter`] reads.
pub const SNIFFED_ROWS: usize = 1000;

/// True if the first [`SNIFFED_ROWS`] records of `text` split at `delimiter` all have the same
/// number of fields, at least two.
fn even_width(text: &[u8], delimiter: u8) -> bool {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .from_reader(text);
    let mut record = ByteRecord::new();
    let mut width = None;
    for _ in 0..SNIFFED_ROWS {
        match reader.read_byte_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(_) => return false,
        }
        if *width.get_or_insert(record.len()) != record.len() {
            return false;
        }
    }
    width.is_some_and(|w| w >= 2)
}

/// The error for a NUL byte in record `row`, column `column` (both 1-based).
fn nul_error(source_name: &str, row: u64, column: usize) -> EngineError {
    EngineError::Csv {
        source_name: source_name.to_string(),
        message: format!("row {row}, column {column}: the value contains a NUL byte"),
    }
}

/// The name of header field `index`, checked to be valid UTF-8, non-empty and not among `taken`.
fn header_name(source_name: &str, index: usize, raw: &[u8], taken: &[String]) -> Result<String> {
    let name = std::str::from_utf8(raw).map_err(|_| EngineError::InvalidUtf8 {
        source_name: source_name.to_string(),
        row: 1,
        column: index + 1,
    })?;
    if name.is_empty() {
        return Err(EngineError::Csv {
            source_name: source_name.to_string(),
            message: format!("header column {} has an empty name", index + 1),
        });
    }
    if name.contains('\0') {
        return Err(nul_error(source_name, 1, index + 1));
    }
    if taken.iter().any(|t| t == name) {
        return Err(EngineError::DuplicateColumn {
            name: name.to_string(),
        });
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn delimiters_are_sniffed_from_the_first_line() {
        use super::sniff_delimiter;
        assert_eq!(sniff_delimiter(b"sex;age;race\n1,2;3;4\n", b','), b';');
        assert_eq!(sniff_delimiter(b"a,b,c;d\n", b';'), b',');
        assert_eq!(sniff_delimiter(b"a\tb\n", b','), b'\t');
        assert_eq!(sniff_delimiter(b"single\n", b','), b',');
        assert_eq!(sniff_delimiter(b"single\n", b';'), b';');
        assert_eq!(
            sniff_delimiter(b"a;b,c\n", b','),
            b',',
            "ties keep the default"
        );
        assert_eq!(
            sniff_delimiter(b"\"x;y;z\",b\n", b','),
            b',',
            "quoted text is not counted"
        );
    }

    #[test]
    fn the_delimiter_of_rows_is_the_one_that_gives_them_one_width() {
        use super::sniff_rows_delimiter;
        // The first line has more commas (a value with commas), every row one ';'.
        assert_eq!(sniff_rows_delimiter(b"x,y,z;L\n18;L1\n19;L1\n", b';'), b';');
        assert_eq!(sniff_rows_delimiter(b"1,5;a,b;*\n2;a;*\n", b';'), b';');
        // Commas everywhere, values with ';' in quotes.
        assert_eq!(sniff_rows_delimiter(b"a,\"x;y;z\",*\nb,c,*\n", b';'), b',');
        // Both give one width: the first line decides, ';' on ties.
        assert_eq!(sniff_rows_delimiter(b"a;b,c\nd;e,f\n", b';'), b';');
        assert_eq!(sniff_rows_delimiter(b"a,b,c;d\ne,f,g;h\n", b';'), b',');
        assert_eq!(sniff_rows_delimiter(b"a\tb\nc\td\n", b';'), b'\t');
        // Neither (one column, or ragged either way): the first line decides.
        assert_eq!(sniff_rows_delimiter(b"single\nother\n", b';'), b';');
        assert_eq!(sniff_rows_delimiter(b"a,b,c\nd;e\n", b';'), b',');
    }

    #[test]
    fn nul_bytes_are_refused_with_their_position() {
        use crate::{CsvOptions, EngineError, Table};
        for (text, row, column) in [
            ("a,b\n1,2\n3,x\0y\n", 3, 2),
            ("a,b\x00\n1,2\n", 1, 2),
            ("a,b\n\x00,2\n", 2, 1),
        ] {
            let err = Table::read_csv(text.as_bytes(), CsvOptions::default(), "t").unwrap_err();
            let EngineError::Csv { message, .. } = &err else {
                panic!("{err:?}");
            };
            assert_eq!(
                message,
                &format!("row {row}, column {column}: the value contains a NUL byte"),
                "{text:?}"
            );
        }
    }

    use super::*;

    /// All data records of a table, or the error as text.
    fn table(text: &[u8], options: CsvOptions) -> std::result::Result<Vec<Vec<String>>, String> {
        let mut scanner = CsvScanner::table(text, options, "t.csv").map_err(|e| e.to_string())?;
        let mut rows = vec![scanner.columns().to_vec()];
        while let Some(r) = scanner.next_record().map_err(|e| e.to_string())? {
            rows.push(r.iter().map(String::from).collect());
        }
        Ok(rows)
    }

    fn csv(text: &[u8]) -> std::result::Result<Vec<Vec<String>>, String> {
        table(text, CsvOptions::default())
    }

    fn rows(text: &[&str]) -> Vec<Vec<String>> {
        text.iter()
            .map(|r| r.split('|').map(String::from).collect())
            .collect()
    }

    #[test]
    fn reads_quotes_crlf_and_removes_the_byte_order_mark() {
        let text = "\u{feff}name;\"no;te\"\r\n\"a;b\";\"say \"\"hi\"\"\"\r\n\r\nc;\r\n";
        let options = CsvOptions {
            delimiter: b';',
            has_header: true,
        };
        assert_eq!(
            table(text.as_bytes(), options).unwrap(),
            rows(&["name|no;te", "a;b|say \"hi\"", "c|"])
        );
        // Only on the first field of the first record.
        assert_eq!(
            csv("a,\u{feff}b\n\u{feff}1,2\n".as_bytes()).unwrap(),
            rows(&["a|\u{feff}b", "\u{feff}1|2"])
        );
    }

    #[test]
    fn a_quoted_field_left_open_is_refused_with_its_row() {
        // The parser would read the rest of the file into the last field.
        let open = "zip,age,note\n100,21,ok\n101,22,\"start\n102,23,x\n103,24,y\n";
        assert_eq!(
            csv(open.as_bytes()).unwrap_err(),
            "t.csv: row 3: a quoted field is not closed: its opening '\"' has no closing '\"' \
             before the end of the file"
        );
        // The same at the very first record, in a quoted field's escaped quote, in plain rows
        // (hierarchies) and after a long valid part (read ahead in several buffers).
        assert!(
            csv(b"\"a,b\n1,2\n")
                .unwrap_err()
                .contains("row 1: a quoted field")
        );
        assert!(
            csv(b"a,b\n1,\"x\"\"\n")
                .unwrap_err()
                .contains("row 2: a quoted")
        );
        let mut plain = CsvScanner::rows("x;*\n\"y;*\n".as_bytes(), b';', "h").unwrap();
        assert!(plain.next_record().unwrap().is_some());
        let err = plain.next_record().unwrap_err().to_string();
        assert!(
            err.contains("h: row 2: a quoted field is not closed"),
            "{err}"
        );
        let long = format!("a,b\n{}1,\"x\n", "1,2\n".repeat(100_000));
        assert!(
            csv(long.as_bytes())
                .unwrap_err()
                .contains("row 100002: a quoted")
        );
        // Closed quotes, escaped quotes, quotes inside unquoted fields and a quoted field that
        // ends the file without a line feed are read as before.
        assert_eq!(
            csv(b"a,b\n\"x\ny\",\"say \"\"hi\"\"\"\n5\"6,\"z\"").unwrap(),
            rows(&["a|b", "x\ny|say \"hi\"", "5\"6|z"])
        );
        assert_eq!(csv(b"a,b\r\n1,\"\"\r\n").unwrap(), rows(&["a|b", "1|"]));
    }

    #[test]
    fn without_a_header_the_first_record_is_data() {
        let options = CsvOptions {
            delimiter: b',',
            has_header: false,
        };
        let text = "\u{feff}1,2\n3,4\n";
        assert_eq!(
            table(text.as_bytes(), options).unwrap(),
            rows(&["column1|column2", "1|2", "3|4"])
        );
        // The header rules do not apply: empty or repeated values are data.
        assert_eq!(
            table(b",x\nx,x\n", options).unwrap(),
            rows(&["column1|column2", "|x", "x|x"])
        );
        let mut scanner = CsvScanner::table(&b"a\nb\n"[..], options, "t").unwrap();
        scanner.next_record().unwrap();
        scanner.next_record().unwrap();
        assert_eq!((scanner.record_number(), scanner.data_rows()), (2, 2));
    }

    #[test]
    fn ragged_records_name_the_record_and_the_widths() {
        assert_eq!(
            csv(b"a,b\n1,2\n3\n").unwrap_err(),
            "t.csv: row 3 has 1 fields, expected 2"
        );
        let err = CsvScanner::table(&b"a,b\n1,2,3\n"[..], CsvOptions::default(), "t")
            .unwrap()
            .next_record()
            .unwrap_err();
        assert_eq!(
            err,
            EngineError::RaggedRow {
                source_name: "t".into(),
                row: 2,
                expected: 2,
                found: 3
            }
        );
        // Without a header, the first record sets the width.
        let options = CsvOptions {
            delimiter: b',',
            has_header: false,
        };
        assert_eq!(
            table(b"1,2\n3\n", options).unwrap_err(),
            "t.csv: row 2 has 1 fields, expected 2"
        );
    }

    #[test]
    fn invalid_utf8_names_record_and_column() {
        assert_eq!(
            csv(b"a,b\n1,2\n3,\xff\xfe\n").unwrap_err(),
            "t.csv: row 3, column 2: the value is not valid UTF-8"
        );
        assert_eq!(
            csv(b"a,\xffb\n1,2\n").unwrap_err(),
            "t.csv: row 1, column 2: the value is not valid UTF-8"
        );
        // The first bad field of a record; width before encoding.
        assert_eq!(
            csv(b"a,b,c\n1,\xff,\xfe\n").unwrap_err(),
            "t.csv: row 2, column 2: the value is not valid UTF-8"
        );
        assert_eq!(
            csv(b"a,b\n\xff\n").unwrap_err(),
            "t.csv: row 2 has 1 fields, expected 2"
        );
        // Header fields are checked one after the other with every name rule.
        assert_eq!(
            csv(b"a,,\xff\n1,2,3\n").unwrap_err(),
            "t.csv: header column 2 has an empty name"
        );
    }

    #[test]
    fn header_names_are_non_empty_and_unique() {
        assert_eq!(
            csv(b"a,b,a\n1,2,3\n").unwrap_err(),
            "column name 'a' occurs more than once in the header"
        );
        assert_eq!(
            csv(b",b\n1,2\n").unwrap_err(),
            "t.csv: header column 1 has an empty name"
        );
        // A byte order mark alone is no name.
        assert_eq!(
            csv("\u{feff},b\n1,2\n".as_bytes()).unwrap_err(),
            "t.csv: header column 1 has an empty name"
        );
    }

    #[test]
    fn empty_input_and_header_without_rows_are_errors() {
        assert_eq!(csv(b"").unwrap_err(), "t.csv: the file is empty");
        assert_eq!(csv(b"\n\r\n").unwrap_err(), "t.csv: the file is empty");
        assert_eq!(
            csv(b"a,b\n").unwrap_err(),
            "t.csv: the file has a header but no data rows"
        );
        assert!(matches!(
            CsvScanner::rows(&b""[..], b';', "h").unwrap_err(),
            EngineError::EmptyInput { .. }
        ));
    }

    #[test]
    fn plain_rows_have_no_header_and_any_width() {
        let mut scanner = CsvScanner::rows("\u{feff}a;x;*\nb;x\n".as_bytes(), b';', "h").unwrap();
        assert!(scanner.columns().is_empty());
        let mut seen = Vec::new();
        while let Some(r) = scanner.next_record().unwrap() {
            seen.push(r.iter().map(String::from).collect::<Vec<_>>());
        }
        assert_eq!(seen, rows(&["a|x|*", "b|x"]));
        let mut scanner = CsvScanner::rows(&b"a;b\nc;\xff\n"[..], b';', "h").unwrap();
        assert!(scanner.next_record().unwrap().is_some());
        let err = scanner.next_record().unwrap_err();
        assert_eq!(
            err.to_string(),
            "h: row 2, column 2: the value is not valid UTF-8"
        );
    }

    #[test]
    fn records_expose_their_fields() {
        let mut scanner =
            CsvScanner::table(&b"a,b\n1,\"x,y\"\n"[..], CsvOptions::default(), "t").unwrap();
        assert_eq!(scanner.source_name(), "t");
        let r = scanner.next_record().unwrap().unwrap();
        assert_eq!((r.len(), r.is_empty()), (2, false));
        assert_eq!((r.get(1), r.get(2)), (Some("x,y"), None));
        assert!(scanner.next_record().unwrap().is_none());
    }
}

//! A CSV table read in blocks of whole records, for the streaming passes over large files
//! (`deid apply`, `deid verify`): the same records, the same errors and the same record numbers
//! as [`CsvScanner::table`] with a header, at memory speed.
//!
//! Text is read 1 MiB at a time and cut after its last line feed. A block whose text is plain —
//! no `"`, CR or NUL byte, no empty line, valid UTF-8 — holds one record per line and its fields
//! are the line split at the delimiter: the CSV rules give exactly that, so such a block is only
//! split (by whichever thread handles it), never parsed. The header always goes through
//! [`CsvScanner::table`] (its names, the byte order mark). From the first block that is not
//! plain to the end of the input, records come from a [`CsvScanner`] resumed at that point,
//! which applies every rule and names every error; a plain block reports a record of the wrong
//! width as the scanner does ([`EngineError::RaggedRow`] with the record number).

use std::collections::VecDeque;
use std::io::{Chain, Cursor, Read};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, TryRecvError};

use rayon::Yield;

use super::CsvOptions;
use super::scanner::CsvScanner;
use crate::error::{EngineError, Result};

/// Bytes read per block.
const BLOCK_BYTES: usize = 1 << 20;

/// Records per block taken from the scanner.
const SCANNED_ROWS: usize = 1 << 14;

/// The rest of the input once a block is not plain (or the header is not): its text read so
/// far, then the reader.
type Rest<R> = Chain<Cursor<Vec<u8>>, R>;

/// Where the next records come from.
enum Source<R: Read> {
    /// Plain text so far: the reader and the start of a line not yet complete.
    Plain { input: R, carry: Vec<u8> },
    /// The scanner, from the first block that is not plain.
    Scanner(Box<CsvScanner<Rest<R>>>),
    /// Everything was handed out.
    Done,
}

/// A CSV table with a header, read in blocks (see the module documentation).
pub struct TableBlocks<R: Read> {
    source: Source<R>,
    columns: Vec<String>,
    delimiter: u8,
    source_name: Arc<str>,
    /// Data records handed out so far.
    records: u64,
}

impl<R: Read> std::fmt::Debug for TableBlocks<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableBlocks")
            .field("columns", &self.columns)
            .field("records", &self.records)
            .finish_non_exhaustive()
    }
}

/// Whole records of a table: a block of plain lines or records taken from the scanner.
#[derive(Debug)]
pub struct Block {
    /// Data records before this block.
    first_row: u64,
    rows: usize,
    width: usize,
    delimiter: char,
    source_name: Arc<str>,
    text: String,
    /// Scanned records: the end of every field in `text` (`width` per record); empty for plain
    /// lines.
    ends: Vec<usize>,
    plain: bool,
}

impl<R: Read> TableBlocks<R> {
    /// Opens a table with a header delimited by `delimiter`: the header is read and checked by
    /// [`CsvScanner::table`]. `source_name` names the input in error messages.
    pub fn open(mut input: R, delimiter: u8, source_name: &str) -> Result<Self> {
        let options = CsvOptions {
            delimiter,
            has_header: true,
        };
        let mut head = Vec::new();
        let line = loop {
            if let Some(end) = head.iter().position(|&b| b == b'\n') {
                break Some(end + 1);
            }
            let want = head.len() + (1 << 16);
            if fill(&mut input, &mut head, want, source_name)? == 0 {
                break None;
            }
        };
        let plain_header = line.filter(|&end| end > 1 && plain_bytes(&head[..end]));
        let mut blocks = TableBlocks {
            source: Source::Done,
            columns: Vec::new(),
            delimiter,
            source_name: Arc::from(source_name),
            records: 0,
        };
        match plain_header {
            Some(end) => {
                let scanner = CsvScanner::table(&head[..end], options, source_name)?;
                blocks.columns = scanner.columns().to_vec();
                let carry = head.split_off(end);
                blocks.source = Source::Plain { input, carry };
            }
            None => {
                let scanner =
                    CsvScanner::table(Cursor::new(head).chain(input), options, source_name)?;
                blocks.columns = scanner.columns().to_vec();
                blocks.source = Source::Scanner(Box::new(scanner));
            }
        }
        Ok(blocks)
    }

    /// The column names of the header.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Data records handed out so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The next block (`None`: the input is done). Errors are the scanner's: CSV syntax,
    /// invalid UTF-8, NUL bytes, and a header without data rows.
    pub fn next_block(&mut self) -> Result<Option<Block>> {
        loop {
            match std::mem::replace(&mut self.source, Source::Done) {
                Source::Done => return Ok(None),
                Source::Scanner(mut scanner) => {
                    let block = self.scanned(&mut scanner)?;
                    if block.is_some() {
                        self.source = Source::Scanner(scanner);
                    }
                    return Ok(block);
                }
                Source::Plain { input, carry } => {
                    if let Some(block) = self.plain(input, carry)? {
                        return Ok(Some(block));
                    }
                }
            }
        }
    }

    /// The next plain block, or `None` with the source switched to the scanner (or done).
    fn plain(&mut self, mut input: R, mut text: Vec<u8>) -> Result<Option<Block>> {
        let cut = loop {
            let want = match text.len() < BLOCK_BYTES {
                true => BLOCK_BYTES,
                false => text.len() * 2,
            };
            let read = fill(&mut input, &mut text, want, &self.source_name)?;
            if let Some(last) = memchr::memrchr(b'\n', &text) {
                break last + 1;
            }
            if read == 0 {
                if !text.is_empty() {
                    text.push(b'\n');
                }
                break text.len();
            }
        };
        if cut == 0 {
            // The input is done: a resumed scanner gives the end (or "no data rows").
            let scanner = self.resume(Vec::new(), input);
            self.source = Source::Scanner(Box::new(scanner));
            return Ok(None);
        }
        let carry = text.split_off(cut);
        let plain = memchr::memchr3(b'"', b'\r', 0, &text).is_none()
            && text[0] != b'\n'
            && memchr::memmem::find(&text, b"\n\n").is_none();
        let text = match plain {
            true => String::from_utf8(text).map_err(|e| e.into_bytes()),
            false => Err(text),
        };
        let text = match text {
            Ok(text) => text,
            Err(mut text) => {
                text.extend_from_slice(&carry);
                let scanner = self.resume(text, input);
                self.source = Source::Scanner(Box::new(scanner));
                return Ok(None);
            }
        };
        let rows = memchr::memchr_iter(b'\n', text.as_bytes()).count();
        let block = self.block(rows, text, Vec::new(), true);
        self.records += rows as u64;
        self.source = Source::Plain { input, carry };
        Ok(Some(block))
    }

    /// The scanner over `text` then `input`, continuing after the records handed out.
    fn resume(&self, text: Vec<u8>, input: R) -> CsvScanner<Rest<R>> {
        CsvScanner::resume(
            Cursor::new(text).chain(input),
            self.delimiter,
            &self.source_name,
            self.columns.clone(),
            self.records,
        )
    }

    /// Up to [`SCANNED_ROWS`] records of the scanner (`None`: none left).
    fn scanned(&mut self, scanner: &mut CsvScanner<Rest<R>>) -> Result<Option<Block>> {
        let mut text = String::new();
        let mut ends = Vec::with_capacity(SCANNED_ROWS * self.columns.len());
        let mut rows = 0;
        while rows < SCANNED_ROWS {
            let Some(record) = scanner.next_record()? else {
                break;
            };
            for field in record.iter() {
                text.push_str(field);
                ends.push(text.len());
            }
            rows += 1;
        }
        if rows == 0 {
            return Ok(None);
        }
        let block = self.block(rows, text, ends, false);
        self.records += rows as u64;
        Ok(Some(block))
    }

    /// Maps every remaining block with `map` on rayon's threads and hands the results to
    /// `consume` in the blocks' order. This thread reads the next blocks and consumes the
    /// results while a window of blocks is being mapped, so reading, mapping and consuming
    /// overlap and memory stays bounded. Stops at the first error in the input's order: a
    /// block's `map` or `consume` error, or a read error after the blocks before it were
    /// consumed.
    pub fn map_in_order<T: Send>(
        &mut self,
        map: impl Fn(&Block) -> Result<T> + Sync,
        mut consume: impl FnMut(T) -> Result<()>,
    ) -> Result<()> {
        let window = rayon::current_num_threads().max(1) * 4;
        let map = &map;
        rayon::in_place_scope(|scope| {
            let mut pending: VecDeque<Receiver<Result<T>>> = VecDeque::with_capacity(window);
            let mut failed = None;
            loop {
                while failed.is_none() && pending.len() < window {
                    match self.next_block() {
                        Ok(Some(block)) => {
                            let (sender, receiver) = mpsc::sync_channel(1);
                            scope.spawn(move |_| {
                                // The receiver is gone only when an earlier block failed.
                                let _ = sender.send(map(&block));
                            });
                            pending.push_back(receiver);
                        }
                        Ok(None) => break,
                        Err(e) => failed = Some(e),
                    }
                }
                let Some(receiver) = pending.pop_front() else {
                    return failed.map_or(Ok(()), Err);
                };
                consume(wait(&receiver)?)?;
            }
        })
    }

    fn block(&self, rows: usize, text: String, ends: Vec<usize>, plain: bool) -> Block {
        Block {
            first_row: self.records,
            rows,
            width: self.columns.len(),
            delimiter: char::from(self.delimiter),
            source_name: Arc::clone(&self.source_name),
            text,
            ends,
            plain,
        }
    }
}

impl Block {
    /// Data records before this block.
    pub fn first_row(&self) -> u64 {
        self.first_row
    }

    /// Records in this block.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes of the records' fields (delimiters and line ends included for plain lines).
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Calls `f` with the 1-based data row number and the fields of every record, in order;
    /// stops at the first error. A plain line of the wrong width is
    /// [`EngineError::RaggedRow`], as the scanner reports it.
    pub fn for_each<'b>(&'b self, mut f: impl FnMut(u64, &[&'b str]) -> Result<()>) -> Result<()> {
        let mut fields: Vec<&'b str> = Vec::with_capacity(self.width);
        if !self.plain {
            let mut start = 0;
            for r in 0..self.rows {
                fields.clear();
                for &end in &self.ends[r * self.width..(r + 1) * self.width] {
                    fields.push(&self.text[start..end]);
                    start = end;
                }
                f(self.first_row + r as u64 + 1, &fields)?;
            }
            return Ok(());
        }
        for (r, line) in self.text.split_terminator('\n').enumerate() {
            fields.clear();
            fields.extend(line.split(self.delimiter));
            let row = self.first_row + r as u64 + 1;
            super::check_width(&self.source_name, row + 1, self.width, fields.len())?;
            f(row, &fields)?;
        }
        Ok(())
    }
}

/// The result of a block's job. On a rayon thread, queued jobs (perhaps this one) run here
/// while it waits, so a pool of one thread cannot deadlock.
fn wait<T>(receiver: &Receiver<Result<T>>) -> Result<T> {
    loop {
        match receiver.try_recv() {
            Ok(result) => return result,
            Err(TryRecvError::Empty) if rayon::yield_now() == Some(Yield::Executed) => {}
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Disconnected) => break,
        }
    }
    // A job whose sender is dropped unsent panicked; the scope passes its panic on.
    receiver
        .recv()
        .unwrap_or_else(|_| Err(EngineError::Cancelled))
}

/// Whether `bytes` have no `"`, CR or NUL and are valid UTF-8.
fn plain_bytes(bytes: &[u8]) -> bool {
    memchr::memchr3(b'"', b'\r', 0, bytes).is_none() && std::str::from_utf8(bytes).is_ok()
}

/// Reads from `input` into `buf` until it holds `want` bytes or the input ends; the bytes read.
fn fill<R: Read>(
    input: &mut R,
    buf: &mut Vec<u8>,
    want: usize,
    source_name: &str,
) -> Result<usize> {
    let start = buf.len();
    buf.resize(want.max(start), 0);
    let mut at = start;
    while at < buf.len() {
        match input.read(&mut buf[at..]) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.truncate(at);
                return Err(EngineError::Csv {
                    source_name: source_name.to_string(),
                    message: e.to_string(),
                });
            }
        }
    }
    buf.truncate(at);
    Ok(at - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records with their 1-based row numbers, or the error.
    type Rows = Result<Vec<(u64, Vec<String>)>>;

    /// Every record of `text` through blocks and through the scanner: (row, fields) or the error.
    fn both(text: &str) -> (Rows, Rows) {
        let blocks = (|| {
            let mut blocks = TableBlocks::open(text.as_bytes(), b',', "t")?;
            let mut out = Vec::new();
            while let Some(block) = blocks.next_block()? {
                block.for_each(|row, fields| {
                    out.push((row, fields.iter().map(|f| f.to_string()).collect()));
                    Ok(())
                })?;
            }
            Ok(out)
        })();
        let scanned = (|| {
            let options = CsvOptions {
                delimiter: b',',
                has_header: true,
            };
            let mut scanner = CsvScanner::table(text.as_bytes(), options, "t")?;
            let mut out = Vec::new();
            let mut row = 0;
            while let Some(record) = scanner.next_record()? {
                row += 1;
                out.push((row, record.iter().map(str::to_string).collect()));
            }
            Ok(out)
        })();
        (blocks, scanned)
    }

    fn same(text: &str) {
        match both(text) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text:?}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{text:?}"),
            (a, b) => panic!("{text:?}: blocks {a:?}, scanner {b:?}"),
        }
    }

    #[test]
    fn blocks_read_what_the_scanner_reads() {
        for text in [
            "a,b\n1,2\n3,4\n",
            "a,b\n1,2\n3,4",
            "\u{feff}a,b\n1,2\n",
            "a,b\n1,2\n\n3,4\n",
            "a,b\n1,2\n\"x,y\",4\n5,6\n",
            "a,b\r\n1,2\r\n",
            "\"a\",b\n1,2\n",
            "a,b\n1,2,3\n",
            "a,b\n1\n",
            "a,b\n",
            "a,b",
            "a,a\n1,2\n",
            "a,b\n1,\u{e9}\n",
            "a,b\n1,\0\n",
            "\na,b\n1,2\n",
            "a,b\n,\n",
            "a,b\n1,\"2\n3,4\n",
            "a,b\n1,\"2\n\"\"3,4\n",
        ] {
            same(text);
        }
        let bad = [b'a', b',', b'b', b'\n', b'1', b',', 0xff, b'\n'];
        let mut blocks = TableBlocks::open(&bad[..], b',', "t").unwrap();
        let err = blocks.next_block().unwrap_err();
        assert!(
            matches!(
                err,
                EngineError::InvalidUtf8 {
                    row: 2,
                    column: 2,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    /// Several blocks: plain ones, then the scanner from a quoted field on, with the record
    /// numbers of the whole file.
    #[test]
    fn long_inputs_switch_to_the_scanner_and_keep_counting() {
        let mut text = String::from("a,b,c\n");
        for i in 0..200_000 {
            text += &format!("{i},v{},{}\n", i % 7, i % 13);
        }
        text += "\"q\",1,2\n";
        for i in 0..1000 {
            text += &format!("{i},w,x\n");
        }
        same(&text);
        text += "1,2\n";
        let (blocks, _) = both(&text);
        assert!(
            matches!(blocks, Err(EngineError::RaggedRow { row: 201_003, .. })),
            "{blocks:?}"
        );
        let mut plain = String::from("a\n");
        for i in 0..300_000 {
            plain += &format!("{i}\n");
        }
        same(&plain);
        plain += "1,2\n";
        same(&plain);
    }

    /// Every block's rows through `map_in_order` with a pool of `threads`: (row, first field).
    fn mapped(text: &[u8], threads: usize) -> Result<Vec<(u64, String)>> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut blocks = TableBlocks::open(text, b',', "t")?;
            let mut rows = Vec::new();
            blocks.map_in_order(
                |block| {
                    let mut part = Vec::with_capacity(block.rows());
                    block.for_each(|row, fields| {
                        if fields[0] == "fail" {
                            return Err(EngineError::config("t", format!("row {row}")));
                        }
                        part.push((row, fields[0].to_string()));
                        Ok(())
                    })?;
                    Ok(part)
                },
                |part| {
                    rows.extend(part);
                    Ok(())
                },
            )?;
            Ok(rows)
        })
    }

    /// Blocks mapped in parallel are consumed in the input's order, on a pool of one thread
    /// (which must not wait for itself) as on several; the first error in the input's order
    /// wins: a failing row before a ragged one, a ragged row before a failing one.
    #[test]
    fn blocks_are_mapped_in_parallel_and_consumed_in_order() {
        let mut text = String::from("a,b\n");
        for i in 0..300_000 {
            text += &format!("{i},x\n");
        }
        for threads in [1, 2, 3] {
            let rows = mapped(text.as_bytes(), threads).unwrap();
            assert_eq!(rows.len(), 300_000);
            for (i, (row, value)) in rows.iter().enumerate() {
                assert_eq!(
                    (*row, value.as_str()),
                    (i as u64 + 1, i.to_string().as_str())
                );
            }
        }
        let failing = text.replacen("1000,x\n", "fail,x\n", 1);
        let both = failing.replacen("250000,x\n", "250000\n", 1);
        let err = mapped(both.as_bytes(), 2).unwrap_err();
        assert_eq!(
            err.to_string(),
            EngineError::config("t", "row 1001").to_string()
        );
        let ragged_first =
            text.replacen("1000,x\n", "1000\n", 1)
                .replacen("250000,x\n", "fail,x\n", 1);
        let err = mapped(ragged_first.as_bytes(), 2).unwrap_err();
        assert!(
            matches!(err, EngineError::RaggedRow { row: 1002, .. }),
            "{err:?}"
        );
        // A read error (invalid UTF-8 far into the input) after every block before it.
        let mut bad = text.clone().into_bytes();
        let at = bad.len() - 5;
        bad[at] = 0xff;
        let err = mapped(&bad, 2).unwrap_err();
        assert!(matches!(err, EngineError::InvalidUtf8 { .. }), "{err:?}");
    }
}

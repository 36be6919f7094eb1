//! Loading datasets in the layout of ARX's benchmark files: `<dir>/<name>.csv` plus one
//! `<dir>/<name>_hierarchy_<column>.csv` per quasi-identifier, `;`-separated.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::config::QuasiIdentifier;
use crate::data::{CsvOptions, Table};
use crate::error::EngineError;
use crate::hierarchy::Hierarchy;

/// A benchmark dataset: the table and one hierarchy per quasi-identifier (in column order).
#[derive(Debug)]
pub struct ArxDataset {
    /// The data.
    pub table: Table,
    /// Quasi-identifiers with their hierarchies, in the order of the table's columns.
    pub quasi_identifiers: Vec<QuasiIdentifier>,
}

fn open(path: &Path) -> Result<BufReader<File>, EngineError> {
    File::open(path)
        .map(BufReader::new)
        .map_err(|e| EngineError::Csv {
            source_name: path.display().to_string(),
            message: e.to_string(),
        })
}

impl ArxDataset {
    /// Loads `<dir>/<name>.csv` and every `<dir>/<name>_hierarchy_<column>.csv` that exists.
    pub fn load(dir: &Path, name: &str) -> Result<ArxDataset, EngineError> {
        let data_path: PathBuf = dir.join(format!("{name}.csv"));
        let options = CsvOptions {
            delimiter: b';',
            has_header: true,
        };
        let table = Table::read_csv(open(&data_path)?, options, &data_path.display().to_string())?;
        let mut quasi_identifiers = Vec::new();
        for col in table.columns() {
            let path = dir.join(format!("{name}_hierarchy_{}.csv", col.name));
            if path.exists() {
                let h = Hierarchy::read_csv(open(&path)?, b';', &col.name)?;
                quasi_identifiers.push(QuasiIdentifier::new(col.name.clone(), h));
            }
        }
        Ok(ArxDataset {
            table,
            quasi_identifiers,
        })
    }
}

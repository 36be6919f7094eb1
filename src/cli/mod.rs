//! The `deid` command line.

//! The `deid` binary: parses the command line and runs it.

use clap::Parser;

fn main() {
    let cli = deid::cli::Cli::parse();
    if let Err(e) = deid::cli::run(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(2);
    }
}

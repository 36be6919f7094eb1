//! The `deid` binary: parses the command line and runs it.

use clap::Parser;

fn main() {
    let cli = deid::cli::Cli::parse();
    if let Err(e) = deid::cli::run(cli) {
        // The reader of our output went away (`deid … | head`): not an error of ours.
        let broken_pipe = e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        });
        if broken_pipe {
            std::process::exit(0);
        }
        if let Some(exit) = e.downcast_ref::<deid::cli::Exit>() {
            eprintln!("error: {exit}");
            std::process::exit(exit.code);
        }
        eprintln!("error: {e:#}");
        std::process::exit(deid::cli::exit::BAD_INPUT);
    }
}

//! The `deid` binary: parses the command line and runs it.

use clap::Parser;

fn main() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    bound_malloc_arenas();
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

/// glibc's allocator gives threads up to eight arenas per core, and memory freed in one arena
/// is not reused by threads of another: the search's and the output's threads leave 10–15 % of
/// a 10 M-row job's peak memory stranded (1,378 MiB against 1,159 MiB with two arenas, same
/// time). Unless `MALLOC_ARENA_MAX` is set, the process starts again with one arena per core
/// (at least two); the variable must be set before glibc's allocator starts, and `mallopt`
/// would need unsafe code. If the program cannot be started again, it goes on as it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn bound_malloc_arenas() {
    use std::os::unix::process::CommandExt;
    const VAR: &str = "MALLOC_ARENA_MAX";
    if std::env::var_os(VAR).is_some() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let arenas = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(exe);
    if let Some(name) = args.next() {
        command.arg0(name);
    }
    // `exec` returns only if it failed.
    let _ = command.args(args).env(VAR, arenas.to_string()).exec();
}

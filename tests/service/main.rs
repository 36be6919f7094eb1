//! Service tests in one binary: the service on a random port driven with reqwest, against SQLite
//! and PostgreSQL, the web console's routes ([`console`]), and the `deid` command line ([`cli`]).
//! PostgreSQL tests need a server (`DEID_TEST_DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`); they fail when it is unreachable unless
//! `DEID_SKIP_POSTGRES=1`.

mod auth;
mod cli;
mod console;
mod contract;
mod deploy;
mod error_bodies;
mod errors;
mod flow;
mod frequency;
mod helpers;
mod hierarchies;
mod parquet;
mod plan;
mod process;
mod queue;
mod readme;
mod tasks;
mod tls;
mod verify;

/// Defines two tests running `async fn $body(Db)`: one on SQLite, one on PostgreSQL.
#[macro_export]
macro_rules! both_databases {
    ($body:ident, $sqlite:ident, $postgres:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $sqlite() {
            $body($crate::helpers::Db::Sqlite).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $postgres() {
            $body($crate::helpers::Db::Postgres).await
        }
    };
}

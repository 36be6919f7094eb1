//! The job domain, owned by neither the HTTP API nor the worker nor the command line — all three
//! call it:
//!
//! - [`spec`]: the job specification (one JSON schema for `POST /v1/jobs`, `deid evaluate
//!   --config` and `deid anonymize --config`) and its search settings;
//! - [`hierarchy`]: resolving each column's hierarchy source (file, inline CSV, builder
//!   specification, stored) with one set of rules per front end;
//! - [`problem`]: specification → engine [`Problem`](deid_engine::Problem) (written once), and
//!   the service's validation before a job is queued;
//! - [`progress`]: the one progress type from the engine's reports to the client;
//! - [`report`]: the evaluation and search reports (with [`values`]: the most frequent values of
//!   each quasi-identifier before and after); [`view`]: the job as clients see it;
//! - [`task`]: what a job does, one file per task kind (`anonymize`, `evaluate`, `risk`), each
//!   with its validation and its run, shared by the command line and the worker;
//! - [`verify`]: released data re-checked against a job's privacy models (`deid verify`,
//!   `POST /v1/jobs/{id}/verify`);
//! - [`output`]: the least size of a job's output, checked at submission;
//! - [`callback`]: which callback URLs (webhooks) jobs may name;
//! - [`field`]: the dotted paths of the specification's fields that errors name;
//! - [`error`]: the error-code table shared by API errors and job failures, and
//!   [`SpecError`](error::SpecError); [`id`]: id newtypes and the job status.
//!
//! `docs/architecture.md` follows a job from the request to the result.

pub mod callback;
pub mod error;
pub mod field;
pub mod hierarchy;
pub mod id;
pub mod output;
pub mod plan;
pub mod problem;
pub mod progress;
pub mod report;
pub mod spec;
pub mod task;
pub mod values;
pub mod verify;
pub mod view;

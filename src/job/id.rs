//! Identifiers and the job status: newtypes so that a job id is never passed where a dataset id
//! belongs, and one [`JobStatus`] enum instead of status strings.

use serde::{Deserialize, Serialize};

/// Declares a string-backed identifier newtype.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, sqlx::Type)]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                $name(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(s.to_string())
            }
        }
    };
}

id_type!(
    /// A job's id (a UUIDv7, so ids sort by creation time).
    JobId
);
id_type!(
    /// A dataset's id (a UUIDv7).
    DatasetId
);
id_type!(
    /// The tenant a request acts for (from its API key; `default` without keys).
    TenantId
);

impl JobId {
    /// A fresh, time-ordered id.
    pub fn generate() -> JobId {
        JobId(uuid::Uuid::now_v7().to_string())
    }
}

impl DatasetId {
    /// A fresh, time-ordered id.
    pub fn generate() -> DatasetId {
        DatasetId(uuid::Uuid::now_v7().to_string())
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for a worker.
    Queued,
    /// Claimed by a worker.
    Running,
    /// Ended with a result.
    Succeeded,
    /// Ended without a result (see its error).
    Failed,
    /// Cancelled by the client (the best transformation so far is the result, if any).
    Cancelled,
}

deid_engine::names::enum_names! {
    JobStatus: Display {
        Queued => "queued",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        Cancelled => "cancelled",
    }
    /// The status as stored and shown (`queued`, …).
    pub fn as_str;
    /// The status named `name`.
    pub fn parse;
}

impl JobStatus {
    /// True for `succeeded`, `failed` and `cancelled`.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

impl TryFrom<String> for JobStatus {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        JobStatus::parse(&s).ok_or_else(|| format!("unknown job status '{s}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        for s in JobStatus::ALL {
            assert_eq!(JobStatus::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        assert_eq!(JobStatus::parse("done"), None);
        assert!(JobStatus::Failed.is_terminal() && !JobStatus::Running.is_terminal());
    }
}

//! The recoding plan as a document (`docs/definitions.md` §7): the engine's
//! [`deid_engine::plan::Plan`] with its `audit` block (SHA-256 digests of the input, the
//! hierarchies and the normalized specification; the seed; deid's version) and the digest of its
//! own body, written as JSON; and reading one back, refusing another format or version and a
//! tampered body.

use std::collections::BTreeMap;

use deid_engine::output::OutputOptions;
use deid_engine::plan::{PLAN_FORMAT, PLAN_VERSION, Plan, PlanAudit, Stepped};
use deid_engine::{Problem, ProblemConfig};
use sha2::{Digest, Sha256};

use super::spec::JobSpec;

/// Lower-case hex of a SHA-256 digest.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (hex) of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A reader that computes the SHA-256 of what is read through it (when enabled).
#[derive(Debug)]
pub struct HashingReader<R> {
    inner: R,
    hash: Option<Sha256>,
}

impl<R> HashingReader<R> {
    /// Reads through `inner`, hashing if `enabled`.
    pub fn new(inner: R, enabled: bool) -> Self {
        HashingReader {
            inner,
            hash: enabled.then(Sha256::new),
        }
    }

    /// The digest (hex) of everything read so far (`None`: not enabled).
    pub fn digest(&self) -> Option<String> {
        self.hash.as_ref().map(|h| hex(&h.clone().finalize()))
    }
}

impl<R: std::io::Read> std::io::Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(h) = &mut self.hash {
            h.update(&buf[..n]);
        }
        Ok(n)
    }
}

/// SHA-256 (hex) of every quasi-identifier's hierarchy table of `config` (CSV, `,`-separated),
/// by column.
pub fn hierarchy_digests(config: &ProblemConfig) -> BTreeMap<String, String> {
    (config.quasi_identifiers.iter())
        .map(|qi| {
            (
                qi.column.clone(),
                sha256(qi.hierarchy.to_csv(b',').as_bytes()),
            )
        })
        .collect()
}

/// What the audit block records.
#[derive(Debug, Clone)]
pub struct AuditFacts<'a> {
    /// The specification as normalized (serialized to JSON for its digest).
    pub spec: &'a JobSpec,
    /// SHA-256 (hex) of the input as read, if known.
    pub input_sha256: Option<&'a str>,
    /// The search's seed.
    pub seed: u64,
    /// [`hierarchy_digests`] of the problem's configuration.
    pub hierarchies: BTreeMap<String, String>,
}

/// The plan of `recoding` on `problem` written with `options` and `delimiter`, with its audit
/// block and digest, as JSON text.
pub fn plan_json<R: Stepped + ?Sized>(
    problem: &Problem,
    recoding: &R,
    options: &OutputOptions,
    delimiter: u8,
    facts: AuditFacts<'_>,
) -> deid_engine::Result<String> {
    let mut plan = Plan::of(problem, recoding, options, delimiter)?;
    let spec = serde_json::to_string(facts.spec).unwrap_or_default();
    plan.audit = Some(PlanAudit {
        input_sha256: facts.input_sha256.map(str::to_string),
        hierarchies_sha256: facts.hierarchies,
        specification_sha256: sha256(spec.as_bytes()),
        seed: facts.seed,
        deid_version: env!("CARGO_PKG_VERSION").to_string(),
    });
    plan.digest = Some(body_digest(&plan));
    Ok(serde_json::to_string_pretty(&plan).expect("a plan serializes"))
}

/// SHA-256 (hex) of the plan's canonical JSON (compact, fields in declaration order, maps
/// sorted) without its `digest`.
pub fn body_digest(plan: &Plan) -> String {
    let mut body = plan.clone();
    body.digest = None;
    sha256(&serde_json::to_vec(&body).expect("a plan serializes"))
}

/// Why a plan document was refused.
#[derive(Debug, thiserror::Error)]
#[error("plan: {0}")]
pub struct PlanError(pub String);

/// Reads a plan document: JSON of format [`PLAN_FORMAT`] and version [`PLAN_VERSION`] (checked
/// first, so that another version is named as such), every field as documented (errors name
/// the field's path), and a `digest` equal to the digest of its body (else it was changed).
pub fn read_plan(text: &str) -> Result<Plan, PlanError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| PlanError(format!("not JSON: {e}")))?;
    let format = value.get("format").and_then(|f| f.as_str());
    if format != Some(PLAN_FORMAT) {
        return Err(PlanError(format!(
            "field 'format': expected \"{PLAN_FORMAT}\", got {}",
            value
                .get("format")
                .map_or("nothing".to_string(), |f| f.to_string())
        )));
    }
    let version = value.get("version").and_then(|v| v.as_u64());
    if version != Some(u64::from(PLAN_VERSION)) {
        return Err(PlanError(format!(
            "field 'version': this deid reads plans of version {PLAN_VERSION}, got {}",
            value
                .get("version")
                .map_or("nothing".to_string(), |v| v.to_string())
        )));
    }
    let plan: Plan = serde_path_to_error::deserialize(value)
        .map_err(|e| PlanError(format!("field '{}': {}", e.path(), e.inner())))?;
    let Some(digest) = &plan.digest else {
        return Err(PlanError(
            "field 'digest' is missing: expected the SHA-256 of the plan's body".to_string(),
        ));
    };
    let actual = body_digest(&plan);
    if *digest != actual {
        return Err(PlanError(format!(
            "field 'digest' is {digest}, but the plan's body has the digest {actual}: the plan \
             was changed after deid wrote it"
        )));
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_the_standard_digest() {
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut r = HashingReader::new(&b"abc"[..], true);
        std::io::copy(&mut r, &mut std::io::sink()).unwrap();
        assert_eq!(r.digest(), Some(sha256(b"abc")));
        assert_eq!(HashingReader::new(&b""[..], false).digest(), None);
    }
}

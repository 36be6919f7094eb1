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
    /// The job's specification ([`specification_digest`] is recorded).
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
    plan.audit = Some(PlanAudit {
        input_sha256: facts.input_sha256.map(str::to_string),
        hierarchies_sha256: facts.hierarchies,
        specification_sha256: specification_digest(facts.spec),
        seed: facts.seed,
        deid_version: env!("CARGO_PKG_VERSION").to_string(),
    });
    plan.digest = Some(body_digest(&plan));
    // Compact: a plan of many output classes is tens of megabytes, held while it is stored.
    Ok(serde_json::to_string(&plan).expect("a plan serializes"))
}

/// SHA-256 (hex) of the specification as the audit block records it ([`JobSpec::audited`],
/// compact JSON): the same for the same job from the command line and the service.
pub fn specification_digest(spec: &JobSpec) -> String {
    sha256(
        serde_json::to_string(&spec.audited())
            .unwrap_or_default()
            .as_bytes(),
    )
}

/// SHA-256 (hex) of the plan's canonical JSON (compact, fields in declaration order, maps
/// sorted) without its `digest`.
pub fn body_digest(plan: &Plan) -> String {
    match plan.digest {
        None => streamed_digest(plan),
        Some(_) => {
            let mut body = plan.clone();
            body.digest = None;
            streamed_digest(&body)
        }
    }
}

/// SHA-256 (hex) of `plan`'s compact JSON, serialized straight into the hash.
fn streamed_digest(plan: &Plan) -> String {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut hashing = Hashing(Sha256::new());
    serde_json::to_writer(&mut hashing, plan).expect("a plan serializes");
    hex(&hashing.0.finalize())
}

/// Why a plan document was refused.
#[derive(Debug, thiserror::Error)]
#[error("plan: {0}")]
pub struct PlanError(pub String);

/// The fields of a plan document read before the rest.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default)]
    format: Option<serde_json::Value>,
    #[serde(default)]
    version: Option<serde_json::Value>,
}

/// Reads a plan document: JSON of format [`PLAN_FORMAT`] and version [`PLAN_VERSION`] (checked
/// first, so that another version is named as such), every field as documented (errors name
/// the field's path), and a `digest` equal to the digest of its body (else it was changed).
/// A well-formed plan is parsed once into its types and hashed as it is serialized; a refused
/// one is parsed again through a JSON value for the error.
pub fn read_plan(text: &str) -> Result<Plan, PlanError> {
    let typed = || -> Option<Plan> {
        let head: Head = serde_json::from_str(text).ok()?;
        check_head(head.format.as_ref(), head.version.as_ref()).ok()?;
        serde_json::from_str(text).ok()
    };
    let mut plan = match typed() {
        Some(plan) => plan,
        None => return Err(refusal(text)),
    };
    let Some(digest) = plan.digest.take() else {
        return Err(PlanError(
            "field 'digest' is missing: expected the SHA-256 of the plan's body".to_string(),
        ));
    };
    let actual = streamed_digest(&plan);
    if digest != actual {
        return Err(PlanError(format!(
            "field 'digest' is {digest}, but the plan's body has the digest {actual}: the plan \
             was changed after deid wrote it"
        )));
    }
    plan.digest = Some(digest);
    Ok(plan)
}

/// Refuses another format or version (`None`: the field is missing).
fn check_head(
    format: Option<&serde_json::Value>,
    version: Option<&serde_json::Value>,
) -> Result<(), PlanError> {
    if format.and_then(|f| f.as_str()) != Some(PLAN_FORMAT) {
        return Err(PlanError(format!(
            "field 'format': expected \"{PLAN_FORMAT}\", got {}",
            format.map_or("nothing".to_string(), |f| f.to_string())
        )));
    }
    if version.and_then(|v| v.as_u64()) != Some(u64::from(PLAN_VERSION)) {
        return Err(PlanError(format!(
            "field 'version': this deid reads plans of version {PLAN_VERSION}, got {}",
            version.map_or("nothing".to_string(), |v| v.to_string())
        )));
    }
    Ok(())
}

/// Why `text` is not a plan: not JSON, another format or version, or the path of the first
/// field that is not as documented.
fn refusal(text: &str) -> PlanError {
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => return PlanError(format!("not JSON: {e}")),
    };
    if let Err(e) = check_head(value.get("format"), value.get("version")) {
        return e;
    }
    match serde_path_to_error::deserialize::<_, Plan>(value) {
        Err(e) => PlanError(format!("field '{}': {}", e.path(), e.inner())),
        // Read as a value but not as a plan (a field given twice): the parser's words.
        Ok(_) => match serde_json::from_str::<Plan>(text) {
            Err(e) => PlanError(e.to_string()),
            Ok(_) => PlanError("not a plan".to_string()),
        },
    }
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

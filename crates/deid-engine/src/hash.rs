//! The engine's fast, fixed hashes (deterministic across runs and platforms; the keys are the
//! engine's own codes or the data's values, never chosen against the table): one home for the
//! multiply-rotate mixing used by dictionaries, groupings and checks, and the SplitMix64
//! sequence of synthetic data and tests.

use std::hash::{BuildHasherDefault, Hasher};

/// The multiplier of the rotate-xor-multiply step (FxHash's).
pub const ROTATE_MUL: u64 = 0x517c_c1b7_2722_0a95;

/// The golden-ratio multiplier (2⁶⁴/φ) of multiplicative hashing.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// One rotate-xor-multiply step: `h` absorbs `word`.
#[inline]
pub fn step(h: u64, word: u64) -> u64 {
    (h.rotate_left(5) ^ word).wrapping_mul(ROTATE_MUL)
}

/// Multiplicative mixing of a key (a packed code sequence or a hash) into table slots: the
/// high bits are the well-mixed ones.
#[inline]
pub fn mix(key: u64) -> u64 {
    key.wrapping_mul(GOLDEN)
}

/// A hash of a code sequence.
#[inline]
pub fn hash_codes(codes: &[u32]) -> u64 {
    let h = codes.iter().fold(0, |h, &c| step(h, c as u64));
    h ^ (h >> 29)
}

/// A hash of a string: 8 bytes at a time, with a final avalanche.
pub fn hash_str(value: &str) -> u64 {
    let bytes = value.as_bytes();
    let mut h = (bytes.len() as u64).wrapping_mul(GOLDEN);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = step(h, w);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = step(h, u64::from_le_bytes(buf));
    }
    h ^= h >> 32;
    h = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^ (h >> 32)
}

/// SplitMix64 (Steele, Lea & Flood 2014): advances `state` by [`GOLDEN`] and returns its
/// avalanche. A small, fully specified pseudo-random sequence (synthetic data, tests).
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(GOLDEN);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A [`Hasher`] for `HashMap`s keyed by the engine's integer codes.
#[derive(Debug, Default, Clone, Copy)]
pub struct CodeHasher(u64);

impl Hasher for CodeHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = step(self.0, b as u64);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = step(self.0, v);
    }
}

/// The `BuildHasher` of [`CodeHasher`].
pub type BuildCodeHasher = BuildHasherDefault<CodeHasher>;

/// A [`Hasher`] for `HashMap`s keyed by text (a recoding plan's values): 8 bytes a step.
#[derive(Debug, Default, Clone, Copy)]
pub struct TextHasher(u64);

impl Hasher for TextHasher {
    fn finish(&self) -> u64 {
        let h = self.0 ^ (self.0 >> 32);
        h.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ (h >> 29)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 = step(self.0, u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.0 = step(
                self.0,
                u64::from_le_bytes(buf) ^ ((rest.len() as u64) << 59),
            );
        }
    }

    fn write_u8(&mut self, v: u8) {
        self.0 = step(self.0, u64::from(v));
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = step(self.0, v);
    }
}

/// The `BuildHasher` of [`TextHasher`].
pub type BuildTextHasher = BuildHasherDefault<TextHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The hashes are fixed: dictionaries and groupings are laid out the same on every run.
    #[test]
    fn hashes_are_fixed_and_spread() {
        assert_eq!(hash_codes(&[]), 0);
        assert_ne!(hash_codes(&[1, 2]), hash_codes(&[2, 1]));
        assert_ne!(hash_str("ab"), hash_str("ba"));
        assert_ne!(hash_str(""), hash_str("\0"));
        assert_eq!(hash_str("12345678x"), hash_str("12345678x"));
        let mut a = CodeHasher::default();
        a.write_u64(7);
        let mut b = CodeHasher::default();
        b.write(&7u64.to_le_bytes()[..1]);
        assert_eq!(
            a.finish(),
            b.finish(),
            "one byte 7 and the word 7 absorb alike"
        );
    }

    /// SplitMix64's published sequence from seed 0.
    #[test]
    fn splitmix64_is_the_reference_sequence() {
        let mut state = 0;
        assert_eq!(splitmix64(&mut state), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut state), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(state, GOLDEN.wrapping_mul(2));
    }
}

//! Exhaustive search: checks every transformation of the lattice in id order (batches are checked
//! in parallel). Optimal when it finishes; anytime otherwise. Works for spaces of any size, but
//! only small ones can be finished.

use super::{Ctx, Phase};
use crate::lattice::{Lattice, Levels};

/// Transformations checked per parallel batch.
const BATCH: usize = 256;

/// The transformation after `levels` in id order (last QI fastest), if any.
pub(crate) fn next_levels(lattice: &Lattice, levels: &[u8]) -> Option<Levels> {
    let mut next = levels.to_vec();
    for i in (0..next.len()).rev() {
        if next[i] < lattice.max()[i] {
            next[i] += 1;
            return Some(next);
        }
        next[i] = lattice.min()[i];
    }
    None
}

/// Checks everything; returns true if the whole space was checked.
pub(crate) fn run(ctx: &mut Ctx<'_, '_>) -> bool {
    ctx.set_phase(Phase::Searching);
    let lattice = ctx.lattice();
    let mut cur = Some(lattice.bottom());
    let mut explored = 0u64;
    while cur.is_some() {
        let mut batch = Vec::with_capacity(BATCH);
        while batch.len() < BATCH {
            let Some(c) = cur.take() else { break };
            cur = next_levels(lattice, &c);
            batch.push(c);
        }
        let done = ctx.check_all(&batch).len();
        explored += done as u64;
        ctx.set_explored(explored);
        if done < batch.len() || (cur.is_some() && ctx.should_stop()) {
            return false;
        }
    }
    true
}

//! Work that stops with its request: a [`CancelOnDrop`] held by the request's future raises the
//! work's cancel flag when the future is dropped (the client went away, or the request timed
//! out), so a hierarchy build or a risk analysis on a blocking thread stops at its next step.

use deid_engine::CancelFlag;

/// Raises its flag when dropped.
pub(crate) struct CancelOnDrop(pub CancelFlag);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_the_request_raises_the_cancel_flag() {
        let cancel = CancelFlag::new();
        let guard = CancelOnDrop(cancel.clone());
        assert!(!cancel.is_cancelled());
        drop(guard);
        assert!(cancel.is_cancelled());
    }
}

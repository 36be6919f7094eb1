//! API tests.

//! Tests of the quality models.

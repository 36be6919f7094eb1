//! Integration tests of the engine, in one binary: ARX fixtures, the adult optimum, search
//! outputs and random tables verified by an independent checker (`common::independent`, which
//! shares no code with the engine), the hierarchy builders, and the layering of the engine's
//! modules (no import cycle).

mod adult_optimum;
mod builder_props;
mod builder_spec;
mod candidates;
mod common;
mod dp;
mod fixtures;
mod floor;
mod frequency;
mod layering;
mod local;
mod microaggregation;
mod plan;
mod population;
mod presence;
mod properties;
mod qi_risks;
mod search_outputs;
mod verify;

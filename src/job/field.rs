//! The dotted paths of a job specification's fields, as errors name them
//! (`attributes.age.hierarchy`, `privacy[1]`, `levels.zip`): one home for the paths that are
//! built from names and positions.

/// `attributes.<column>`: a column's attribute.
pub fn attribute(column: &str) -> String {
    format!("attributes.{column}")
}

/// `attributes.<column>.hierarchy`: a column's hierarchy.
pub fn hierarchy(column: &str) -> String {
    format!("attributes.{column}.hierarchy")
}

/// `attributes.<column>.microaggregation`: a column's aggregate.
pub fn microaggregation(column: &str) -> String {
    format!("attributes.{column}.microaggregation")
}

/// `privacy[<i>]`: the i-th privacy model.
pub fn privacy(i: usize) -> String {
    format!("privacy[{i}]")
}

/// `levels.<column>`: a column's level in an evaluation.
pub fn levels(column: &str) -> String {
    format!("levels.{column}")
}

//! The `deid` binary.

fn main() {
    println!("deid");
}

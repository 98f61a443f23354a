//! The `heddle` command: a thin shell over the library.
fn main() {
    std::process::exit(heddle::cli::main());
}

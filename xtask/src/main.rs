//! `cargo xtask`: project automation for tinygrad-rs.
//!
//! Commands:
//! - `bench`: the kernel and end-to-end performance table (lands with the CPU path).

use std::process::ExitCode;

const HELP: &str = "\
cargo xtask <command>

Commands:
  bench    kernel and end-to-end performance table, with ratios against references
           measured in the same run (available once the CPU path lands)
  help     print this message
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("help" | "--help" | "-h") => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Some("bench") => {
            eprintln!("xtask bench: no benchmarks yet; the CPU path has not landed");
            ExitCode::FAILURE
        }
        Some(other) => {
            eprintln!("xtask: unknown command {other:?}\n\n{HELP}");
            ExitCode::FAILURE
        }
    }
}

//! `cargo xtask`: project automation for tinygrad-rs.
//!
//! Commands:
//! - `bench`: the kernel and end-to-end performance table (see [`mod@bench`]).

mod bench;

use std::process::ExitCode;

const HELP: &str = "\
cargo xtask <command>

Commands:
  bench [--quick] [NAME...]
           kernel and end-to-end performance table (medians of several runs), with ratios
           against references measured in the same run. NAMEs select rows by substring:
           matmul256 matmul512 matmul1024 elementwise sum latency
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
            if cfg!(debug_assertions) {
                eprintln!(
                    "xtask bench: note: built without optimizations; numbers are not representative"
                );
            }
            let rest = &args[1..];
            let opts = bench::Opts {
                quick: rest.iter().any(|a| a == "--quick"),
                filter: rest
                    .iter()
                    .filter(|a| !a.starts_with("--"))
                    .cloned()
                    .collect(),
            };
            bench::run(&opts);
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("xtask: unknown command {other:?}\n\n{HELP}");
            ExitCode::FAILURE
        }
    }
}

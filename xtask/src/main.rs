//! `cargo xtask`: project automation for tinygrad-rs.
//!
//! Commands:
//! - `bench`: the kernel and end-to-end performance table (see [`mod@bench`]; its Python
//!   references — numpy, PyTorch, tinygrad — run through [`pyref`]).

mod bench;
mod pyref;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tinygrad_tensor::environment;

/// Project automation for tinygrad-rs.
#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", after_help = environment::help())]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The kernel and end-to-end performance table (medians of several runs), with ratios
    /// against references measured in the same run: numpy, PyTorch and tinygrad from the first
    /// Python that has each (`n/a` with the reason otherwise), onnxruntime, llama.cpp's
    /// `llama-bench`, Rust stream probes.
    #[command(after_help = bench_after_help())]
    Bench {
        /// Without NAMEs, a small subset (smaller sizes, fewer runs): a smoke test well under a
        /// minute; with NAMEs, those rows with fewer runs.
        #[arg(long)]
        quick: bool,
        /// Also write the rows as a JSON array of {name, unit, unit_value, ours_ms, ref_name,
        /// ref_ms, ratio, note}.
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// The Python interpreter of the references.
        #[arg(long, value_name = "PATH")]
        python: Option<PathBuf>,
        /// Rows to run, by substring of their keys (`=KEY`: that key only); all without.
        #[arg(value_name = "NAME")]
        filter: Vec<String>,
    },
    /// (internal) one WEBGPU job of `bench`, timed in a child process: see `bench::device`.
    #[command(name = "__device-job", hide = true)]
    DeviceJob {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `bench --help`'s list of row keys, wrapped to 80 columns, then the environment variables.
fn bench_after_help() -> String {
    let mut text = String::from("Row keys:\n ");
    let mut width = 1;
    for k in bench::keys() {
        if width + 1 + k.len() > 80 {
            text.push_str("\n ");
            width = 1;
        }
        text.push(' ');
        text.push_str(k);
        width += 1 + k.len();
    }
    text.push_str("\n\n");
    text.push_str(&environment::help());
    text
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Bench {
            quick,
            json,
            python,
            filter,
        } => {
            if cfg!(debug_assertions) {
                eprintln!(
                    "xtask bench: note: built without optimizations; numbers are not representative"
                );
            }
            if let Some(python) = python {
                pyref::set_python(python);
            }
            let opts = bench::Opts {
                quick,
                filter,
                json,
            };
            match bench::run(&opts) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("xtask bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::DeviceJob { args } => match bench::device_child(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask __device-job: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

//! `cargo xtask`: project automation for tinygrad-rs.
//!
//! Commands:
//! - `bench`: the kernel and end-to-end performance table (see [`mod@bench`]; its Python
//!   references — numpy, PyTorch, tinygrad — run through [`pyref`]).

mod bench;
mod pyref;

use std::path::PathBuf;
use std::process::ExitCode;

const HELP: &str = "\
cargo xtask <command>

Commands:
  bench [--quick] [--json PATH] [--python PATH] [NAME...]
           kernel and end-to-end performance table (medians of several runs), with ratios
           against references measured in the same run: numpy, PyTorch and tinygrad from the
           first Python that has each (`n/a` with the reason otherwise), Rust stream probes.
           NAMEs select rows by substring of their keys (`=KEY`: that key only):
           {KEYS}
           --quick: without NAMEs, a small subset (smaller sizes, fewer runs), a smoke test
           well under a minute; with NAMEs, those rows with fewer runs.
           --json PATH: also write the rows as a JSON array of
           {name, unit, unit_value, ours_ms, ref_name, ref_ms, ratio, note}.
           --python PATH: the Python interpreter of the references.
  help     print this message
";

fn help() -> String {
    // The keys, wrapped to the help text's width.
    let mut keys = String::new();
    let mut width = 0;
    for k in bench::keys() {
        if width > 0 && width + 1 + k.len() > 80 {
            keys.push_str("\n           ");
            width = 0;
        } else if width > 0 {
            keys.push(' ');
            width += 1;
        }
        keys.push_str(k);
        width += k.len();
    }
    HELP.replace("{KEYS}", &keys)
}

/// Parses `bench`'s arguments.
fn bench_opts(args: &[String]) -> Result<bench::Opts, String> {
    let mut opts = bench::Opts {
        quick: false,
        filter: vec![],
        json: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => opts.quick = true,
            "--json" => {
                let path = it.next().ok_or("--json needs a file path")?;
                opts.json = Some(PathBuf::from(path));
            }
            _ if a.starts_with("--json=") => {
                opts.json = Some(PathBuf::from(&a["--json=".len()..]));
            }
            "--python" => {
                let path = it.next().ok_or("--python needs an interpreter path")?;
                pyref::set_python(PathBuf::from(path));
            }
            _ if a.starts_with("--python=") => {
                pyref::set_python(PathBuf::from(&a["--python=".len()..]));
            }
            _ if a.starts_with('-') => return Err(format!("unknown option {a:?}")),
            _ => opts.filter.push(a.clone()),
        }
    }
    Ok(opts)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("help" | "--help" | "-h") => {
            print!("{}", help());
            ExitCode::SUCCESS
        }
        Some("bench") => {
            if cfg!(debug_assertions) {
                eprintln!(
                    "xtask bench: note: built without optimizations; numbers are not representative"
                );
            }
            let result = bench_opts(&args[1..]).and_then(|opts| bench::run(&opts));
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("xtask bench: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        // (internal) one WEBGPU job of `bench`, timed in a child process: see `bench::device`
        Some("__device-job") => match bench::device_child(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("xtask __device-job: {e}");
                ExitCode::FAILURE
            }
        },
        Some(other) => {
            eprintln!("xtask: unknown command {other:?}\n\n{}", help());
            ExitCode::FAILURE
        }
    }
}

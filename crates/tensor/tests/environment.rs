//! `environment::VARIABLES` lists every environment variable the library reads: each name read
//! under `crates/*/src` (`std::env::var`/`var_os`, the collectives' `env_usize`, the Jit's `flag`,
//! the native kernels' `switch_on`) has an entry, and every entry is read somewhere — the `--help`
//! of the examples and `xtask` prints this list, so it must not fall behind the code.

mod common;

use common::rust_files;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use tinygrad_tensor::environment::{VARIABLES, help};

/// The upper-case names passed as string literals to `var(`, `env_usize(` and the like in `text`.
fn names_read(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for call in [
        "var(\"",
        "var_os(\"",
        "env_usize(\"",
        "flag(\"",
        "switch_on(\"",
    ] {
        for (at, _) in text.match_indices(call) {
            let rest = &text[at + call.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.is_empty() && rest[name.len()..].starts_with('"') {
                out.push(name);
            }
        }
    }
    out
}

/// The system's own variables, read to find a cache directory: not the library's settings.
const SYSTEM: [&str; 2] = ["HOME", "XDG_CACHE_HOME"];

/// Every library source file: `crates/<crate>/src/**/*.rs`.
fn library_sources() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for entry in fs::read_dir(&crates).expect("read crates/") {
        let src = entry.expect("dir entry").path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    files.sort();
    files
}

#[test]
fn every_variable_read_is_listed_and_every_listed_one_is_read() {
    let listed: BTreeSet<&str> = VARIABLES.iter().map(|(n, _)| *n).collect();
    assert_eq!(listed.len(), VARIABLES.len(), "a name is listed twice");
    let mut read = BTreeSet::new();
    let mut unlisted = Vec::new();
    for file in library_sources() {
        let text = fs::read_to_string(&file).expect("read source");
        if file.ends_with("environment.rs") {
            continue; // the list itself
        }
        for name in names_read(&text) {
            if SYSTEM.contains(&name.as_str()) {
                continue;
            }
            if !listed.contains(name.as_str()) {
                unlisted.push(format!("{}: {name}", file.display()));
            }
            read.insert(name);
        }
    }
    // The scan itself must see the variables it is about (a broken scan would pass vacuously).
    for known in ["DEV", "DEBUG", "CPU_GEMM", "BEAM"] {
        assert!(read.contains(known), "the scan did not find {known}");
    }
    assert!(
        unlisted.is_empty(),
        "read but not in environment::VARIABLES: {unlisted:?}"
    );
    let stale: Vec<&&str> = listed.iter().filter(|n| !read.contains(**n)).collect();
    assert!(
        stale.is_empty(),
        "listed in environment::VARIABLES but read nowhere: {stale:?}"
    );
}

#[test]
fn help_lists_every_variable_with_its_meaning() {
    let text = help();
    for (name, what) in VARIABLES {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(*name))
            .unwrap_or_else(|| panic!("{name} missing from help():\n{text}"));
        assert!(line.ends_with(what), "{name}'s line: {line:?}");
    }
}

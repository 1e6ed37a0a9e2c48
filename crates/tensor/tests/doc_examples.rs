//! Every public function of the crate has a rustdoc example (a fenced code block in its doc
//! comment), which `cargo test` runs: the API's documentation promise, checked on the sources.

mod common;

use common::rust_files;
use std::fs;
use std::path::Path;

/// `file:line: name` of each `pub fn` whose doc comment (the `///` and attribute lines right
/// above it) has no code block.
fn functions_without_examples(src: &Path) -> (usize, Vec<String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let (mut total, mut missing) = (0, Vec::new());
    for file in files {
        let text = fs::read_to_string(&file).expect("read source");
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix("pub fn ") else {
                continue;
            };
            total += 1;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let has_example = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim_start())
                .take_while(|l| l.starts_with("///") || l.starts_with("#["))
                .any(|l| l.starts_with("/// ```"));
            if !has_example {
                missing.push(format!("{}:{}: {name}", file.display(), i + 1));
            }
        }
    }
    (total, missing)
}

#[test]
fn every_public_function_has_a_doc_example() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (total, missing) = functions_without_examples(&src);
    assert!(
        total > 300,
        "found only {total} pub fns under {}",
        src.display()
    );
    assert!(
        missing.is_empty(),
        "{} of {total} public functions have no rustdoc example:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

/// The scan itself: a function without an example is reported, one with an example is not.
#[test]
fn the_scan_finds_a_missing_example() {
    let dir = std::env::temp_dir().join(format!("doc_examples_scan_{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    fs::write(
        dir.join("a.rs"),
        "/// Documented.\n///\n/// ```\n/// assert!(true);\n/// ```\n#[inline]\npub fn good() {}\n\n\
         /// No example.\npub fn bad() {}\n",
    )
    .expect("write");
    let (total, missing) = functions_without_examples(&dir);
    fs::remove_dir_all(&dir).expect("cleanup");
    assert_eq!(total, 2);
    assert_eq!(missing.len(), 1);
    assert!(missing[0].ends_with("a.rs:10: bad"), "{missing:?}");
}

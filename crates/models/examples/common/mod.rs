//! What the examples share: a spinner with the elapsed time while a model loads.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Runs `load`, showing `what` with a spinner and the elapsed time on stderr until it returns.
pub fn with_spinner<T>(what: &str, load: impl FnOnce() -> T) -> T {
    let bar = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed_precise}")
            .expect("a valid template"),
    );
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(100));
    let out = load();
    bar.finish_and_clear();
    out
}

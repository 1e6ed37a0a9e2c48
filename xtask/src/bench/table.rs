//! The table: a row's unit, references and result, printed one line per reference and written
//! as JSON.

use super::*;

/// The unit of a row's number, with what converts a wall time into it.
#[derive(Clone, Copy)]
pub(super) enum Unit {
    /// GFLOP/s for this many floating-point operations per run.
    Gflops(f64),
    /// GB/s for this many bytes moved per run.
    Gbs(f64),
    /// Milliseconds per run.
    Ms,
    /// Microseconds per run.
    Us,
    /// Tokens per second for this many tokens per run.
    TokensPerSec(f64),
}

impl Unit {
    fn label(self) -> &'static str {
        match self {
            Unit::Gflops(_) => "GFLOP/s",
            Unit::Gbs(_) => "GB/s",
            Unit::Ms => "ms",
            Unit::Us => "µs",
            Unit::TokensPerSec(_) => "tok/s",
        }
    }

    fn value(self, secs: f64) -> f64 {
        match self {
            Unit::Gflops(flop) => flop / secs / 1e9,
            Unit::Gbs(bytes) => bytes / secs / 1e9,
            Unit::Ms => secs * 1e3,
            Unit::Us => secs * 1e6,
            Unit::TokensPerSec(tokens) => tokens / secs,
        }
    }

    fn higher_is_better(self) -> bool {
        matches!(self, Unit::Gflops(_) | Unit::Gbs(_) | Unit::TokensPerSec(_))
    }
}

/// A reference a row is compared with.
#[derive(Clone)]
pub(super) struct Reference {
    pub(super) name: String,
    /// Its median wall time (s) and its number in the row's unit; `None`: not measured (`n/a`).
    pub(super) measured: Option<(f64, f64)>,
    /// Why it is missing, or a failed check of our result against it.
    pub(super) note: String,
}

impl Reference {
    /// A reference doing the same work as the row, so its number is in the row's unit.
    pub(super) fn timed(name: &str, secs: f64, unit: Unit, ok: bool) -> Reference {
        Reference {
            name: name.into(),
            measured: Some((secs, unit.value(secs))),
            note: check(ok, &format!("vs {name}")),
        }
    }

    /// A Python reference: `n/a` with the reason when it didn't run; else timed, and our
    /// result checked against its output with `ok`.
    pub(super) fn py(
        lib: Lib,
        run: Result<PyRun, String>,
        unit: Unit,
        ok: impl FnOnce(&[f32]) -> bool,
    ) -> Reference {
        match run {
            Ok(r) => Reference::timed(lib.label(), r.secs, unit, ok(&r.out)),
            Err(why) => Reference {
                name: lib.label().into(),
                measured: None,
                note: why,
            },
        }
    }

    /// [`Reference::py`] for numpy.
    pub(super) fn numpy(
        run: Result<PyRun, String>,
        unit: Unit,
        ok: impl FnOnce(&[f32]) -> bool,
    ) -> Reference {
        Reference::py(Lib::Numpy, run, unit, ok)
    }

    /// [`Reference::py`] for PyTorch.
    pub(super) fn torch(
        run: Result<PyRun, String>,
        unit: Unit,
        ok: impl FnOnce(&[f32]) -> bool,
    ) -> Reference {
        Reference::py(Lib::Torch, run, unit, ok)
    }
}

/// One benchmark's result: our median time and its references.
pub(super) struct Row {
    pub(super) name: String,
    /// Our median wall time, in seconds.
    pub(super) secs: f64,
    pub(super) unit: Unit,
    pub(super) refs: Vec<Reference>,
    pub(super) note: String,
}

impl Row {
    fn ours(&self) -> f64 {
        self.unit.value(self.secs)
    }

    /// Above 1: tinygrad-rs is ahead of the reference.
    pub(super) fn ratio(&self, r: &Reference) -> Option<f64> {
        let (_, v) = r.measured?;
        Some(if self.unit.higher_is_better() {
            self.ours() / v
        } else {
            v / self.ours()
        })
    }
}

/// One line of the table / one JSON object: a row with one of its references (or none).
pub(super) struct Line<'a> {
    row: &'a Row,
    reference: Option<&'a Reference>,
}

impl Line<'_> {
    fn note(&self) -> String {
        let r = self.reference.map_or("", |r| r.note.as_str());
        match (self.row.note.is_empty(), r.is_empty()) {
            (_, true) => self.row.note.clone(),
            (true, false) => r.to_string(),
            (false, false) => format!("{}; {r}", self.row.note),
        }
    }
}

pub(super) fn lines(row: &Row) -> Vec<Line<'_>> {
    if row.refs.is_empty() {
        vec![Line {
            row,
            reference: None,
        }]
    } else {
        row.refs
            .iter()
            .map(|r| Line {
                row,
                reference: Some(r),
            })
            .collect()
    }
}

pub(super) fn print_header() {
    println!(
        "| {:<38} | {:>11} | {:<7} | {:>10} | {:<17} | {:>10} | {:>10} | {:>6} | note",
        "benchmark", "tinygrad-rs", "unit", "ms", "reference", "ref value", "ref ms", "ratio"
    );
    println!(
        "|{:-<40}|{:->13}|{:-<9}|{:->12}|{:-<19}|{:->12}|{:->12}|{:->8}|------",
        "", "", "", "", "", "", "", ""
    );
}

pub(super) fn print_line(l: &Line) {
    let r = l.row;
    let na = || "n/a".to_string();
    let (rname, rval, rms, ratio) = match l.reference {
        None => (na(), na(), na(), na()),
        Some(x) => match x.measured {
            None => (x.name.clone(), na(), na(), na()),
            Some((secs, v)) => (
                x.name.clone(),
                format!("{v:.2}"),
                format!("{:.3}", secs * 1e3),
                r.ratio(x).map_or_else(na, |q| format!("{q:.2}x")),
            ),
        },
    };
    println!(
        "| {:<38} | {:>11.2} | {:<7} | {:>10.3} | {:<17} | {:>10} | {:>10} | {:>6} | {}",
        r.name,
        r.ours(),
        r.unit.label(),
        r.secs * 1e3,
        rname,
        rval,
        rms,
        ratio,
        l.note()
    );
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => "null".into(),
    }
}

/// The rows as a JSON array (see the module documentation).
pub(super) fn to_json(rows: &[Row]) -> String {
    let objects: Vec<String> = rows
        .iter()
        .flat_map(lines)
        .map(|l| {
            let r = l.row;
            format!(
                "  {{\"name\": {}, \"unit\": {}, \"unit_value\": {}, \"ours_ms\": {}, \
                 \"ref_name\": {}, \"ref_ms\": {}, \"ratio\": {}, \"note\": {}}}",
                json_str(&r.name),
                json_str(r.unit.label()),
                json_num(Some(r.ours())),
                json_num(Some(r.secs * 1e3)),
                l.reference.map_or("null".into(), |x| json_str(&x.name)),
                json_num(l.reference.and_then(|x| x.measured).map(|(s, _)| s * 1e3)),
                json_num(l.reference.and_then(|x| r.ratio(x))),
                json_str(&l.note()),
            )
        })
        .collect();
    format!("[\n{}\n]\n", objects.join(",\n"))
}

//! A standalone integer expression simplifier built on `tinygrad-uop` alone.
//!
//! ```text
//! cargo run -p tinygrad-uop --example simplify -- "(x*4 + y*4) // 4" x=0..10 y=0..10
//! (x+y)   [0, 20]
//! ```
//!
//! Usage: `simplify [EXPR] [NAME=LO..HI]...`. Each `NAME=LO..HI` gives a variable inclusive
//! bounds (`x=-5..5`); every variable used must have bounds. Without `EXPR`, expressions are
//! read from standard input, one per line. For each expression it prints the simplified form
//! and its bounds `[vmin, vmax]`.
//!
//! Syntax (C-like precedence, `index` arithmetic with truncating division):
//! - numbers, variables (`[A-Za-z_][A-Za-z0-9_]*`), parentheses;
//! - `-x`, `!c`;
//! - `a * b`, `a // b` (or `a / b`), `a % b`; `a + b`, `a - b`;
//! - `a < b`, `a <= b`, `a > b`, `a >= b`; `a == b`, `a != b`; `c & d`, `c | d` (bool);
//! - `max(a, b)`, `min(a, b)`, `where(c, a, b)`.

use std::collections::HashMap;
use std::io::BufRead;

use clap::Parser as _;
use tinygrad_uop::UOp;

/// Simplifies integer expressions with tinygrad's symbolic rules and prints each one's bounds.
#[derive(clap::Parser)]
#[command(after_help = "An expression that starts with `-` goes after `--`: \
                        simplify x=0..9 -- \"-x + 3\". Without an expression, they are read \
                        from standard input, one per line.")]
struct Args {
    /// Expressions to simplify, and `NAME=LO..HI` inclusive bounds for their variables.
    #[arg(value_name = "EXPR | NAME=LO..HI")]
    args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Ident(String),
    Op(&'static str),
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    const OPS: [&str; 19] = [
        "//", "<=", ">=", "==", "!=", "+", "-", "*", "/", "%", "<", ">", "(", ")", ",", "!", "&",
        "|", "=",
    ];
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let st = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            out.push(Tok::Num(
                s[st..i].parse().map_err(|e| format!("bad number: {e}"))?,
            ));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let st = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[st..i].to_string()));
        } else if let Some(op) = OPS.iter().find(|o| s[i..].starts_with(**o)) {
            out.push(Tok::Op(op));
            i += op.len();
        } else {
            return Err(format!("unexpected character {c:?} at {i}"));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    toks: Vec<Tok>,
    pos: usize,
    vars: &'a HashMap<String, (i64, i64)>,
}

impl Parser<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.pos) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(format!("expected {op:?} at token {}", self.pos))
        }
    }

    /// Binary levels, lowest precedence first.
    fn level(&mut self, lvl: usize) -> Result<UOp, String> {
        const LEVELS: [&[&str]; 5] = [
            &["|"],
            &["&"],
            &["==", "!="],
            &["<", "<=", ">", ">="],
            &["+", "-"],
        ];
        if lvl == LEVELS.len() {
            return self.term();
        }
        let mut lhs = self.level(lvl + 1)?;
        while let Some(op) = self.peek_op().filter(|o| LEVELS[lvl].contains(o)) {
            self.pos += 1;
            let rhs = self.level(lvl + 1)?;
            lhs = match op {
                "|" => &lhs | &rhs,
                "&" => &lhs & &rhs,
                "==" => lhs.eq_(&rhs),
                "!=" => lhs.ne(&rhs),
                "<" => lhs.lt(&rhs),
                "<=" => rhs.lt(&lhs).neg(),
                ">" => rhs.lt(&lhs),
                ">=" => lhs.ge(&rhs),
                "+" => &lhs + &rhs,
                _ => &lhs - &rhs,
            };
        }
        Ok(lhs)
    }

    fn term(&mut self) -> Result<UOp, String> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.peek_op().filter(|o| ["*", "/", "//", "%"].contains(o)) {
            self.pos += 1;
            let rhs = self.unary()?;
            lhs = match op {
                "*" => &lhs * &rhs,
                "%" => &lhs % &rhs,
                _ => lhs.idiv(&rhs),
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<UOp, String> {
        if self.eat("-") {
            return Ok(self.unary()?.neg());
        }
        if self.eat("!") {
            return Ok(self.unary()?.ne(true));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<UOp, String> {
        let tok = self
            .toks
            .get(self.pos)
            .cloned()
            .ok_or("unexpected end of input")?;
        self.pos += 1;
        match tok {
            Tok::Num(n) => Ok(UOp::index(n)),
            Tok::Op("(") => {
                let e = self.level(0)?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Ident(name) if ["max", "min", "where"].contains(&name.as_str()) => {
                self.expect("(")?;
                let mut args = vec![self.level(0)?];
                while self.eat(",") {
                    args.push(self.level(0)?);
                }
                self.expect(")")?;
                match (name.as_str(), args.as_slice()) {
                    ("max", [a, b]) => Ok(a.maximum(b)),
                    ("min", [a, b]) => Ok(a.minimum(b)),
                    ("where", [c, a, b]) => Ok(c.where_(a, b)),
                    _ => Err(format!("wrong number of arguments to {name}")),
                }
            }
            Tok::Ident(name) => {
                let (lo, hi) = self.vars.get(&name).ok_or(format!(
                    "variable {name} has no bounds (give {name}=LO..HI)"
                ))?;
                Ok(UOp::variable(&name, *lo, *hi))
            }
            t => Err(format!("unexpected token {t:?}")),
        }
    }
}

/// Parses `src` into an `index` expression over the variables in `vars`.
fn parse(src: &str, vars: &HashMap<String, (i64, i64)>) -> Result<UOp, String> {
    let mut p = Parser {
        toks: lex(src)?,
        pos: 0,
        vars,
    };
    let e = p.level(0)?;
    if p.pos != p.toks.len() {
        return Err(format!(
            "unexpected {:?} after the expression",
            p.toks[p.pos]
        ));
    }
    Ok(e)
}

fn parse_bounds(arg: &str) -> Option<(String, (i64, i64))> {
    let (name, range) = arg.split_once('=')?;
    let (lo, hi) = range.split_once("..")?;
    let (lo, hi) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
    (lo <= hi).then(|| (name.trim().to_string(), (lo, hi)))
}

fn run(expr: &str, vars: &HashMap<String, (i64, i64)>) {
    match parse(expr, vars) {
        Ok(e) => {
            let s = e.simplify();
            println!("{s}   [{}, {}]", s.vmin(), s.vmax());
        }
        Err(msg) => eprintln!("error: {msg}"),
    }
}

fn main() {
    let mut vars = HashMap::new();
    let mut exprs = Vec::new();
    for arg in Args::parse().args {
        match parse_bounds(&arg) {
            Some((name, b)) => {
                vars.insert(name, b);
            }
            None if arg.contains('=')
                && !arg.contains("==")
                && !arg.contains("<=")
                && !arg.contains(">=")
                && !arg.contains("!=") =>
            {
                eprintln!("error: bad bounds {arg:?}, expected NAME=LO..HI");
                std::process::exit(2);
            }
            None => exprs.push(arg),
        }
    }
    if exprs.is_empty() {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if !line.trim().is_empty() {
                run(&line, &vars);
            }
        }
    } else {
        for e in &exprs {
            run(e, &vars);
        }
    }
}

//! A compact infix rendering of (mostly integer) expressions, e.g. `((x*4)+y)//4`, used by
//! `Display for UOp` and the standalone simplifier example. Nodes it has no syntax for print
//! as `OP(src, ...)`.

use crate::{Arg, Ops, UOp};

/// Renders `u` as an infix expression.
pub fn render_expr(u: &UOp) -> String {
    let r = |i: usize| render_expr(u.s(i));
    match u.op() {
        Ops::Const => match u.arg() {
            Arg::Const(c) => c.to_string(),
            a => a.to_string(),
        },
        Ops::DefineVar => match u.arg() {
            Arg::Var(name, ..) => name.to_string(),
            a => a.to_string(),
        },
        Ops::Range => match u.arg() {
            Arg::Range(id, _) => format!("r{id}"),
            a => a.to_string(),
        },
        Ops::Special => match u.arg() {
            Arg::Str(s) => s.to_string(),
            a => a.to_string(),
        },
        Ops::Add if u.s(1).as_int().is_some_and(|c| c < 0 && c != i64::MIN) || is_neg(u.s(1)) => {
            // a + b*-1 prints as a - b, a + -3 as a - 3
            let b = if let Some(c) = u.s(1).as_int() {
                (-c).to_string()
            } else {
                render_expr(u.s(1).s(0))
            };
            format!("({}-{})", r(0), b)
        }
        Ops::Mul if u.s(1).as_int() == Some(-1) => format!("(-{})", r(0)),
        Ops::CmpNe
            if u.dtype().is_bool()
                && u.s(1).as_const() == Some(tinygrad_dtype::ConstValue::Bool(true)) =>
        {
            format!("(!{})", r(0))
        }
        op if op.is_binary() => {
            let sym = match op {
                Ops::Add => "+",
                Ops::Mul => "*",
                Ops::IDiv => "//",
                Ops::Mod => "%",
                Ops::Sub => "-",
                Ops::FDiv => "/",
                Ops::CmpLt => "<",
                Ops::CmpNe => "!=",
                Ops::CmpEq => "==",
                Ops::And => "&",
                Ops::Or => "|",
                Ops::Xor => "^",
                Ops::Shl => "<<",
                Ops::Shr => ">>",
                _ => return format!("{}({}, {})", op.name().to_lowercase(), r(0), r(1)),
            };
            format!("({}{}{})", r(0), sym, r(1))
        }
        Ops::Where => format!("({} ? {} : {})", r(0), r(1), r(2)),
        Ops::Cast => format!("({}){}", u.dtype(), r(0)),
        op => {
            let srcs: Vec<String> = u.src().iter().map(render_expr).collect();
            format!("{}({})", op.name(), srcs.join(", "))
        }
    }
}

fn is_neg(u: &UOp) -> bool {
    u.op() == Ops::Mul && u.s(1).as_int() == Some(-1)
}

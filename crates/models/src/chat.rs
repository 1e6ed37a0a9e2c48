//! Chat templates: a model's `chat_template` (Jinja, from `tokenizer.chat_template` in a GGUF
//! file) rendered with `minijinja` the way transformers' `apply_chat_template` renders it —
//! blocks trimmed (`trim_blocks`, `lstrip_blocks`), loop controls, Python's string methods
//! (`.strip()`, `.startswith()`, ...), `tojson`, `raise_exception` and `strftime_now` — with
//! `messages`, `add_generation_prompt` and the tokenizer's `bos_token`/`eos_token`.

use serde_json::{Value, json};

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Who speaks: `system`, `user` or `assistant` (what the model's template knows).
    pub role: String,
    /// What they say.
    pub content: String,
}

impl Message {
    /// A message of `role` saying `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// `strftime_now(format)`: the current UTC date and time formatted with the usual `%Y %m %d %H
/// %M %S %B %b %A %a %j %%` codes (templates use it to date the system prompt).
fn strftime_now(format: &str) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    strftime(secs, format)
}

/// [`strftime_now`] at `secs` seconds since the Unix epoch.
fn strftime(secs: i64, format: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // civil date from days since 1970-01-01 (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let before: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = before[(month - 1) as usize] + day + i64::from(leap && month > 2);
    let month_name = MONTHS[(month - 1) as usize];
    let day_name = DAYS[days.rem_euclid(7) as usize];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&year.to_string()),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('B') => out.push_str(month_name),
            Some('b') => out.push_str(&month_name[..3]),
            Some('A') => out.push_str(day_name),
            Some('a') => out.push_str(&day_name[..3]),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Renders `template` for `messages`; `add_generation_prompt` opens the assistant's turn.
/// `bos_token` and `eos_token` are the tokenizer's (empty strings when it has none).
///
/// # Errors
/// The template's syntax error or the error it raised (`raise_exception`), as text.
pub(crate) fn render(
    template: &str,
    messages: &[Message],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
) -> Result<String, String> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                message,
            ))
        },
    );
    env.add_function("strftime_now", |format: String| strftime_now(&format));
    let tmpl = env
        .template_from_str(template)
        .map_err(|e| format!("the chat template does not parse: {e:#}"))?;
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    let ctx = json!({
        "messages": messages,
        "add_generation_prompt": add_generation_prompt,
        "bos_token": bos_token,
        "eos_token": eos_token,
    });
    tmpl.render(minijinja::Value::from_serialize(&ctx))
        .map_err(|e| format!("the chat template failed to render: {e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strftime_formats_known_dates() {
        // 2024-02-29 13:05:09 UTC, a Thursday, day 60 of a leap year
        let t = 1_709_211_909;
        assert_eq!(
            strftime(t, "%Y-%m-%d %H:%M:%S %j %A %a %B %b %%"),
            "2024-02-29 13:05:09 060 Thursday Thu February Feb %"
        );
        assert_eq!(strftime(0, "%d %B %Y %A"), "01 January 1970 Thursday");
        assert_eq!(strftime(951_782_400, "%Y-%m-%d %j"), "2000-02-29 060");
    }

    #[test]
    fn templates_raise_and_use_python_methods() {
        let m = [Message::new("user", "  hi  ")];
        let t = "{% for m in messages %}{{ m['content'].strip() }}{% endfor %}";
        assert_eq!(render(t, &m, false, "", "").unwrap(), "hi");
        let t = "{{ raise_exception('no system role') }}";
        let e = render(t, &m, false, "", "").unwrap_err();
        assert!(e.contains("no system role"), "{e}");
        let e = render("{% for %}", &m, false, "", "").unwrap_err();
        assert!(e.contains("does not parse"), "{e}");
        // blocks are trimmed as transformers' environment trims them
        let t = "{% if add_generation_prompt %}\n  <gen>{% endif %}\n{{ bos_token }}";
        assert_eq!(render(t, &m, true, "<s>", "").unwrap(), "  <gen><s>");
    }
}

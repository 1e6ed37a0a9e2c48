//! Reading Hugging Face `config.json` files: typed field access whose errors name the file, the
//! field and the value expected.

use std::path::Path;

use serde_json::Value;

use crate::error::{ModelError, Result};

/// A parsed JSON configuration file and its path (for errors).
#[derive(Debug, Clone)]
pub struct JsonConfig {
    /// The file, as errors name it.
    pub path: String,
    /// The parsed document (a JSON object).
    pub value: Value,
}

impl JsonConfig {
    /// Reads and parses `path`, which must hold a JSON object.
    ///
    /// # Errors
    /// If the file can't be read, is not JSON, or is not an object.
    pub fn read(path: &Path) -> Result<JsonConfig> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Io {
            path: name.clone(),
            message: e.to_string(),
        })?;
        JsonConfig::parse(&text, &name)
    }

    /// Parses `text` (errors name it `path`), which must be a JSON object.
    ///
    /// # Errors
    /// If the text is not JSON or not an object.
    pub fn parse(text: &str, path: &str) -> Result<JsonConfig> {
        let value: Value = serde_json::from_str(text).map_err(|e| ModelError::Config {
            path: path.to_string(),
            field: String::new(),
            message: format!("not valid JSON: {e}"),
        })?;
        if !value.is_object() {
            return Err(ModelError::Config {
                path: path.to_string(),
                field: String::new(),
                message: "expected a JSON object".to_string(),
            });
        }
        Ok(JsonConfig {
            path: path.to_string(),
            value,
        })
    }

    /// An error about `field`.
    pub fn error(&self, field: &str, message: impl Into<String>) -> ModelError {
        ModelError::Config {
            path: self.path.clone(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// The raw value of `field`, if present and not `null`.
    pub fn get(&self, field: &str) -> Option<&Value> {
        self.value.get(field).filter(|v| !v.is_null())
    }

    /// `field` as a positive integer of at most `max`.
    ///
    /// # Errors
    /// If it is absent, not an integer, zero, or above `max`.
    pub fn usize(&self, field: &str, max: usize) -> Result<usize> {
        match self.opt_usize(field, max)? {
            Some(v) => Ok(v),
            None => Err(self.error(field, format!("missing (expected an integer in 1..={max})"))),
        }
    }

    /// `field` as a positive integer of at most `max`, `None` when absent.
    ///
    /// # Errors
    /// If it is present but not an integer in `1..=max`.
    pub fn opt_usize(&self, field: &str, max: usize) -> Result<Option<usize>> {
        let Some(v) = self.get(field) else {
            return Ok(None);
        };
        match v.as_u64() {
            Some(n) if n >= 1 && n <= max as u64 => Ok(Some(n as usize)),
            _ => Err(self.error(field, format!("expected an integer in 1..={max}, got {v}"))),
        }
    }

    /// `field` as a finite number, `default` when absent.
    ///
    /// # Errors
    /// If it is present but not a finite number.
    pub fn f64_or(&self, field: &str, default: f64) -> Result<f64> {
        let Some(v) = self.get(field) else {
            return Ok(default);
        };
        match v.as_f64() {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(self.error(field, format!("expected a finite number, got {v}"))),
        }
    }

    /// `field` as a string, `None` when absent.
    ///
    /// # Errors
    /// If it is present but not a string.
    pub fn opt_str(&self, field: &str) -> Result<Option<&str>> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.error(field, format!("expected a string, got {v}"))),
        }
    }

    /// `field` as a boolean, `default` when absent.
    ///
    /// # Errors
    /// If it is present but not a boolean.
    pub fn bool_or(&self, field: &str, default: bool) -> Result<bool> {
        match self.get(field) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.error(field, format!("expected true or false, got {v}"))),
        }
    }

    /// The model's architecture: `model_type`, else the first of `architectures`.
    pub fn model_type(&self) -> Option<String> {
        if let Some(Value::String(s)) = self.get("model_type") {
            return Some(s.to_ascii_lowercase());
        }
        self.get("architectures")
            .and_then(|a| a.as_array())
            .and_then(|a| a.first())
            .and_then(|s| s.as_str())
            .map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_checked_and_errors_name_them() {
        let c = JsonConfig::parse(
            r#"{"hidden_size": 384, "eps": 1e-12, "act": "gelu", "bad": -3, "n": null}"#,
            "config.json",
        )
        .unwrap();
        assert_eq!(c.usize("hidden_size", 1 << 20).unwrap(), 384);
        assert_eq!(c.f64_or("eps", 0.0).unwrap(), 1e-12);
        assert_eq!(c.f64_or("absent", 0.5).unwrap(), 0.5);
        assert_eq!(c.opt_str("act").unwrap(), Some("gelu"));
        assert_eq!(c.opt_usize("n", 10).unwrap(), None);
        let e = c.usize("bad", 10).unwrap_err().to_string();
        assert_eq!(
            e,
            "config.json: field `bad`: expected an integer in 1..=10, got -3"
        );
        let e = c.usize("num_layers", 10).unwrap_err().to_string();
        assert!(e.contains("`num_layers`: missing"), "{e}");
        let e = c.usize("hidden_size", 100).unwrap_err().to_string();
        assert!(e.contains("1..=100, got 384"), "{e}");
        assert!(JsonConfig::parse("[1]", "c.json").is_err());
        let e = JsonConfig::parse("{", "c.json").unwrap_err().to_string();
        assert!(e.starts_with("c.json: not valid JSON"), "{e}");
    }
}

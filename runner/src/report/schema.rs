//! A validator for the subset of JSON Schema (draft 2020-12) that
//! `docs/report-schema.json` uses: `type` (one or a list), `properties`,
//! `required`, `additionalProperties` (`false` or a schema), `items`,
//! `enum`, `const`, `minimum`, `$ref` to `#/$defs/…`. It lets the tests (and
//! users, through [`validate`]) check a document against the published
//! schema without a network or an extra dependency.

use serde_json::Value;

/// The published schema, as shipped in `docs/report-schema.json`.
pub const REPORT_SCHEMA: &str = include_str!("../../../docs/report-schema.json");

/// Checks `doc` against `schema`; returns every violation as
/// `path: problem` (empty when valid).
pub fn validate(schema: &Value, doc: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    check(schema, schema, doc, "$", &mut errs);
    errs
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

fn check(root: &Value, s: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    let Some(s) = s.as_object() else {
        if s == &Value::Bool(false) {
            errs.push(format!("{path}: not allowed"));
        }
        return;
    };
    if let Some(r) = s.get("$ref").and_then(|r| r.as_str()) {
        match r
            .strip_prefix("#/$defs/")
            .and_then(|n| root.get("$defs").and_then(|d| d.get(n)))
        {
            Some(target) => check(root, target, v, path, errs),
            None => errs.push(format!("{path}: unresolvable $ref {r}")),
        }
    }
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().filter_map(|t| t.as_str()).any(|t| type_ok(t, v)),
            _ => true,
        };
        if !ok {
            errs.push(format!("{path}: expected type {t}, got {v}"));
            return;
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errs.push(format!("{path}: expected {c}, got {v}"));
        }
    }
    if let Some(Value::Array(e)) = s.get("enum") {
        if !e.contains(v) {
            errs.push(format!(
                "{path}: {v} is not one of {}",
                Value::Array(e.clone())
            ));
        }
    }
    if let (Some(min), Some(x)) = (s.get("minimum").and_then(|m| m.as_f64()), v.as_f64()) {
        if x < min {
            errs.push(format!("{path}: {x} is below the minimum {min}"));
        }
    }
    if let Some(o) = v.as_object() {
        if let Some(Value::Array(req)) = s.get("required") {
            for k in req.iter().filter_map(|k| k.as_str()) {
                if !o.contains_key(k) {
                    errs.push(format!("{path}: missing property `{k}`"));
                }
            }
        }
        let props = s.get("properties").and_then(|p| p.as_object());
        for (k, x) in o {
            let sub = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(root, ps, x, &sub, errs),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        errs.push(format!("{path}: unexpected property `{k}`"))
                    }
                    Some(a @ Value::Object(_)) => check(root, a, x, &sub, errs),
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(a)) = (s.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            check(root, items, x, &format!("{path}[{i}]"), errs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::json::Document;

    #[test]
    fn the_published_schema_accepts_documents_and_rejects_broken_ones() {
        let schema: Value = serde_json::from_str(REPORT_SCHEMA).expect("schema is JSON");
        let doc = Document::new("run", "t.c", "random");
        let mut v: Value = serde_json::from_str(&doc.to_json()).unwrap();
        assert_eq!(validate(&schema, &v), Vec::<String>::new());
        v["version"] = Value::from(99);
        v["result"] = Value::from("maybe");
        v.as_object_mut().unwrap().remove("seed");
        let errs = validate(&schema, &v);
        assert_eq!(errs.len(), 3, "{errs:?}");
    }
}

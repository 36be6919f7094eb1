//! A small YAML reader for the repository's own YAML files (block mappings and sequences,
//! plain and quoted scalars, flow sequences, full-line comments) — enough to check
//! `openapi.yaml` and `docker-compose.yml` without a YAML dependency.

use serde_json::{Map, Value};

struct Line {
    indent: usize,
    text: String,
}

/// Parses a YAML document into JSON values (mappings, sequences, strings, integers, booleans, null).
pub fn parse(text: &str) -> Value {
    let lines: Vec<Line> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| Line {
            indent: l.len() - l.trim_start().len(),
            text: l.trim().to_string(),
        })
        .collect();
    let mut lines = lines;
    let mut i = 0;
    let indent = lines.first().map_or(0, |l| l.indent);
    let v = block(&mut lines, &mut i, indent);
    assert_eq!(
        i,
        lines.len(),
        "unparsed YAML from line {:?}",
        lines.get(i).map(|l| &l.text)
    );
    v
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

fn block(lines: &mut Vec<Line>, i: &mut usize, indent: usize) -> Value {
    if is_item(&lines[*i].text) {
        sequence(lines, i, indent)
    } else {
        mapping(lines, i, indent)
    }
}

fn sequence(lines: &mut Vec<Line>, i: &mut usize, indent: usize) -> Value {
    let mut items = Vec::new();
    while *i < lines.len() && lines[*i].indent == indent && is_item(&lines[*i].text) {
        let rest = lines[*i].text[1..].trim_start().to_string();
        if rest.is_empty() {
            *i += 1;
            let inner = lines[*i].indent;
            items.push(block(lines, i, inner));
        } else if split_key(&rest).is_some() {
            // A mapping that starts on the item's line: continue it at the item's content column.
            let inner = indent + 2;
            lines[*i] = Line {
                indent: inner,
                text: rest,
            };
            items.push(mapping(lines, i, inner));
        } else {
            items.push(scalar(&rest));
            *i += 1;
        }
    }
    Value::Array(items)
}

fn mapping(lines: &mut Vec<Line>, i: &mut usize, indent: usize) -> Value {
    let mut map = Map::new();
    while *i < lines.len() && lines[*i].indent == indent && !is_item(&lines[*i].text) {
        let text = lines[*i].text.clone();
        let (key, value) =
            split_key(&text).unwrap_or_else(|| panic!("expected 'key: value', got '{text}'"));
        *i += 1;
        let v = if !value.is_empty() {
            scalar(value)
        } else if *i < lines.len() && lines[*i].indent > indent {
            let inner = lines[*i].indent;
            block(lines, i, inner)
        } else if *i < lines.len() && lines[*i].indent == indent && is_item(&lines[*i].text) {
            sequence(lines, i, indent)
        } else {
            Value::Null
        };
        map.insert(unquote(key), v);
    }
    Value::Object(map)
}

/// Splits `key: value` (or `key:`) at the first `: ` outside quotes.
fn split_key(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut quote: Option<u8> = None;
    let mut k = 0;
    while k < bytes.len() {
        let c = bytes[k];
        match quote {
            Some(q) if c == b'\\' && q == b'"' => k += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if (c == b'"' || c == b'\'') && k == 0 => quote = Some(c),
            None if (c == b'[' || c == b'{') && k == 0 => return None,
            None if c == b':' && (k + 1 == bytes.len() || bytes[k + 1] == b' ') => {
                return Some((text[..k].trim(), text[k + 1..].trim()));
            }
            None => {}
        }
        k += 1;
    }
    None
}

fn unquote(s: &str) -> String {
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        let inner = &s[1..s.len() - 1];
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(o) => out.push(o),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        out
    } else if s.len() >= 2 && s.starts_with('\'') && s.ends_with('\'') {
        s[1..s.len() - 1].replace("''", "'")
    } else {
        s.to_string()
    }
}

fn scalar(s: &str) -> Value {
    if s.starts_with('[') && s.ends_with(']') {
        let inner = &s[1..s.len() - 1];
        let mut items = Vec::new();
        let mut cur = String::new();
        let mut quote: Option<char> = None;
        for c in inner.chars() {
            match quote {
                Some(q) if c == q => {
                    quote = None;
                    cur.push(c)
                }
                Some(_) => cur.push(c),
                None if c == '"' || c == '\'' => {
                    quote = Some(c);
                    cur.push(c)
                }
                None if c == ',' => {
                    items.push(scalar(cur.trim()));
                    cur.clear();
                }
                None => cur.push(c),
            }
        }
        if !cur.trim().is_empty() {
            items.push(scalar(cur.trim()));
        }
        return Value::Array(items);
    }
    if s.starts_with('"') || s.starts_with('\'') {
        return Value::String(unquote(s));
    }
    match s {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" | "~" => Value::Null,
        _ => s
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(s.to_string())),
    }
}

#[test]
fn reads_the_subset() {
    let v = parse(
        "# c\na: 1\nb:\n  - x\n  - k: \"q: \\\"r\\\"\"\n    m: [a, \"b c\", 3]\nc:\n- 'it''s'\nd: plain text: no\n",
    );
    assert_eq!(v["a"], 1);
    assert_eq!(v["b"][0], "x");
    assert_eq!(v["b"][1]["k"], "q: \"r\"");
    assert_eq!(v["b"][1]["m"], serde_json::json!(["a", "b c", 3]));
    assert_eq!(v["c"][0], "it's");
    assert_eq!(v["d"], "plain text: no");
}

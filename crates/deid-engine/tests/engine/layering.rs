//! The engine's modules form a layered graph without import cycles: reads the engine's source
//! files, extracts the `crate::`/`super::` references between its top-level modules (`data`,
//! `hierarchy`, `privacy`, `quality`, `problem`, `check`, `search`, …) and fails on any cycle,
//! naming it. Code under `#[cfg(test)]`, comments and string literals do not count.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Module dependency graph: top-level module → top-level modules it references.
type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn engine_modules_have_no_import_cycle() {
    let graph = engine_graph();
    // The extraction must see the well-known edges, or the check below proves nothing.
    for (from, to) in [
        ("check", "problem"),
        ("problem", "hierarchy"),
        ("search", "check"),
        ("hierarchy", "data"),
    ] {
        assert!(
            graph.get(from).is_some_and(|d| d.contains(to)),
            "expected {from} → {to} in the module graph {graph:?}"
        );
    }
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle between the engine's modules: {}\nmodule graph: {graph:#?}",
            cycle.join(" → ")
        );
    }
}

#[test]
fn the_extraction_finds_references_and_cycles() {
    let text = "use crate::{a::X, b};\nuse super::c::Y;\nfn f() { crate::d::g(); }\n\
                // crate::e::Z in a comment\nconst S: &str = \"crate::f::Z\";\n\
                #[cfg(test)]\nmod tests { use crate::g::H; fn x() { let _ = '{'; } }\n\
                pub(crate) fn h<'a>(x: &'a str) -> &'a str { x }\nuse crate::i;\n";
    let reexports = BTreeMap::from([("X".to_string(), "a".to_string())]);
    let mut deps = BTreeSet::new();
    references(&["m".to_string()], &clean(text), &reexports, &mut deps);
    let expected: BTreeSet<String> = ["a", "b", "c", "d", "i"].map(String::from).into();
    assert_eq!(deps, expected);

    let graph: Graph = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(m, d)| (m.to_string(), d.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
    let dag: Graph = [("a", vec!["b"]), ("b", vec![]), ("c", vec!["a", "b"])]
        .into_iter()
        .map(|(m, d)| (m.to_string(), d.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(find_cycle(&dag), None);
}

/// The dependency graph of the engine crate's top-level modules.
fn engine_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let lib = strip_test_code(&clean(&lib));
    let reexports = root_reexports(&lib);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let test_files = test_only_files(&src, &files);
    let mut graph = Graph::new();
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        if rel == Path::new("lib.rs") || test_files.contains(file) {
            continue;
        }
        let path = module_path(rel);
        let text = fs::read_to_string(file).expect("readable source");
        let deps = graph.entry(path[0].clone()).or_default();
        references(&path, &clean(&text), &reexports, deps);
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (module, deps) in &mut graph {
        deps.retain(|d| d != module && modules.contains(d));
    }
    graph
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Files whose module is declared under `#[cfg(test)]` (e.g. `#[cfg(test)] mod tests;`), and
/// everything below them.
fn test_only_files(src: &Path, files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut test_modules: Vec<Vec<String>> = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let parent = if rel == Path::new("lib.rs") {
            Vec::new()
        } else {
            module_path(rel)
        };
        let text = clean(&fs::read_to_string(file).expect("readable source"));
        for name in test_module_declarations(&text) {
            let mut path = parent.clone();
            path.push(name);
            test_modules.push(path);
        }
    }
    files
        .iter()
        .filter(|f| {
            let rel = f.strip_prefix(src).expect("under src");
            rel != Path::new("lib.rs") && {
                let path = module_path(rel);
                test_modules.iter().any(|t| path.starts_with(t))
            }
        })
        .cloned()
        .collect()
}

/// Module path of a source file relative to `src/`: `quality/kl.rs` → `[quality, kl]`,
/// `quality/mod.rs` → `[quality]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Removes comments and the contents of string and character literals (keeping line breaks), so
/// that neither paths in prose nor braces in literals are mistaken for code.
fn clean(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && raw_prefix_allowed(&chars, i)
            && raw_string_start(&chars, i + 1).is_some()
        {
            let hashes = raw_string_start(&chars, i + 1).unwrap_or(0);
            i += 2 + hashes;
            out.push_str("\"\"");
            while i < chars.len() {
                if chars[i] == '"' && (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                if chars[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if chars.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            // An escaped character literal such as '\n' or '\u{7f}'.
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// True if the `r` at `chars[i]` starts a raw (byte) string literal rather than ending a name.
fn raw_prefix_allowed(chars: &[char], i: usize) -> bool {
    match i.checked_sub(1).map(|p| chars[p]) {
        None => true,
        Some('b') => i < 2 || !is_ident_char(chars[i - 2]),
        Some(c) => !is_ident_char(c),
    }
}

/// Number of `#` of a raw string starting at `chars[i]` (after the `r`), if it is one.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
    (chars.get(i + hashes) == Some(&'"')).then_some(hashes)
}

/// A token of cleaned source text: an identifier or a punctuation character (`::` is one token).
fn tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The tokens of `text` without the items marked `#[cfg(test)]`.
fn strip_test_code(text: &str) -> Vec<String> {
    let toks = tokens(text);
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        if is_cfg_test(&toks, i) {
            i = skip_item(&toks, i + 7);
        } else {
            out.push(toks[i].clone());
            i += 1;
        }
    }
    out
}

/// `# [ cfg ( test ) ]` at `i`.
fn is_cfg_test(toks: &[String], i: usize) -> bool {
    let pattern = ["#", "[", "cfg", "(", "test", ")", "]"];
    toks.len() >= i + pattern.len() && pattern.iter().zip(&toks[i..]).all(|(p, t)| p == t)
}

/// Index after the item starting at `i`: up to its `;` or the brace matching its first `{`.
fn skip_item(toks: &[String], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < toks.len() {
        match toks[i].as_str() {
            ";" if depth == 0 => return i + 1,
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Names of the modules declared `#[cfg(test)] mod name;` in cleaned source text.
fn test_module_declarations(text: &str) -> Vec<String> {
    let toks = tokens(text);
    let mut names = Vec::new();
    for i in 0..toks.len() {
        if is_cfg_test(&toks, i) {
            let mut j = i + 7;
            if toks.get(j).is_some_and(|t| t == "pub") {
                j += 1;
                if toks.get(j).is_some_and(|t| t == "(") {
                    j += 3;
                }
            }
            if toks.get(j).is_some_and(|t| t == "mod") && toks.get(j + 2).is_some_and(|t| t == ";")
            {
                names.push(toks[j + 1].clone());
            }
        }
    }
    names
}

/// Parses a use tree starting at `toks[i]` (after `crate::` or `super::`); returns every path in
/// it and the index after it.
fn use_tree(toks: &[String], mut i: usize) -> (Vec<Vec<String>>, usize) {
    if toks.get(i).is_some_and(|t| t == "{") {
        let mut paths = Vec::new();
        i += 1;
        while i < toks.len() && toks[i] != "}" {
            if toks[i] == "," {
                i += 1;
                continue;
            }
            let (sub, next) = use_tree(toks, i);
            paths.extend(sub);
            i = next.max(i + 1);
        }
        return (paths, i + 1);
    }
    let Some(ident) = toks.get(i).filter(|t| is_ident(t)) else {
        return (Vec::new(), i + 1);
    };
    if toks.get(i + 1).is_some_and(|t| t == "::") {
        let (sub, next) = use_tree(toks, i + 2);
        let paths = if sub.is_empty() {
            vec![vec![ident.clone()]]
        } else {
            sub.into_iter()
                .map(|mut p| {
                    p.insert(0, ident.clone());
                    p
                })
                .collect()
        };
        return (paths, next);
    }
    if toks.get(i + 1).is_some_and(|t| t == "as") {
        // `x as y`: the alias is the name the item is known by.
        let alias = toks.get(i + 2).cloned().unwrap_or_default();
        return (vec![vec![ident.clone(), alias]], i + 3);
    }
    (vec![vec![ident.clone()]], i + 1)
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Items re-exported at the crate root (`pub use search::{search, SearchConfig}`) → their module.
fn root_reexports(lib: &[String]) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for i in 0..lib.len() {
        if lib[i] == "use" && i > 0 && lib[i - 1] == "pub" {
            let start = if lib.get(i + 1).is_some_and(|t| t == "crate") {
                i + 3
            } else {
                i + 1
            };
            for path in use_tree(lib, start).0 {
                if path.len() >= 2
                    && let (Some(module), Some(name)) = (path.first(), path.last())
                {
                    map.insert(name.clone(), module.clone());
                }
            }
        }
    }
    map
}

/// Every path that the (cleaned) source of module `path` names through `crate::` or
/// `super::`, from the crate root (`super::error::X` in `api/jobs.rs` → `[api, error, X]`).
fn absolute_paths(path: &[String], text: &str) -> Vec<Vec<String>> {
    let toks = strip_test_code(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let resolved_from = match toks[i].as_str() {
            "crate" if toks.get(i + 1).is_some_and(|t| t == "::") => Some((Vec::new(), i + 2)),
            "super" if toks.get(i + 1).is_some_and(|t| t == "::") => {
                // Each `super` climbs one module; a file's own module is its full path.
                let mut base = path.to_vec();
                let mut j = i;
                while toks.get(j).is_some_and(|t| t == "super")
                    && toks.get(j + 1).is_some_and(|t| t == "::")
                {
                    base.pop();
                    j += 2;
                }
                Some((base, j))
            }
            _ => None,
        };
        let Some((base, start)) = resolved_from else {
            i += 1;
            continue;
        };
        let (paths, next) = use_tree(&toks, start);
        out.extend(paths.into_iter().map(|p| [base.clone(), p].concat()));
        i = next.max(i + 1);
    }
    out
}

/// Adds to `deps` the top-level modules that the (cleaned) source of module `path` references.
fn references(
    path: &[String],
    text: &str,
    reexports: &BTreeMap<String, String>,
    deps: &mut BTreeSet<String>,
) {
    for p in absolute_paths(path, text) {
        if let Some(first) = p.first() {
            // A single name at the root is an item the root re-exports from its module.
            let module = if p.len() == 1 {
                reexports.get(first).unwrap_or(first)
            } else {
                first
            };
            deps.insert(module.clone());
        }
    }
}

/// The service crate (`src/` of the workspace root) has no import cycle between its files:
/// each file is a node (`job::error`, `api::upload`, `app`), a reference names the file of its
/// longest module prefix.
#[test]
fn service_files_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let test_files = test_only_files(&src, &files);
    let files: Vec<PathBuf> = (files.into_iter())
        .filter(|f| !test_files.contains(f) && !f.ends_with("main.rs"))
        .collect();
    let module_of = |f: &PathBuf| -> Vec<String> {
        let rel = f.strip_prefix(&src).expect("under src");
        if rel == Path::new("lib.rs") {
            Vec::new()
        } else {
            module_path(rel)
        }
    };
    let modules: BTreeSet<Vec<String>> = files.iter().map(module_of).collect();
    let mut graph = Graph::new();
    for file in &files {
        let module = module_of(file);
        let text = clean(&fs::read_to_string(file).expect("readable source"));
        let deps = graph.entry(module.join("::")).or_default();
        for p in absolute_paths(&module, &text) {
            let target = (0..=p.len())
                .rev()
                .map(|n| &p[..n])
                .find(|prefix| modules.contains(*prefix))
                .unwrap_or(&[]);
            if target != module.as_slice() && !target.is_empty() {
                deps.insert(target.join("::"));
            }
        }
    }
    for (from, to) in [
        ("api::jobs", "job::task"),
        ("worker::runner", "job::task"),
        ("job::task::anonymize", "job::problem"),
        ("api::datasets", "api::upload"),
    ] {
        assert!(
            graph.get(from).is_some_and(|d| d.contains(to)),
            "expected {from} → {to} in the file graph {graph:#?}"
        );
    }
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import cycle between the service's files: {}",
            cycle.join(" → ")
        );
    }
}

/// A cycle of the graph as a list of modules that starts and ends with the same one, if any.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        New,
        Open,
        Done,
    }
    fn visit(
        m: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, State>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), State::Open);
        stack.push(m.to_string());
        for d in graph.get(m).into_iter().flatten() {
            match state.get(d).copied().unwrap_or(State::New) {
                State::Open => {
                    let from = stack.iter().position(|s| s == d).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                State::New => {
                    if let Some(c) = visit(d, graph, state, stack) {
                        return Some(c);
                    }
                }
                State::Done => {}
            }
        }
        stack.pop();
        state.insert(m.to_string(), State::Done);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if state.get(m).copied().unwrap_or(State::New) == State::New {
            let mut stack = Vec::new();
            if let Some(c) = visit(m, graph, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

/// Production functions that may still exceed the limits below, as (file from the workspace
/// root, function name). An entry that no longer matches a long function fails the test, so
/// the list only shrinks.
const LONG_FUNCTION_ALLOWANCES: &[(&str, &str)] = &[
    // Not yet split into steps.
    ("crates/deid-engine/src/output.rs", "of"),
];

/// Functions of this many lines or more need `Long because` in their doc comment.
const EXPLAINED_LINES: usize = 80;
/// Functions of this many lines or more are split, whatever their doc comment says.
const MAX_LINES: usize = 100;

/// A function found in a source file.
#[derive(Debug, PartialEq)]
struct FunctionSpan {
    name: String,
    /// 1-based line of its `fn`.
    line: usize,
    /// Lines from its `fn` to its closing brace.
    lines: usize,
    /// Whether its doc comment says why it is long (`Long because …`).
    explained: bool,
}

/// No production function of either crate (code under `#[cfg(test)]` and test-only modules do
/// not count) has [`MAX_LINES`] lines or more, or [`EXPLAINED_LINES`] or more without a doc
/// comment saying why it is long (`Long because …`, e.g. one algorithm whose steps share their
/// state, with numbered steps).
#[test]
fn production_functions_are_short_or_say_why_not() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut allowances: Vec<(&str, &str)> = LONG_FUNCTION_ALLOWANCES.to_vec();
    let mut violations = Vec::new();
    let mut seen = 0;
    for src in [root.join("crates/deid-engine/src"), root.join("src")] {
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let test_files = test_only_files(&src, &files);
        for file in files.iter().filter(|f| !test_files.contains(*f)) {
            let rel = file.strip_prefix(&root).expect("under the workspace root");
            let rel = rel.to_string_lossy().replace('\\', "/");
            let text = fs::read_to_string(file).expect("readable source");
            for f in function_spans(&text) {
                seen += 1;
                let too_long = f.lines >= MAX_LINES || (f.lines >= EXPLAINED_LINES && !f.explained);
                if !too_long {
                    continue;
                }
                match (allowances.iter()).position(|&(file, name)| file == rel && name == f.name) {
                    Some(i) => {
                        allowances.remove(i);
                    }
                    None => violations.push(format!(
                        "{rel}:{} fn {}: {} lines (at most {} with a `Long because` doc comment, \
                         else at most {})",
                        f.line,
                        f.name,
                        f.lines,
                        MAX_LINES - 1,
                        EXPLAINED_LINES - 1
                    )),
                }
            }
        }
    }
    // The scan must see the crates' functions, or the check proves nothing.
    assert!(seen > 1000, "only {seen} functions found");
    assert!(
        violations.is_empty(),
        "functions to split (or, if one algorithm, to explain with `Long because` in their doc \
         comment):\n{}",
        violations.join("\n")
    );
    assert!(
        allowances.is_empty(),
        "allowed long functions that are no longer long (remove them from \
         LONG_FUNCTION_ALLOWANCES): {allowances:?}"
    );
}

#[test]
fn function_spans_are_measured_on_code() {
    let body = "    let x = 1;\n".repeat(80);
    let text = format!(
        "/// Short.\nfn short() {{ let c = '{{'; }}\n\
         /// Does it.\n///\n/// Long because it is one algorithm.\n#[inline]\n\
         pub(crate) fn explained(a: [u8; 2]) -> u8 {{\n{body}}}\n\
         trait T {{ fn declared(&self); }}\n\
         pub async fn plain() {{\n    // }} in a comment\n    let s = \"}}\";\n{body}}}\n\
         #[cfg(test)]\nmod tests {{\n    fn hidden() {{\n{body}    }}\n}}\n"
    );
    let spans = function_spans(&text);
    let summary: Vec<(&str, usize, usize, bool)> = spans
        .iter()
        .map(|f| (f.name.as_str(), f.line, f.lines, f.explained))
        .collect();
    assert_eq!(
        summary,
        [
            ("short", 2, 1, false),
            ("explained", 7, 82, true),
            ("plain", 90, 84, false),
        ]
    );
}

/// Every function with a body in `text` outside `#[cfg(test)]` items, with its length and
/// whether its doc comment explains it.
fn function_spans(text: &str) -> Vec<FunctionSpan> {
    let code = blank_test_items(&clean(text));
    let raw: Vec<&str> = text.lines().collect();
    let lines: Vec<&str> = code.lines().collect();
    let mut spans = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((name, offset)) = fn_name(line) else {
            continue;
        };
        let Some(end) = body_end(&lines, i, offset) else {
            continue;
        };
        let doc = raw[..i]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("///") || l.starts_with("#["));
        let explained = doc.into_iter().any(|l| l.contains("Long because"));
        spans.push(FunctionSpan {
            name,
            line: i + 1,
            lines: end - i + 1,
            explained,
        });
    }
    spans
}

/// The name of the function a line of cleaned code declares (`pub(crate) async fn name…`), and
/// the byte offset after it.
fn fn_name(line: &str) -> Option<(String, usize)> {
    const QUALIFIERS: [&str; 9] = [
        "pub", "(", "crate", "super", "in", ")", "const", "async", "unsafe",
    ];
    let toks = tokens(line);
    let at = toks.iter().position(|t| t == "fn")?;
    let name = toks.get(at + 1).filter(|t| is_ident(t))?;
    if !toks[..at].iter().all(|t| QUALIFIERS.contains(&t.as_str())) {
        return None;
    }
    let start = line.find("fn ")? + 3;
    let offset = start + line[start..].find(name.as_str())? + name.len();
    Some((name.clone(), offset))
}

/// The index of the line that closes the body of the function declared on `lines[start]`
/// (its signature from byte `offset`); `None` for a declaration without a body.
fn body_end(lines: &[&str], start: usize, offset: usize) -> Option<usize> {
    let (mut depth, mut nesting) = (0usize, 0usize);
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        let from = if i == start { offset } else { 0 };
        for c in line[from..].chars() {
            match c {
                '(' | '[' if !opened => nesting += 1,
                ')' | ']' if !opened => nesting = nesting.saturating_sub(1),
                ';' if !opened && nesting == 0 => return None,
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => {
                    depth = depth.saturating_sub(1);
                    if opened && depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// Cleaned code with every `#[cfg(test)]` item replaced by blanks (line breaks kept).
fn blank_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out: Vec<char> = code.chars().collect();
    let text: String = out.iter().collect();
    let mut search = 0;
    while let Some(found) = text[search..].find(MARK) {
        let begin = text[..search + found].chars().count();
        let mut i = begin + MARK.chars().count();
        let mut depth = 0usize;
        while i < out.len() {
            match out[i] {
                ';' if depth == 0 => break,
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let end = (i + 1).min(out.len());
        for c in &mut out[begin..end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        search += found + MARK.len();
    }
    out.into_iter().collect()
}

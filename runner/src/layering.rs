//! The module graph follows the data flow: no import cycle between the
//! crate's top-level modules, no two files that import each other, and
//! nothing but the binary uses `cli`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crate's source directory and every `.rs` file under it.
fn sources() -> (PathBuf, Vec<PathBuf>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    (root, files)
}

/// Top-level module → the top-level modules it names through `crate::`,
/// read from the sources (comments and `#[cfg(test)]` code left out).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let (root, files) = sources();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_string();
        if matches!(module.as_str(), "lib" | "main" | "layering") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        // The test module closes a file; a `#[cfg(test)]` on one item does not.
        let code = text.split("#[cfg(test)]\nmod ").next().unwrap();
        let deps = graph.entry(module.clone()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap();
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // `crate::internal!` is the error module's macro.
                let name = if name == "internal" {
                    "error".into()
                } else {
                    name
                };
                if !name.is_empty() && name != module {
                    deps.insert(name);
                }
            }
        }
    }
    graph
}

#[test]
fn modules_form_no_cycle_and_only_the_binary_uses_cli() {
    let graph = imports();
    assert!(graph.contains_key("runtime") && graph["runtime"].contains("sched"));
    for (m, deps) in &graph {
        assert!(!deps.contains("cli"), "`{m}` uses cli, a layer above it");
    }
    // Depth-first search for a back edge.
    fn visit<'a>(
        m: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, bool>,
        path: &mut Vec<&'a str>,
    ) {
        match state.get(m) {
            Some(true) => return,
            Some(false) => {
                let at = path.iter().position(|p| *p == m).unwrap();
                panic!("import cycle: {} -> {m}", path[at..].join(" -> "));
            }
            None => {}
        }
        state.insert(m, false);
        path.push(m);
        for d in graph.get(m).into_iter().flatten() {
            visit(d, graph, state, path);
        }
        path.pop();
        state.insert(m, true);
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        visit(m, &graph, &mut state, &mut Vec::new());
    }
}

/// Every source file of the crate by its module path (`cli/fuzz.rs` is
/// `["cli", "fuzz"]`, `cli/mod.rs` is `["cli"]`, `lib.rs` is `[]`), with
/// its code (comments and the closing test module left out).
fn files() -> BTreeMap<Vec<String>, String> {
    let (root, files) = sources();
    let mut out = BTreeMap::new();
    for p in files {
        let rel = p.strip_prefix(&root).unwrap().with_extension("");
        let mut module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let code: Vec<&str> = text
            .split("#[cfg(test)]\nmod ")
            .next()
            .unwrap()
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect();
        out.entry(module)
            .or_insert_with(String::new)
            .push_str(&code.join("\n"));
    }
    out
}

/// The paths a `use` tree names, braces expanded: `a::{b, c::{d}}` is
/// `a::b` and `a::c::d`.
fn expand_use(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let close = tree.rfind('}').unwrap_or(tree.len());
    let (prefix, body) = (&tree[..open], &tree[open + 1..close]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| {
            expand_use(p)
                .into_iter()
                .map(move |x| format!("{prefix}{x}"))
        })
        .collect()
}

/// The crate-relative paths `code` names: its `use` items and the
/// `crate::`, `super::` and `self::` paths in its code.
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let word_start = |s: &str, i: usize| {
        s[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
    };
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let (before, after) = rest.split_at(i);
        rest = &after[4..];
        if !word_start(before, before.len()) {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        let tree: String = rest[..end].split_whitespace().collect::<Vec<_>>().join(" ");
        if ["crate::", "super::", "self::"]
            .iter()
            .any(|p| tree.starts_with(p))
        {
            paths.extend(expand_use(&tree));
        }
    }
    for root in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(root) {
            if !word_start(code, i) {
                continue;
            }
            let path: String = code[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(path);
        }
    }
    paths
}

/// File → the other files of the crate it names through `crate::`,
/// `super::` and `self::` paths (each path resolved to the longest module
/// it starts with).
fn file_imports() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = files();
    let mut graph = BTreeMap::new();
    for (module, code) in &files {
        let deps: &mut BTreeSet<Vec<String>> = graph.entry(module.clone()).or_default();
        for path in named_paths(code) {
            let mut segs: Vec<&str> = path
                .split("::")
                .map(|s| s.split(" as ").next().unwrap().trim())
                .filter(|s| !s.is_empty())
                .collect();
            let mut base: Vec<String> = match segs.first() {
                Some(&"crate") => Vec::new(),
                Some(&"self") => module.clone(),
                Some(&"super") => module.clone(),
                _ => continue,
            };
            if segs[0] == "crate" || segs[0] == "self" {
                segs.remove(0);
            }
            while segs.first() == Some(&"super") {
                segs.remove(0);
                base.pop();
            }
            base.extend(segs.iter().map(|s| s.to_string()));
            while !base.is_empty() && !files.contains_key(&base) {
                base.pop();
            }
            if &base != module {
                deps.insert(base);
            }
        }
    }
    graph
}

/// No two files import each other (a module and its own parent aside: a
/// `mod.rs` declares its files). Such a pair is one piece of code split in
/// two: its shared part belongs in one of them, or in a module both use.
#[test]
fn no_two_files_import_each_other() {
    let graph = file_imports();
    let name = |m: &[String]| {
        if m.is_empty() {
            "lib.rs".to_string()
        } else {
            m.join("/")
        }
    };
    assert!(
        graph[&vec!["cli".to_string(), "show".to_string()]]
            .contains(&vec!["reproduce".to_string()]),
        "the scan sees `use crate::reproduce::…`"
    );
    let mut circles = Vec::new();
    for (a, deps) in &graph {
        for b in deps {
            let related = a.starts_with(b) || b.starts_with(a);
            if a < b && !related && graph.get(b).is_some_and(|d| d.contains(a)) {
                circles.push(format!("{} <-> {}", name(a), name(b)));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "files that import each other: {circles:?}"
    );
}

#[test]
fn use_trees_expand_and_paths_resolve() {
    assert_eq!(
        expand_use("super::{run::{print_output, RunOpts}, EXIT_BUG}"),
        [
            "super::run::print_output",
            "super::run::RunOpts",
            "super::EXIT_BUG"
        ]
    );
    let paths = named_paths("use super::fuzz::{self, X};\nfn f() { crate::cc::libcxx::dir(); }");
    assert!(
        paths.contains(&"super::fuzz::self".to_string()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"crate::cc::libcxx::dir".to_string()),
        "{paths:?}"
    );
}

//! The module graph follows the data flow: no import cycle between the
//! crate's top-level modules, and nothing but the binary uses `cli`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules it names through `crate::`,
/// read from the sources (comments and `#[cfg(test)]` code left out).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
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

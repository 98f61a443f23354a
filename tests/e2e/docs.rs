//! Tests: the documentation. README.md, the user guide (`docs/guide/*.md`)
//! and docs/DESIGN.md are plain Markdown; "building" them means these
//! checks pass:
//!
//! * every relative link names a file or directory that exists, and every
//!   `#anchor` names a heading of its file (GitHub's slugs); the links of
//!   benches/RESULTS.md and benches/HISTORY.md too;
//! * every example command in a fenced code block (`sh`, `console`,
//!   `shell`, `bash` or no language) parses with heddle's own command-line
//!   parser. An example is a line that starts with `heddle ` or
//!   `cargo run … -- ` (the arguments after `--`), after an optional
//!   prompt (`$ `, `host$ `) and `NAME=value` assignments; in a block that
//!   has prompts, only the prompted lines are commands (the rest is
//!   output). A line ending in `# not parsed` is left alone.

use crate::common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The documentation files the checks cover.
fn doc_files() -> Vec<PathBuf> {
    let root = repo();
    let mut files = vec![root.join("README.md"), root.join("docs/DESIGN.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root.join("docs/guide"))
        .expect("docs/guide")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    assert!(guide.len() > 5, "the guide's chapters: {guide:?}");
    files.extend(guide);
    files
}

/// GitHub's anchor for a heading: lowercase, punctuation other than `-`
/// and `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        } else if !fence {
            out.push((i + 1, line));
        }
    }
    out
}

/// The anchors of a Markdown file's headings (a repeated heading gets
/// `-1`, `-2`, … as on GitHub).
fn anchors(text: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 { base } else { format!("{base}-{n}") });
        *n += 1;
    }
    out
}

/// `line` without its inline code spans.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        }
    }
    out
}

/// The broken relative links of the Markdown file `file` (its text
/// `text`), one message each.
fn broken_links(file: &Path, text: &str) -> Vec<String> {
    let dir = file.parent().unwrap();
    let mut errors = Vec::new();
    for (n, line) in prose_lines(text) {
        let line = without_code_spans(line);
        for (i, _) in line.match_indices("](") {
            let rest = &line[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target, None),
            };
            let at = format!("{}:{n}: link {target}", file.display());
            let linked = if path.is_empty() {
                file.to_path_buf()
            } else {
                dir.join(path)
            };
            if !path.is_empty() && !linked.exists() {
                errors.push(format!("{at}: no file {}", linked.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if linked.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let linked_text = if path.is_empty() {
                text.to_string()
            } else {
                std::fs::read_to_string(&linked).unwrap()
            };
            if !anchors(&linked_text).iter().any(|a| a == anchor) {
                errors.push(format!(
                    "{at}: no heading #{anchor} in {}",
                    linked.display()
                ));
            }
        }
    }
    errors
}

/// A shell line split into words (quotes and backslashes as the shell
/// reads them), up to the first operator (`;`, `|`, `&`, `>`, `<`) or
/// comment.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '#' if !in_word => break,
            ';' | '|' | '&' | '>' | '<' => {
                // `2>` ends the command as `>` does.
                if in_word && word.chars().all(|c| c.is_ascii_digit()) && c == '>' {
                    word.clear();
                    in_word = false;
                }
                break;
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// heddle's arguments in a command line, if it runs heddle: `heddle …`,
/// or `cargo run … -- …`.
fn heddle_args(line: &str) -> Option<Vec<String>> {
    let mut words: Vec<String> = shell_words(line);
    let assignments = words
        .iter()
        .take_while(|w| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        })
        .count();
    words.drain(..assignments);
    match words.first().map(String::as_str) {
        Some("heddle") => Some(words),
        Some("cargo") if words.get(1).is_some_and(|w| w == "run") => {
            let dashes = words.iter().position(|w| w == "--")?;
            let mut args = vec!["heddle".to_string()];
            args.extend(words.drain(dashes + 1..));
            Some(args)
        }
        _ => None,
    }
}

/// The command examples of a Markdown text: (line number, heddle's
/// arguments).
fn examples(text: &str) -> Vec<(usize, Vec<String>)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let info = lines[i].trim_start();
        i += 1;
        let Some(lang) = info.strip_prefix("```") else {
            continue;
        };
        let start = i;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            i += 1;
        }
        let block = &lines[start..i.min(lines.len())];
        i += 1;
        if !matches!(lang.trim(), "" | "sh" | "console" | "shell" | "bash") {
            continue;
        }
        // A prompt: `$ ` at the start of the line, or a host name before it.
        let prompted = |l: &str| -> Option<usize> {
            let t = l.trim_start();
            let first = t.split(' ').next().unwrap_or("");
            (first.ends_with('$') && t.len() > first.len())
                .then(|| l.len() - t.len() + first.len() + 1)
        };
        let transcript = block.iter().any(|l| prompted(l).is_some());
        let mut j = 0;
        while j < block.len() {
            let number = start + j + 1;
            let mut line = block[j].to_string();
            // Continuation lines.
            while line.ends_with('\\') && j + 1 < block.len() {
                line.pop();
                j += 1;
                line.push(' ');
                line.push_str(block[j].trim_start());
            }
            j += 1;
            let command = match prompted(&line) {
                Some(at) => line[at..].to_string(),
                None if transcript => continue,
                None => line.trim_start().to_string(),
            };
            if command.trim_end().ends_with("# not parsed") {
                continue;
            }
            if let Some(args) = heddle_args(&command) {
                out.push((number, args));
            }
        }
    }
    out
}

/// The examples of `text` that heddle's parser rejects, one message each.
fn bad_examples(file: &Path, text: &str) -> Vec<String> {
    examples(text)
        .into_iter()
        .filter_map(|(n, args)| {
            heddle::cli::parse_only(&args).err().map(|e| {
                let first = e.lines().next().unwrap_or("").to_string();
                format!("{}:{n}: `{}`: {first}", file.display(), args.join(" "))
            })
        })
        .collect()
}

#[test]
fn links_and_anchors_resolve() {
    let mut errors = Vec::new();
    let mut files = doc_files();
    files.push(repo().join("benches/RESULTS.md"));
    files.push(repo().join("benches/HISTORY.md"));
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        errors.extend(broken_links(&file, &text));
    }
    assert!(errors.is_empty(), "broken links:\n{}", errors.join("\n"));
}

#[test]
fn example_commands_parse() {
    let mut errors = Vec::new();
    let mut count = 0;
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        count += examples(&text).len();
        errors.extend(bad_examples(&file, &text));
    }
    assert!(count >= 20, "only {count} examples found");
    assert!(
        errors.is_empty(),
        "examples heddle does not accept:\n{}",
        errors.join("\n")
    );
}

/// The checks themselves find what they are for.
#[test]
fn the_checks_report_broken_links_and_bad_examples() {
    assert_eq!(
        slug(" Project file and `heddle test`"),
        "project-file-and-heddle-test"
    );
    assert_eq!(
        slug("Long runs, hangs and fairness"),
        "long-runs-hangs-and-fairness"
    );
    assert_eq!(
        anchors("# A\n```\n# not a heading\n```\n## A\nb\n### c_d (e)"),
        ["a", "a-1", "c_d-e"]
    );
    let dir = tempdir();
    std::fs::write(dir.path().join("other.md"), "# Other\n## Some part\n").unwrap();
    let file = dir.path().join("doc.md");
    let text = "# Doc\n\
        [ok](other.md) [ok](other.md#some-part) [ok](#doc) [web](https://example.com/x)\n\
        `[in code](nowhere.md)`\n\
        [gone](missing.md) [bad anchor](other.md#no-part) [bad here](#nothing)\n\
        ```sh\n[not a link](nowhere.md)\n```\n";
    let errors = broken_links(&file, text);
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(
        errors[0].contains("doc.md:4: link missing.md: no file"),
        "{}",
        errors[0]
    );
    assert!(errors[1].contains("no heading #no-part"), "{}", errors[1]);
    assert!(errors[2].contains("no heading #nothing"), "{}", errors[2]);

    assert_eq!(
        shell_words(r#"A=1 heddle run "a b.c" 'x y' c\ d --seed 3 2>&1 | tail # comment"#),
        ["A=1", "heddle", "run", "a b.c", "x y", "c d", "--seed", "3"]
    );
    let text = "```sh\n\
        heddle fuzz t.c --runs 10 --no-such-flag\n\
        heddle fuzz t.c --runs 10\n\
        HEDDLE_X=1 heddle frobnicate t.c; echo done\n\
        cargo run --release -- fuzz t.c \\\n    --runs ten\n\
        heddle fuzz <file> --bogus   # not parsed\n\
        make && heddle fuzz ./prog\n\
        ```\n\
        ```toml\nheddle = \"0.1\"\n```\n\
        ```\n$ heddle replay r.toml\nheddle replay: output, not a command\n```\n";
    let found: Vec<String> = examples(text).iter().map(|(_, a)| a.join(" ")).collect();
    assert_eq!(
        found,
        [
            "heddle fuzz t.c --runs 10 --no-such-flag",
            "heddle fuzz t.c --runs 10",
            "heddle frobnicate t.c",
            "heddle fuzz t.c --runs ten",
            "heddle replay r.toml",
        ]
    );
    let errors = bad_examples(Path::new("x.md"), text);
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(
        errors[0].starts_with("x.md:2: `heddle fuzz t.c --runs 10 --no-such-flag`"),
        "{}",
        errors[0]
    );
    assert!(errors[0].contains("--no-such-flag"), "{}", errors[0]);
    assert!(errors[1].contains("frobnicate"), "{}", errors[1]);
    assert!(
        errors[2].starts_with("x.md:5:") && errors[2].contains("ten"),
        "{}",
        errors[2]
    );
}

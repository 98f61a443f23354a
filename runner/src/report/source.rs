//! Source lines for reports: the files DWARF names, read once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Reads source files named by DWARF locations and hands out their lines.
/// A relative or missing path is looked up in the extra directories (e.g.
/// the directory of the target's source) by its file name.
#[derive(Debug, Default)]
pub struct SourceCache {
    dirs: Vec<PathBuf>,
    files: BTreeMap<String, Option<Vec<String>>>,
}

impl SourceCache {
    /// A cache that also looks in `dirs` for files not found where DWARF says.
    pub fn new(dirs: Vec<PathBuf>) -> SourceCache {
        SourceCache {
            dirs,
            files: BTreeMap::new(),
        }
    }

    fn find(&self, file: &str) -> Option<PathBuf> {
        let p = Path::new(file);
        if p.is_file() {
            return Some(p.to_path_buf());
        }
        let name = p.file_name()?;
        for d in &self.dirs {
            let c = d.join(p);
            if c.is_file() {
                return Some(c);
            }
            let c = d.join(name);
            if c.is_file() {
                return Some(c);
            }
        }
        None
    }

    /// Line `line` (1-based) of `file`, with tabs expanded and surrounding
    /// whitespace removed; None when the file or line is not there.
    pub fn line(&mut self, file: &str, line: u32) -> Option<String> {
        if !self.files.contains_key(file) {
            let text = self
                .find(file)
                .and_then(|p| std::fs::read(p).ok())
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .lines()
                        .map(|l| l.replace('\t', "    "))
                        .collect()
                });
            self.files.insert(file.to_string(), text);
        }
        let lines = self.files.get(file)?.as_ref()?;
        let l = lines.get((line as usize).checked_sub(1)?)?;
        Some(l.trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_and_falls_back_to_dirs() {
        let dir = std::env::temp_dir().join(format!("heddle-src-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x.c"), "int a;\n\tint b = 1;  \n").unwrap();
        let mut c = SourceCache::new(vec![dir.clone()]);
        assert_eq!(c.line("/nowhere/x.c", 2).as_deref(), Some("int b = 1;"));
        assert_eq!(c.line("x.c", 1).as_deref(), Some("int a;"));
        assert_eq!(c.line("x.c", 3), None);
        assert_eq!(c.line("y.c", 1), None);
        let _ = std::fs::remove_dir_all(dir);
    }
}

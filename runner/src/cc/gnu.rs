//! What GNU toolchains pass that means nothing for a wasm module: linker
//! options of ELF shared objects and their search paths. Build systems
//! written for gcc pass them out of habit (`-Wl,--as-needed`, `-Wl,-rpath,
//! DIR`, `-Xlinker -soname -Xlinker libx.so.1`); wasm-ld rejects them, or
//! reads a directory as an input. heddle's driver drops them and says so
//! once.

/// GNU linker options (as wasm-ld would see them) that mean nothing for a
/// static wasm module, with whether they take the next word as a value.
const IGNORED: &[(&str, bool)] = &[
    ("--as-needed", false),
    ("--no-as-needed", false),
    ("--hash-style", true),
    ("--enable-new-dtags", false),
    ("--disable-new-dtags", false),
    ("--build-id", false),
    ("--eh-frame-hdr", false),
    ("--no-undefined", false),
    ("--warn-common", false),
    ("--sort-common", false),
    ("-Bsymbolic", false),
    ("-Bsymbolic-functions", false),
    ("-Bdynamic", false),
    ("-Bstatic", false),
    ("-O1", false),
    ("-O2", false),
    ("-rpath", true),
    ("-rpath-link", true),
    ("-soname", true),
    ("-h", true),
    ("--version-script", true),
    ("-export-dynamic", false),
    ("--export-dynamic", false),
    ("-E", false),
];

/// `-z` keywords of ELF linkers that mean nothing for a wasm module
/// (`-z stack-size=N` is wasm-ld's own and passes).
const IGNORED_Z: &[&str] = &[
    "relro",
    "norelro",
    "now",
    "lazy",
    "noexecstack",
    "execstack",
    "defs",
    "nodefs",
    "origin",
    "nodelete",
    "text",
    "notext",
    "combreloc",
    "nocombreloc",
];

/// How many linker words from `words[0]` are GNU-only (0: none): an
/// option [`IGNORED`] names (also in its `=VALUE` form) with its value, or
/// `-z KEYWORD` of [`IGNORED_Z`].
fn ignored(words: &[&str]) -> usize {
    let w = words[0];
    if w == "-z" {
        return match words.get(1) {
            Some(k) if IGNORED_Z.contains(k) => 2,
            _ => 0,
        };
    }
    IGNORED
        .iter()
        .find_map(|&(name, value)| {
            if w == name {
                Some(if value { 2 } else { 1 })
            } else if value && w.starts_with(name) && w[name.len()..].starts_with('=') {
                Some(1)
            } else {
                None
            }
        })
        .map_or(0, |n| n.min(words.len()))
}

/// Drops the GNU-only options of `args` (clang driver arguments): returns
/// the arguments to pass on and the options dropped, as given.
pub fn drop_gnu_only(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let mut dropped = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "-rdynamic" {
            dropped.push(a.clone());
        } else if let Some(list) = a.strip_prefix("-Wl,") {
            // `-Wl,a,b,c`: each comma-separated word goes to the linker.
            let words: Vec<&str> = list.split(',').collect();
            let mut keep = Vec::new();
            let mut gone = Vec::new();
            let mut j = 0;
            while j < words.len() {
                match ignored(&words[j..]) {
                    0 => {
                        keep.push(words[j]);
                        j += 1;
                    }
                    n => {
                        gone.extend_from_slice(&words[j..j + n]);
                        j += n;
                    }
                }
            }
            if !gone.is_empty() {
                dropped.push(format!("-Wl,{}", gone.join(",")));
            }
            if !keep.is_empty() {
                out.push(format!("-Wl,{}", keep.join(",")));
            }
        } else if a == "-Xlinker" && i + 1 < args.len() {
            // `-Xlinker OPT [-Xlinker VALUE]`: the linker words in a row.
            let mut words: Vec<&str> = vec![&args[i + 1]];
            if i + 3 < args.len() && args[i + 2] == "-Xlinker" {
                words.push(&args[i + 3]);
            }
            let n = ignored(&words);
            if n == 0 {
                out.push(a.clone());
                out.push(args[i + 1].clone());
            } else {
                dropped.push(format!("-Xlinker {}", words[..n].join(" -Xlinker ")));
            }
            i += 2 * n.max(1);
            continue;
        } else {
            out.push(a.clone());
        }
        i += 1;
    }
    (out, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn gnu_linker_options_are_dropped_and_listed() {
        let (out, dropped) = drop_gnu_only(&s(&[
            "-O2",
            "-Wl,--no-as-needed",
            "a.o",
            "-Wl,-rpath,/usr/lib,-z,relro,-z,stack-size=65536",
            "-Xlinker",
            "-rpath",
            "-Xlinker",
            "/opt/lib",
            "-Wl,-soname=libx.so.1",
            "-Wl,--hash-style=gnu",
            "-Xlinker",
            "--export=foo",
            "-rdynamic",
            "-o",
            "prog",
        ]));
        assert_eq!(
            out,
            s(&[
                "-O2",
                "a.o",
                "-Wl,-z,stack-size=65536",
                "-Xlinker",
                "--export=foo",
                "-o",
                "prog"
            ])
        );
        assert_eq!(
            dropped,
            s(&[
                "-Wl,--no-as-needed",
                "-Wl,-rpath,/usr/lib,-z,relro",
                "-Xlinker -rpath -Xlinker /opt/lib",
                "-Wl,-soname=libx.so.1",
                "-Wl,--hash-style=gnu",
                "-rdynamic",
            ])
        );
    }

    #[test]
    fn other_linker_options_pass() {
        let args = s(&[
            "-Wl,--export=f,--no-entry",
            "-Xlinker",
            "--stack-first",
            "m.c",
        ]);
        assert_eq!(drop_gnu_only(&args), (args.clone(), Vec::new()));
    }
}

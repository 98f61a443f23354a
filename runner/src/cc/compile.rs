//! `heddle cc` / `heddle c++`: a clang driver that build systems accept, and
//! the cached compilation behind targets named by their source.
//!
//! The driver behaves like clang — `-c`, `-E`, `-S`, `-M`/`-MD`/`-MF`,
//! `-fsyntax-only`, `-o` with any name (`a.out` by default), `.o`/`.a`
//! inputs, `-l`/`-L`, `-x`, `@response` files, `-Wl,` — and adds what every
//! target needs: the target triple and sysroot, `-pthread`, `-g` (DWARF is
//! what turns sites into `file:line`), [`DEFAULT_OPT`] unless the user chose
//! an optimisation level, the guest SDK on the include path and its
//! compatibility library, `setjmp`/`longjmp` over wasm exception handling
//! (`-mexception-handling -mllvm -wasm-enable-sjlj`), shared imported
//! memory and the memory limit at the final link. C++ additionally gets
//! `-fwasm-exceptions` (`throw`/`catch` as wasm exception handling; a
//! user's `-fno-exceptions`, later on the command line, turns them off) and
//! `-fno-strict-return` (falling off the end of a non-void function is
//! `unreachable` once optimised, a trap that has nothing to do with
//! concurrency). A linked module that contains one of wasm-ld's trap stubs
//! is rejected with the symbol named. A program that calls `dlsym` gets the
//! table of its functions ([`super::dltable`]); a module linked with
//! `-Wl,--unresolved-symbols=ignore-all` gets its stubs named after the
//! missing functions ([`super::missing`]). A failed compile of old C ends
//! with a note about `--legacy`, a failed link with the list of unresolved
//! symbols.
//!
//! Modules are reproducible: the same sources, flags and toolchain give the
//! same bytes whatever the checkout path, the cache path, the working
//! directory, the user and the time. Debug info and `__FILE__` name files
//! relative to the project root (the nearest directory above the sources
//! holding `.git` or `heddle.toml`, else the sources' own directory), and
//! the sysroot, clang's resource directory and the guest SDK under fixed
//! names (`/heddle/sysroot`, `/heddle/resource`, `/heddle/sdk`).

use super::flags::{path_map_flags, project_root, target_flags, EMULATION_DEFINES};
use super::Toolchain;
use crate::modinfo::ModuleInfo;
use crate::paths;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Linear memory limit of every module: 256 MiB. Each thread's stack
/// (64 KiB) lives in it until the thread is joined, so the limit bounds the
/// threads alive at once: 64 MiB stopped `pthread_create` after 1,021
/// (EAGAIN); 256 MiB leaves room for the runtime's `MAX_THREADS` (4,096).
pub const MAX_MEMORY: u64 = 256 << 20;

/// The optimisation level when the user gives none. Chosen by measurement
/// on the bundled targets (`benches/opt-level.sh`, `benches/RESULTS.md`):
/// `-O0` keeps every local in linear memory, so each run makes several
/// times as many scheduling points for the same logic.
pub const DEFAULT_OPT: &str = "-O1";

/// Whether `args` choose an optimisation level.
pub fn has_opt_level(args: &[String]) -> bool {
    args.iter().any(|a| a.starts_with("-O"))
}

/// Flags accepted by old C (implicit declarations, implicit int, K&R
/// definitions) that clang 19 rejects by default.
pub const LEGACY_FLAGS: &[&str] = &[
    "-std=gnu89",
    "-Wno-error=implicit-function-declaration",
    "-Wno-error=implicit-int",
    "-Wno-error=int-conversion",
    "-Wno-error=incompatible-pointer-types",
    "-Wno-error=return-type",
    "-Wno-deprecated-non-prototype",
    "-Wno-implicit-function-declaration",
    "-Wno-implicit-int",
];

/// What an invocation produces, as clang decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No input at all (`--version`, `-v`, `-print-file-name=…`): clang
    /// only answers about itself.
    Query,
    /// `-E`, `-M`, `-MM`: preprocess only.
    Preprocess,
    /// `-fsyntax-only`: check only.
    SyntaxOnly,
    /// `-S`: compile to assembly.
    Assemble,
    /// `-c`: compile to wasm object files.
    Compile,
    /// Compile what needs compiling and link a module.
    Link,
}

/// How clang will treat one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// C.
    C,
    /// C++.
    Cxx,
    /// Assembly, preprocessed output of another language, …: compiled by
    /// clang, not by heddle's rules.
    Other,
    /// Object files, archives and anything else clang hands to the linker.
    Linker,
}

/// One input file of an invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// The file as given.
    pub path: PathBuf,
    /// How clang treats it.
    pub lang: Lang,
}

/// One compiler invocation.
#[derive(Debug, Clone, Default)]
pub struct CcRequest {
    /// Everything the user passed (response files expanded): clang flags,
    /// inputs, `-o out`.
    pub args: Vec<String>,
    /// Accept old C (see [`LEGACY_FLAGS`]).
    pub legacy: bool,
    /// Invoked as `heddle c++`: compile every source as C++ and link the
    /// C++ library, as `clang++` does.
    pub cxx: bool,
    /// The directory file names in the module are relative to (default:
    /// the project root above the working directory, see `project_root`).
    pub root: Option<PathBuf>,
    /// GNU linker options the user gave that mean nothing for a wasm
    /// module, dropped from `args` ([`super::gnu`]).
    pub dropped: Vec<String>,
}

/// Flags that take the next argument as their value.
fn takes_value(flag: &str) -> bool {
    matches!(
        flag,
        "-o" | "-I"
            | "-L"
            | "-l"
            | "-D"
            | "-U"
            | "-include"
            | "-imacros"
            | "-isystem"
            | "-idirafter"
            | "-iquote"
            | "-iprefix"
            | "-iwithprefix"
            | "-iwithprefixbefore"
            | "-isysroot"
            | "-x"
            | "-MF"
            | "-MT"
            | "-MQ"
            | "-Xlinker"
            | "-Xclang"
            | "-Xpreprocessor"
            | "-Xassembler"
            | "-mllvm"
            | "-target"
            | "-u"
            | "-z"
            | "-T"
            | "-e"
            | "--param"
    )
}

/// The language `-x NAME` selects.
fn lang_of_x(name: &str) -> Option<Lang> {
    match name {
        "none" => None,
        "c" | "c-header" | "cpp-output" => Some(Lang::C),
        "c++" | "c++-header" | "c++-cpp-output" => Some(Lang::Cxx),
        _ => Some(Lang::Other),
    }
}

/// The language clang infers from a file name.
pub fn lang_of_path(path: &Path) -> Lang {
    match path.extension().and_then(|e| e.to_str()) {
        Some("c" | "i" | "h") => Lang::C,
        Some("cc" | "cpp" | "cxx" | "C" | "c++" | "cp" | "CPP" | "ii" | "hpp" | "hh" | "hxx") => {
            Lang::Cxx
        }
        Some("s" | "S" | "sx") => Lang::Other,
        _ => Lang::Linker,
    }
}

/// Expands `@file` response files (GNU syntax: whitespace-separated words,
/// single and double quotes, backslash escapes), recursively.
pub fn expand_response_files(args: &[String]) -> Result<Vec<String>> {
    fn go(args: &[String], depth: usize, out: &mut Vec<String>) -> Result<()> {
        for a in args {
            match a.strip_prefix('@') {
                Some(file) if !file.is_empty() => {
                    if depth > 16 {
                        bail!("response file {file}: nested too deeply");
                    }
                    let text = fs::read_to_string(file)
                        .with_context(|| format!("cannot read response file {file}"))?;
                    go(&split_words(&text), depth + 1, out)?;
                }
                _ => out.push(a.clone()),
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    go(args, 0, &mut out)?;
    Ok(out)
}

/// Splits a response file into words.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// Flags that only ask clang about itself (`--version`, `-dumpmachine`,
/// `-print-file-name=…`): such an invocation needs no input.
fn is_query(flag: &str) -> bool {
    matches!(
        flag,
        "-v" | "--version" | "-###" | "-dumpversion" | "-dumpmachine" | "--help"
    ) || flag.starts_with("-print-")
        || flag.starts_with("--print-")
}

/// True when `bytes` start like a wasm module or object file.
fn is_wasm(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\0asm")
}

impl CcRequest {
    /// A request from a command line as the user typed it (response files
    /// are expanded here).
    pub fn new(args: &[String]) -> Result<CcRequest> {
        let mut args = expand_response_files(args)?;
        let legacy = args.iter().any(|a| a == "--legacy");
        args.retain(|a| a != "--legacy");
        let (args, dropped) = super::gnu::drop_gnu_only(&args);
        Ok(CcRequest {
            args,
            legacy,
            dropped,
            ..CcRequest::default()
        })
    }

    /// The inputs, in order, with the language clang will give each.
    pub fn inputs(&self) -> Vec<Input> {
        let mut out = Vec::new();
        let mut x: Option<Lang> = None;
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            if a == "-x" {
                x = it.next().and_then(|n| lang_of_x(n));
                continue;
            }
            if let Some(n) = a.strip_prefix("-x") {
                x = lang_of_x(n);
                continue;
            }
            if takes_value(a) {
                it.next();
                continue;
            }
            if a.starts_with('-') && a != "-" {
                continue;
            }
            let path = PathBuf::from(a);
            let lang = x.unwrap_or_else(|| lang_of_path(&path));
            out.push(Input { path, lang });
        }
        out
    }

    /// C and C++ source files among the inputs.
    pub fn sources(&self) -> Vec<PathBuf> {
        self.inputs()
            .into_iter()
            .filter(|i| matches!(i.lang, Lang::C | Lang::Cxx))
            .map(|i| i.path)
            .collect()
    }

    /// The `-o` output, if given.
    pub fn output(&self) -> Option<PathBuf> {
        let mut found = None;
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            if a == "-o" {
                found = it.next().map(PathBuf::from);
            } else if let Some(rest) = a.strip_prefix("-o") {
                if !rest.is_empty() {
                    found = Some(PathBuf::from(rest));
                }
            } else if takes_value(a) {
                it.next();
            }
        }
        found
    }

    fn has(&self, flag: &str) -> bool {
        self.args.iter().any(|a| a == flag)
    }

    /// What the invocation produces (clang's precedence: `-E` over
    /// `-fsyntax-only` over `-S` over `-c`).
    pub fn mode(&self) -> Mode {
        if self.inputs().is_empty() {
            Mode::Query
        } else if self.has("-E") || self.has("-M") || self.has("-MM") {
            Mode::Preprocess
        } else if self.has("-fsyntax-only") {
            Mode::SyntaxOnly
        } else if self.has("-S") {
            Mode::Assemble
        } else if self.has("-c") {
            Mode::Compile
        } else {
            Mode::Link
        }
    }

    /// Whether the invocation links a module.
    pub fn links(&self) -> bool {
        self.mode() == Mode::Link
    }

    /// Whether clang++ drives it: `heddle c++`, or a C++ input.
    pub fn is_cxx(&self) -> bool {
        self.cxx || self.inputs().iter().any(|i| i.lang == Lang::Cxx)
    }

    /// The module a linking invocation writes (`a.out` without `-o`).
    pub fn linked_output(&self) -> Option<PathBuf> {
        self.links()
            .then(|| self.output().unwrap_or_else(|| PathBuf::from("a.out")))
    }

    /// Checks the inputs without a toolchain: each exists, and each that
    /// clang would hand to the linker is a wasm object file or an archive.
    pub fn check(&self) -> Result<()> {
        if self.has("-shared") {
            bail!(
                "-shared: a heddle target is one static wasm module; build the library as an archive (`ar rcs libNAME.a …`, or configure --disable-shared) and link it into the test program"
            );
        }
        let inputs = self.inputs();
        if inputs.is_empty() && !self.args.iter().any(|a| is_query(a)) {
            bail!("no input files");
        }
        for i in &inputs {
            if i.path.as_os_str() == "-" {
                continue;
            }
            if !i.path.exists() {
                bail!("{}: no such file", i.path.display());
            }
            if i.lang == Lang::Linker {
                let mut head = [0u8; 8];
                let n = fs::File::open(&i.path)
                    .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
                    .with_context(|| format!("{}: cannot read", i.path.display()))?;
                let head = &head[..n];
                if !is_wasm(head) && !head.starts_with(b"!<arch>\n") {
                    bail!(
                        "{} is not a C or C++ source file, a wasm object file or an archive",
                        i.path.display()
                    );
                }
            }
        }
        Ok(())
    }
}

/// The full clang command line for `req` (without running it).
pub fn command_line(tc: &Toolchain, req: &CcRequest) -> Command {
    let cxx = req.is_cxx();
    let mode = req.mode();
    let mut cmd = Command::new(if cxx { &tc.clangxx } else { &tc.clang });
    if mode == Mode::Query {
        cmd.args(target_flags(tc).iter().filter(|f| *f != "-pthread"));
        cmd.args(&req.args);
        return cmd;
    }
    cmd.args(target_flags(tc));
    cmd.arg("-g");
    let root = req
        .root
        .clone()
        .unwrap_or_else(|| project_root(&std::env::current_dir().unwrap_or_default()));
    cmd.args(path_map_flags(tc, &root));
    if !has_opt_level(&req.args) {
        cmd.arg(DEFAULT_OPT);
    }
    cmd.arg(format!("-I{}", tc.sdk_include.display()));
    cmd.arg("-include")
        .arg(tc.sdk_include.join("heddle_compat.h"));
    cmd.args(EMULATION_DEFINES);
    // setjmp/longjmp; at a link of objects only, LLVM's option would be
    // unused (a warning).
    if mode != Mode::Link || req.inputs().iter().any(|i| i.lang != Lang::Linker) {
        cmd.args(super::flags::SJLJ_FLAGS);
    } else {
        cmd.arg(super::flags::SJLJ_FLAGS[0]);
    }
    if cxx {
        cmd.args(["-fwasm-exceptions", "-fno-strict-return"]);
    }
    if req.legacy {
        cmd.args(LEGACY_FLAGS);
    }
    if mode == Mode::Link {
        // Before the user's arguments, so that a user's own -Wl, option of
        // the same name wins.
        cmd.arg(format!(
            "-Wl,--import-memory,--export-memory,--max-memory={MAX_MEMORY}"
        ));
    }
    cmd.args(&req.args);
    if mode == Mode::Link {
        cmd.arg(&tc.compat_lib);
        // After the user's -L: empty `-ldl -lrt …` (`sdk::EMPTY_LIBS`).
        if let Some(sdk) = tc.compat_lib.parent() {
            cmd.arg(format!("-L{}", sdk.join("lib").display()));
        }
    }
    cmd
}

/// The note added when clang rejects old C that `--legacy` accepts.
pub const LEGACY_NOTE: &str =
    "heddle: note: old C: rebuild with --legacy (heddle cc --legacy, or CFLAGS=--legacy)";

/// What heddle adds to clang's diagnostics `stderr` of a failed
/// invocation: the `--legacy` note when clang rejected an implicit
/// function declaration or implicit int (and `--legacy` was not given),
/// and the symbols wasm-ld could not resolve, each once, sorted.
pub fn failure_notes(stderr: &str, legacy: bool) -> (Option<&'static str>, Vec<String>) {
    let old_c = !legacy
        && stderr.lines().any(|l| {
            l.contains("error:")
                && (l.contains("call to undeclared function")
                    || l.contains("type specifier missing, defaults to 'int'")
                    || l.contains("[-Wimplicit-int]")
                    || l.contains("[-Wimplicit-function-declaration]"))
        });
    let mut unresolved: Vec<String> = Vec::new();
    for l in stderr.lines() {
        if let Some((_, sym)) = l.split_once("undefined symbol: ") {
            let sym = sym.trim().to_string();
            if !sym.is_empty() && !unresolved.contains(&sym) {
                unresolved.push(sym);
            }
        }
    }
    unresolved.sort();
    (old_c.then_some(LEGACY_NOTE), unresolved)
}

/// The one-line error of a failed link that left `unresolved` symbols.
fn unresolved_error(unresolved: &[String]) -> String {
    format!("unresolved symbols: {}", unresolved.join(", "))
}

/// Runs clang for `req` as a compiler driver does: clang's output goes
/// straight to the user, its diagnostics are forwarded (coloured when
/// heddle's stderr is a terminal), and a failure is an error after them
/// — naming every unresolved symbol of a failed link, with a note when
/// the error is old C that `--legacy` accepts. A linked module is then
/// checked for trap stubs (an error removes it).
pub fn drive(tc: &Toolchain, req: &CcRequest) -> Result<()> {
    use std::io::{IsTerminal, Write};
    req.check()?;
    let linked = req.linked_output();
    let mut cmd = command_line(tc, req);
    if std::io::stderr().is_terminal() {
        cmd.arg("-fcolor-diagnostics");
    }
    let res = cmd
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", tc.clang.display()))?;
    let _ = std::io::stderr().write_all(&res.stderr);
    if !res.status.success() {
        if let Some(out) = &linked {
            let _ = fs::remove_file(out);
        }
        let (note, unresolved) = failure_notes(&String::from_utf8_lossy(&res.stderr), req.legacy);
        if let Some(note) = note {
            eprintln!("{note}");
        }
        if !unresolved.is_empty() {
            bail!("{}", unresolved_error(&unresolved));
        }
        match res.status.code() {
            Some(code) => bail!("compilation failed (clang exited with status {code})"),
            None => bail!("compilation failed (clang was killed by a signal)"),
        }
    }
    if let Some(out) = linked.filter(|o| o.as_os_str() != "-") {
        finish_link(tc, req, &out)?;
    }
    Ok(())
}

/// After a link: when wasm-ld replaced a definition's only callers with a
/// `signature_mismatch` stub (and so dropped the definition), links again
/// keeping it, for the adapter the instrumentation puts in the stub; when
/// the program calls `dlsym`, links again with the table of its functions
/// ([`super::dltable`]); then checks the module (an error removes it).
fn finish_link(tc: &Toolchain, req: &CcRequest, out: &Path) -> Result<()> {
    let read = || fs::read(out).with_context(|| format!("cannot read {}", out.display()));
    let mut bytes = read()?;
    let mut extra = crate::instrument::stub_keep_flags(&bytes)?;
    let relink = |extra: &[String], what: &str| -> Result<()> {
        let res = command_line(tc, req)
            .args(extra)
            .output()
            .with_context(|| format!("cannot run {}", tc.clang.display()))?;
        if !res.status.success() {
            let _ = fs::remove_file(out);
            bail!(
                "linking again {what} failed:\n{}",
                String::from_utf8_lossy(&res.stderr).trim_end()
            );
        }
        Ok(())
    };
    let scratch = if super::dltable::defines_dlsym(&bytes) {
        let dir = paths::cache_dir("cc")?.join(format!(
            "dl-{}-{}",
            std::process::id(),
            paths::sha256_hex(out.display().to_string().as_bytes())
                .get(..16)
                .unwrap_or_default()
        ));
        fs::create_dir_all(&dir)?;
        match dl_table(tc, req, &extra, &dir) {
            Ok(Some(obj)) => extra.push(obj.display().to_string()),
            // The probe link failed: no table, dlsym finds nothing.
            Ok(None) => {}
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                let _ = fs::remove_file(out);
                return Err(e);
            }
        }
        Some(dir)
    } else {
        None
    };
    let linked = if extra.is_empty() {
        Ok(())
    } else {
        relink(&extra, &format!("with {}", extra.join(" ")))
    };
    if let Some(dir) = scratch {
        let _ = fs::remove_dir_all(dir);
    }
    linked?;
    bytes = read()?;
    if super::missing::has_stubs(&bytes) {
        bytes = name_missing_stubs(tc, req, &extra, out, &bytes)?;
    }
    if let Err(e) = check_linked(&bytes) {
        let _ = fs::remove_file(out);
        return Err(e);
    }
    Ok(())
}

/// Builds the object file of the `dlsym` table in `dir`
/// ([`super::dltable`]): links with `--export-all` to a scratch module,
/// lists its functions and compiles the table. `None` when that link fails.
fn dl_table(
    tc: &Toolchain,
    req: &CcRequest,
    extra: &[String],
    dir: &Path,
) -> Result<Option<PathBuf>> {
    let probe = dir.join("exported.wasm");
    let res = relink(tc, req, extra, "-Wl,--export-all", &probe)?;
    if !res.status.success() {
        return Ok(None);
    }
    let functions = super::dltable::exported_functions(&fs::read(&probe)?)?;
    let src = dir.join("heddle_dl_symbols.c");
    let obj = dir.join("heddle_dl_symbols.o");
    fs::write(&src, super::dltable::table_source(&functions))?;
    let res = Command::new(&tc.clang)
        .args(target_flags(tc))
        .args(["-O1", "-w", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .with_context(|| format!("cannot run {}", tc.clang.display()))?;
    if !res.status.success() {
        bail!(
            "compiling the dlsym table failed:\n{}",
            String::from_utf8_lossy(&res.stderr).trim_end()
        );
    }
    Ok(Some(obj))
}

/// Links `req` once more, with `extra` and `option`, to the scratch
/// module `to`.
fn relink(
    tc: &Toolchain,
    req: &CcRequest,
    extra: &[String],
    option: &str,
    to: &Path,
) -> Result<std::process::Output> {
    command_line(tc, req)
        .args(extra)
        .arg(option)
        .arg("-o")
        .arg(to)
        .output()
        .with_context(|| format!("cannot run {}", tc.clang.display()))
}

/// Names wasm-ld's stubs for undefined functions after the functions
/// ([`super::missing`]): links once more with
/// `--unresolved-symbols=import-dynamic` to a scratch file, and rewrites
/// `out`'s name section. Returns the new module.
fn name_missing_stubs(
    tc: &Toolchain,
    req: &CcRequest,
    extra: &[String],
    out: &Path,
    bytes: &[u8],
) -> Result<Vec<u8>> {
    let dir = paths::cache_dir("cc")?.join(format!("missing-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    let dynamic = dir.join("dynamic.wasm");
    let res = relink(
        tc,
        req,
        extra,
        "-Wl,--unresolved-symbols=import-dynamic",
        &dynamic,
    );
    let renamed = match res {
        Ok(r) if r.status.success() => fs::read(&dynamic)
            .map_err(anyhow::Error::from)
            .and_then(|d| super::missing::name_stubs(bytes, &d)),
        // The stubs keep wasm-ld's name; the module is as linked.
        _ => Ok(bytes.to_vec()),
    };
    let _ = fs::remove_dir_all(&dir);
    let renamed = renamed?;
    if renamed != bytes {
        fs::write(out, &renamed).with_context(|| format!("cannot write {}", out.display()))?;
    }
    Ok(renamed)
}

/// Runs clang for `req`, capturing its diagnostics: compile errors come
/// back as the error with clang's own message (warnings are printed). A
/// linked module is checked for trap stubs. Returns the output, if any.
pub fn compile(tc: &Toolchain, req: &CcRequest) -> Result<Option<PathBuf>> {
    req.check()?;
    let out = req.linked_output().or_else(|| req.output());
    let res = command_line(tc, req)
        .output()
        .with_context(|| format!("cannot run {}", tc.clang.display()))?;
    let stderr = String::from_utf8_lossy(&res.stderr);
    if !res.status.success() {
        if let Some(out) = &out {
            let _ = fs::remove_file(out);
        }
        let (note, unresolved) = failure_notes(&stderr, req.legacy);
        let mut msg = format!("compilation failed:\n{}", stderr.trim_end());
        if let Some(note) = note {
            msg.push('\n');
            msg.push_str(note);
        }
        if !unresolved.is_empty() {
            msg.push('\n');
            msg.push_str(&unresolved_error(&unresolved));
        }
        bail!("{msg}");
    }
    if !stderr.trim().is_empty() {
        eprintln!("{}", stderr.trim_end());
    }
    if let Some(linked) = req.linked_output() {
        finish_link(tc, req, &linked)?;
    }
    Ok(out)
}

/// Rejects a linked module that contains a wasm-ld trap stub for an
/// undefined weak symbol. `signature_mismatch:…` stubs (what autoconf's
/// link probes and old C make) link, as they do natively: the
/// instrumentation step turns them into adapters, and a module where that
/// is impossible is refused when it is run, naming both signatures.
pub fn check_linked(bytes: &[u8]) -> Result<()> {
    if let Some(stub) = ModuleInfo::parse(bytes)?.fatal_trap_stub() {
        bail!(
            "module rejected: wasm-ld inserted the trap stub `{stub}` (a weak symbol is undefined); it would trap at run time for a reason unrelated to concurrency — fix the declaration"
        );
    }
    Ok(())
}

/// `flags` with the default optimisation level made explicit, so that what
/// a replay records names the level it was built at.
pub fn with_opt_level(flags: &[String]) -> Vec<String> {
    let mut v = flags.to_vec();
    if !has_opt_level(&v) {
        v.push(DEFAULT_OPT.to_string());
    }
    v
}

/// The headers a make-style dependency file lists after its target.
fn parse_depfile(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\n", " ");
    let body = match joined.find(": ") {
        Some(i) => &joined[i + 2..],
        None => return Vec::new(),
    };
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&' ') {
            cur.push(' ');
            chars.next();
        } else if c.is_whitespace() {
            if !cur.is_empty() {
                out.push(PathBuf::from(std::mem::take(&mut cur)));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(PathBuf::from(cur));
    }
    out
}

/// How the cache names a file the compiler read: relative to the project
/// root when under it (so that the entry holds in another checkout), else
/// its absolute path.
fn dep_name(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// One line of an entry's dependency list: a header's name and the hash
/// of its contents.
fn dep_line(name: &str, contents: &[u8]) -> String {
    format!("{name}\t{}\n", paths::sha256_hex(contents))
}

/// The file a dependency name stands for.
fn dep_path(root: &Path, name: &str) -> PathBuf {
    let p = Path::new(name);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.join(p)
    }
}

/// The files `tc` itself provides (covered by its identity, not hashed).
/// `path` is canonical, so the directories are compared canonical too; the
/// directory holding the sysroot holds what it links to (heddle's libc++
/// headers, its wasi-libc headers).
fn in_toolchain(tc: &Toolchain, path: &Path) -> bool {
    let mut dirs = vec![tc.sysroot.clone()];
    dirs.extend(tc.sysroot.parent().map(Path::to_path_buf));
    dirs.extend(tc.resource_dir.clone());
    dirs.extend(tc.sdk_include.parent().map(Path::to_path_buf));
    dirs.extend(
        tc.clang
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf),
    );
    dirs.iter().any(|d| {
        let canon = d.canonicalize().unwrap_or_else(|_| d.clone());
        path.starts_with(d) || path.starts_with(&canon)
    })
}

/// The headers (besides the sources) that compiling `sources` with `flags`
/// reads, outside the toolchain, found with clang's `-M`: canonical paths.
fn read_headers(
    tc: &Toolchain,
    root: &Path,
    sources: &[PathBuf],
    flags: &[String],
    scratch: &Path,
) -> Result<Vec<PathBuf>> {
    let mut all = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        let depfile = scratch.join(format!("{i}.d"));
        let mut args: Vec<String> = flags.to_vec();
        args.extend([
            s.display().to_string(),
            "-M".into(),
            "-MF".into(),
            depfile.display().to_string(),
        ]);
        let req = CcRequest {
            args,
            root: Some(root.to_path_buf()),
            ..CcRequest::default()
        };
        compile(tc, &req)?;
        let text = fs::read_to_string(&depfile)
            .with_context(|| format!("cannot read {}", depfile.display()))?;
        for dep in parse_depfile(&text) {
            let dep = dep.canonicalize().unwrap_or(dep);
            if sources.contains(&dep) || in_toolchain(tc, &dep) || all.contains(&dep) {
                continue;
            }
            all.push(dep);
        }
    }
    all.sort();
    Ok(all)
}

/// Compiles `sources` (with extra clang `flags`) into a content-addressed
/// cache entry and returns its path; a second call with unchanged inputs
/// returns at once. The key covers everything that ends up in the module:
/// the toolchain, the flags, each source's name (relative to the project
/// root, as debug info records it) and contents, and every header the
/// compiler read outside the toolchain (found with `-M` when the entry is
/// built, and recorded beside it, as ccache's direct mode does). Nothing in
/// it depends on where the project or the cache is.
pub fn compile_cached(tc: &Toolchain, sources: &[PathBuf], flags: &[String]) -> Result<PathBuf> {
    let mut canonical = Vec::new();
    for s in sources {
        canonical.push(
            s.canonicalize()
                .with_context(|| format!("{}: cannot read source", s.display()))?,
        );
    }
    let first_dir = canonical
        .first()
        .context("no source given")?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let root = project_root(&first_dir);
    let mut base = format!(
        "heddle-cc-4 max-memory={MAX_MEMORY}\n{}\n{}\n",
        tc.identity,
        flags.join("\x1f")
    );
    for s in &canonical {
        let text = fs::read(s).with_context(|| format!("{}: cannot read source", s.display()))?;
        base.push_str(&format!(
            "{}={}\n",
            dep_name(&root, s),
            paths::sha256_hex(&text)
        ));
    }
    let base_hash = paths::sha256_hex(base.as_bytes())[..32].to_string();
    let dir = paths::cache_dir("cc")?;
    let deps_file = dir.join(format!("{base_hash}.deps"));
    // The entry for a list of (header name, content hash) pairs.
    let entry = |deps: &str| {
        let full = paths::sha256_hex(format!("{base}{deps}").as_bytes());
        dir.join(format!("{}.wasm", &full[..32]))
    };
    // Every header as it is now, when the recorded list still holds.
    let current = |recorded: &str| -> Option<String> {
        let mut now = String::new();
        for line in recorded.lines() {
            let (name, _) = line.rsplit_once('\t')?;
            let text = fs::read(dep_path(&root, name)).ok()?;
            now.push_str(&dep_line(name, &text));
        }
        Some(now)
    };
    let hit = || -> Option<PathBuf> {
        let recorded = fs::read_to_string(&deps_file).ok()?;
        let now = current(&recorded)?;
        let out = entry(&now);
        (now == recorded && out.exists()).then_some(out)
    };
    if let Some(out) = hit() {
        return Ok(out);
    }
    let _lock = paths::CacheLock::acquire(&dir.join(format!("{base_hash}.lock")))?;
    if let Some(out) = hit() {
        return Ok(out);
    }
    // Link under the final file name (wasm-ld records it in the name
    // section), in a private directory, then move it into place.
    let tmp_dir = dir.join(format!("tmp-{}-{}", &base_hash[..16], std::process::id()));
    fs::create_dir_all(&tmp_dir)?;
    let res = (|| -> Result<PathBuf> {
        let headers = read_headers(tc, &root, &canonical, flags, &tmp_dir)?;
        let mut deps = String::new();
        for h in &headers {
            let text = fs::read(h).with_context(|| format!("cannot read {}", h.display()))?;
            deps.push_str(&dep_line(&dep_name(&root, h), &text));
        }
        let out = entry(&deps);
        if !out.exists() {
            let name = out.file_name().context("cache entry name")?;
            let tmp = tmp_dir.join(name);
            let mut args: Vec<String> = flags.to_vec();
            args.extend(canonical.iter().map(|s| s.display().to_string()));
            args.push("-o".into());
            args.push(tmp.display().to_string());
            let req = CcRequest {
                args,
                root: Some(root.clone()),
                ..CcRequest::default()
            };
            compile(tc, &req)?;
            fs::rename(&tmp, &out)?;
        }
        paths::write_atomic(&deps_file, deps.as_bytes())?;
        Ok(out)
    })();
    let _ = fs::remove_dir_all(&tmp_dir);
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> CcRequest {
        CcRequest {
            args: args.iter().map(|s| s.to_string()).collect(),
            ..CcRequest::default()
        }
    }

    #[test]
    fn finds_inputs_output_and_mode() {
        let r = req(&["-O2", "-I", "inc.c", "a.c", "b.cpp", "-o", "x.wasm", "-DX"]);
        assert_eq!(
            r.sources(),
            vec![PathBuf::from("a.c"), PathBuf::from("b.cpp")]
        );
        assert_eq!(r.output(), Some(PathBuf::from("x.wasm")));
        assert!(r.is_cxx());
        assert_eq!(r.mode(), Mode::Link);
        assert_eq!(r.linked_output(), Some(PathBuf::from("x.wasm")));
        assert_eq!(req(&["-c", "a.c"]).mode(), Mode::Compile);
        assert_eq!(req(&["-c", "-E", "a.c"]).mode(), Mode::Preprocess);
        assert_eq!(req(&["-MM", "a.c"]).mode(), Mode::Preprocess);
        assert_eq!(req(&["-MD", "-c", "a.c"]).mode(), Mode::Compile);
        assert_eq!(req(&["-S", "-c", "a.c"]).mode(), Mode::Assemble);
        assert_eq!(req(&["a.o", "lib.a"]).linked_output(), Some("a.out".into()));
        assert_eq!(req(&["-ox.wasm", "a.c"]).output(), Some("x.wasm".into()));
        let x = req(&["-x", "c++", "k.txt", "-x", "none", "m.o", "-xc", "n"]);
        let langs: Vec<Lang> = x.inputs().iter().map(|i| i.lang).collect();
        assert_eq!(langs, vec![Lang::Cxx, Lang::Linker, Lang::C]);
        assert!(x.is_cxx());
        let c = req(&["-MF", "dep.c", "-lm", "-Wl,-z,stack-size=65536", "main.c"]);
        assert_eq!(c.sources(), vec![PathBuf::from("main.c")]);
        assert!(!c.is_cxx());
    }

    #[test]
    fn response_files_and_depfiles() {
        assert_eq!(
            split_words("-DA=1 'two words' \"q\\\"x\"\n  back\\ slash"),
            vec!["-DA=1", "two words", "q\"x", "back slash"]
        );
        assert_eq!(
            parse_depfile("x.o: a.c /usr/x.h \\\n  my\\ dir/b.h\n"),
            vec![
                PathBuf::from("a.c"),
                PathBuf::from("/usr/x.h"),
                PathBuf::from("my dir/b.h")
            ]
        );
        assert!(expand_response_files(&["@/nonexistent/rsp".into()])
            .unwrap_err()
            .to_string()
            .contains("cannot read response file /nonexistent/rsp"));
    }

    #[test]
    fn failure_notes_name_old_c_and_unresolved_symbols() {
        let implicit = "o.c:2:3: error: call to undeclared function 'foo'; ISO C99 and later do not support implicit function declarations [-Wimplicit-function-declaration]\n";
        assert_eq!(failure_notes(implicit, false), (Some(LEGACY_NOTE), vec![]));
        assert_eq!(failure_notes(implicit, true), (None, vec![]));
        let int = "o.c:5:8: error: type specifier missing, defaults to 'int'; ISO C99 and later do not support implicit int [-Wimplicit-int]\n";
        assert_eq!(failure_notes(int, false).0, Some(LEGACY_NOTE));
        assert_eq!(
            failure_notes("o.c:1:1: error: expected ';'\n", false).0,
            None
        );
        let ld = "wasm-ld-19: error: /tmp/m.o: undefined symbol: missing_fn\n\
                  wasm-ld-19: error: /tmp/n.o: undefined symbol: other\n\
                  wasm-ld-19: error: /tmp/n.o: undefined symbol: missing_fn\n";
        let (note, syms) = failure_notes(ld, false);
        assert_eq!(note, None);
        assert_eq!(syms, vec!["missing_fn", "other"]);
        assert_eq!(
            unresolved_error(&syms),
            "unresolved symbols: missing_fn, other"
        );
    }

    #[test]
    fn default_opt_level_is_made_explicit() {
        assert_eq!(with_opt_level(&["-DX".into()]), vec!["-DX", DEFAULT_OPT]);
        assert_eq!(with_opt_level(&["-O0".into()]), vec!["-O0"]);
    }
}

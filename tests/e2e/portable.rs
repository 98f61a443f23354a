//! Replays that travel: a failure found in one checkout, with its own cache,
//! replays in another checkout at another absolute path with another empty
//! cache, and on a machine that has nothing but heddle.

use crate::common::*;
use heddle::trace::replay::ReplayFile;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A checkout of the project's targets and test programs at `root`, with a
/// cache of its own at `cache` that holds only the installed toolchain.
struct Checkout {
    root: PathBuf,
    cache: PathBuf,
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        let ty = e.file_type().unwrap();
        if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), &to).unwrap();
        } else if ty.is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

fn checkout(root: PathBuf, cache: PathBuf, with_toolchain: bool) -> Checkout {
    for sub in ["targets", "tests/programs"] {
        copy_tree(&repo().join(sub), &root.join(sub));
    }
    // A project root, as a clone has one.
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("data")).unwrap();
    std::fs::write(root.join("data/input.txt"), "20\n").unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    if with_toolchain {
        toolchain();
        copy_tree(
            &heddle::paths::cache_root().join("toolchain"),
            &cache.join("toolchain"),
        );
    }
    Checkout { root, cache }
}

impl Checkout {
    fn heddle_in(&self, cwd: &Path, bin: &Path, args: &[&str]) -> Output {
        std::process::Command::new(bin)
            .args(args)
            .current_dir(cwd)
            .env("HEDDLE_CACHE_DIR", &self.cache)
            .env_remove("XDG_CACHE_HOME")
            .env("PWD", cwd)
            .output()
            .expect("run heddle")
    }

    fn heddle(&self, args: &[&str]) -> Output {
        self.heddle_in(&self.root, Path::new(env!("CARGO_BIN_EXE_heddle")), args)
    }

    /// Fuzzes until the first failure; returns the replay file's path.
    fn fuzz(&self, bin: &Path, target: &str, extra: &[&str], out: &str) -> PathBuf {
        // One build, so that both checkouts compile the same modules.
        let mut args = vec![
            "fuzz", target, "--opt", "1", "--runs", "2000", "--out", out, "--quiet",
        ];
        args.extend_from_slice(extra);
        let o = self.heddle_in(&self.root, bin, &args);
        let stdout = text(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{target}: {stdout}{}",
            text(&o.stderr)
        );
        let rel = stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
            .expect("replay command printed");
        self.root.join(rel)
    }
}

/// Copies a replay file and the module it ships into `mail` (what a user
/// sends a teammate); returns the copy's path.
fn send(replay: &Path, mail: &Path) -> PathBuf {
    std::fs::create_dir_all(mail).unwrap();
    let file = ReplayFile::load(replay).expect("valid replay file");
    let module = file
        .module
        .file
        .clone()
        .expect("the replay names its module");
    std::fs::copy(replay.with_file_name(&module), mail.join(&module)).unwrap();
    let to = mail.join(replay.file_name().unwrap());
    std::fs::copy(replay, &to).unwrap();
    to
}

/// Asserts that `o` is a replay that reproduced `file`'s failure.
fn assert_reproduced(o: &Output, file: &ReplayFile, what: &str) {
    let stdout = text(&o.stdout);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{what}: {stdout}{stderr}");
    assert!(
        stdout.contains("replay reproduced the recorded run"),
        "{what}: {stdout}"
    );
    assert!(stdout.contains(&file.verdict.summary), "{what}: {stdout}");
}

/// The SHA-256 of every module in a cache's compiled-source directory.
fn compiled_modules(cache: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(cache.join("cc"))
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
                .map(|p| heddle::paths::sha256_hex(&std::fs::read(p).unwrap()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_failure_replays_in_another_checkout_with_another_empty_cache() {
    let base = tempdir();
    let a = checkout(
        base.path().join("a/heddle"),
        base.path().join("cache-a"),
        true,
    );
    let b = checkout(
        base.path().join("elsewhere/deeper/b/heddle"),
        base.path().join("cache-b"),
        true,
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_heddle"));
    let bank = a.fuzz(bin, "targets/race_bank.c", &[], "heddle-out");
    let input = a.fuzz(
        bin,
        "tests/programs/read_input.c",
        &["--dir", "data:/data"],
        "heddle-out",
    );
    // C++: the module links heddle's libc++, whose headers and archives
    // are in each cache (another path) and must not make another module.
    let cxx = a.fuzz(bin, "targets/codeblock.cpp", &[], "heddle-out");
    let mail = base.path().join("mail");
    let bank = send(&bank, &mail);
    let input = send(&input, &mail);
    let cxx = send(&cxx, &mail);
    let bank_file = ReplayFile::load(&bank).unwrap();
    let input_file = ReplayFile::load(&input).unwrap();
    let cxx_file = ReplayFile::load(&cxx).unwrap();
    assert_eq!(input_file.run.dirs.len(), 1);
    assert_eq!(input_file.run.dirs[0].host, "data");
    assert!(input_file.run.dirs[0].files.contains_key("input.txt"));

    // The teammate's checkout: same sources, another path, its own cache.
    for (file, path) in [
        (&bank_file, &bank),
        (&input_file, &input),
        (&cxx_file, &cxx),
    ] {
        let o = b.heddle(&["replay", path.to_str().unwrap()]);
        assert_reproduced(&o, file, "other checkout");
        // Its own build of the source is the shipped module, byte for byte.
        assert!(
            !text(&o.stderr).contains("note:"),
            "the other checkout builds another module: {}",
            text(&o.stderr)
        );
    }
    assert_eq!(compiled_modules(&a.cache), compiled_modules(&b.cache));
    assert!(compiled_modules(&b.cache).contains(&bank_file.module.sha256));

    // The same build from another working directory and a symlinked path.
    let link = base.path().join("link");
    std::os::unix::fs::symlink(&b.root, &link).unwrap();
    let o = b.heddle_in(
        &link.join("targets"),
        bin,
        // Seed 1 is one whose schedule loses an update.
        &["run", "race_bank.c", "--seed", "1", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(compiled_modules(&a.cache), compiled_modules(&b.cache));

    // A machine with heddle and nothing else: no sources, no toolchain.
    let bare = checkout(
        base.path().join("bare"),
        base.path().join("cache-bare"),
        false,
    );
    let empty = base.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = bare.heddle_in(&empty, bin, &["replay", bank.to_str().unwrap()]);
    assert_reproduced(&o, &bank_file, "bare machine");
    assert!(text(&o.stdout).contains("module: shipped beside the replay"));
    // The granted directory is not there: one line saying how to grant it.
    let o = bare.heddle_in(&empty, bin, &["replay", input.to_str().unwrap()]);
    assert_usage_error(&o, "pass it with --dir HOST:/data");
    let dir = format!("{}:/data", bare.root.join("data").display());
    let o = bare.heddle_in(
        &empty,
        bin,
        &["replay", input.to_str().unwrap(), "--dir", &dir],
    );
    assert_reproduced(&o, &input_file, "bare machine with --dir");

    // A granted file that differs is named.
    std::fs::write(b.root.join("data/input.txt"), "21\n").unwrap();
    let o = b.heddle(&["replay", input.to_str().unwrap()]);
    assert_usage_error(&o, "input.txt differs");
    std::fs::write(b.root.join("data/extra.txt"), "x").unwrap();
    std::fs::write(b.root.join("data/input.txt"), "20\n").unwrap();
    let o = b.heddle(&["replay", input.to_str().unwrap()]);
    assert_usage_error(&o, "extra.txt was not there");

    // Without the shipped module, the cache or a rebuild still serve.
    std::fs::remove_file(mail.join(bank_file.module.file.as_ref().unwrap())).unwrap();
    let o = b.heddle(&["replay", bank.to_str().unwrap()]);
    assert_reproduced(&o, &bank_file, "from the cache");
    assert!(
        text(&o.stdout).contains("module: the cache"),
        "{}",
        text(&o.stdout)
    );
    std::fs::remove_dir_all(b.cache.join("by-hash")).unwrap();
    let o = b.heddle(&["replay", bank.to_str().unwrap()]);
    assert_reproduced(&o, &bank_file, "rebuilt");
    assert!(text(&o.stdout).contains("module: rebuilt from the recorded source"));
    // ... and when the rebuild gives other bytes, one line says why not.
    std::fs::remove_dir_all(b.cache.join("by-hash")).unwrap();
    let src = b.root.join("targets/race_bank.c");
    let mut code = std::fs::read_to_string(&src).unwrap();
    code.push_str("\n/* edited */\nint edited_here;\n");
    std::fs::write(&src, code).unwrap();
    let o = b.heddle(&["replay", bank.to_str().unwrap()]);
    assert_usage_error(&o, "builds to module");
    assert_usage_error(&o, "not the recorded");
}

#[test]
fn a_replay_from_before_shipped_modules_replays_or_says_why_not() {
    let dir = tempdir();
    let out = dir.path().join("out");
    let o = heddle_out(&[
        "fuzz",
        "targets/race_bank.c",
        "--runs",
        "2000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let path = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "toml") && !p.ends_with("campaign.toml"))
        .expect("a replay file");
    let text_v2 = std::fs::read_to_string(&path).unwrap();
    let file = ReplayFile::parse(&text_v2).unwrap();
    // Format 1 had no module beside it; its module is rebuilt from source.
    let v1: String = text_v2
        .replace("format = 2", "format = 1")
        .lines()
        .filter(|l| !l.starts_with("file = "))
        .map(|l| format!("{l}\n"))
        .collect();
    let old = dir.path().join("old.toml");
    std::fs::write(&old, &v1).unwrap();
    let o = heddle_out(&["replay", old.to_str().unwrap()]);
    assert_reproduced(&o, &file, "format 1");
    // One recorded on a module nobody can rebuild any more.
    let foreign = v1.replace(&file.module.sha256, &"0".repeat(64));
    std::fs::write(&old, foreign).unwrap();
    let o = heddle_out(&["replay", old.to_str().unwrap()]);
    assert_usage_error(&o, "it ships no module (it predates replay format 2)");
    assert_eq!(
        text(&o.stderr)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count(),
        1,
        "{}",
        text(&o.stderr)
    );
}

/// The heddle binary of the other profile, when it is built: a release
/// binary for a test run in the dev profile and the other way round.
/// `scripts/test.sh` builds both and sets `HEDDLE_REQUIRE_OTHER_PROFILE`.
fn other_profile_binary() -> Option<PathBuf> {
    let this = PathBuf::from(env!("CARGO_BIN_EXE_heddle"));
    let profile_dir = this.parent()?;
    let other = if profile_dir.ends_with("release") {
        "debug"
    } else {
        "release"
    };
    let p = profile_dir.parent()?.join(other).join("heddle");
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("HEDDLE_REQUIRE_OTHER_PROFILE").is_none(),
        "{} is missing: build it (`cargo build --{other}`) first",
        p.display()
    );
    None
}

#[test]
fn replays_cross_between_debug_and_release_builds() {
    let Some(other) = other_profile_binary() else {
        eprintln!("skipped: the other profile's heddle is not built (scripts/test.sh builds it)");
        return;
    };
    let this = PathBuf::from(env!("CARGO_BIN_EXE_heddle"));
    let base = tempdir();
    let co = checkout(base.path().join("co"), base.path().join("cache"), true);
    for (recorder, replayer) in [(&this, &other), (&other, &this)] {
        for (target, extra) in [
            ("targets/race_bank.c", vec![]),
            ("targets/deadlock_abba.c", vec!["--strategy", "pct:3"]),
            ("tests/programs/read_input.c", vec!["--dir", "data:/data"]),
        ] {
            let out = format!(
                "out-{}",
                recorder
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
            );
            let path = co.fuzz(recorder, target, &extra, &out);
            let file = ReplayFile::load(&path).unwrap();
            let o = co.heddle_in(&co.root, replayer, &["replay", path.to_str().unwrap()]);
            assert_reproduced(
                &o,
                &file,
                &format!(
                    "{target} from {} in {}",
                    recorder.display(),
                    replayer.display()
                ),
            );
        }
    }
}

/// The replay file every command writes ships its module: `explore`,
/// `plan` and `minimize` as well as `fuzz`. Each replays on a machine with
/// no sources and no toolchain.
#[test]
fn every_written_replay_ships_its_module() {
    let base = tempdir();
    let out = base.path().join("out");
    let o = |args: &[&str]| {
        let o = heddle_out(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o.stderr));
        let stdout = text(&o.stdout);
        let rel = stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
            .unwrap_or_else(|| panic!("{args:?}: no replay line in {stdout}"));
        repo().join(rel.split_whitespace().next().unwrap())
    };
    let out_s = out.to_str().unwrap();
    let explored = o(&[
        "explore",
        "targets/race_bank.c",
        "--reduction",
        "dpor",
        "--out",
        out_s,
        "--",
        "2",
        "1",
    ]);
    let planned = o(&[
        "plan",
        "plans/codeblock.toml",
        "targets/codeblock.cpp",
        "--runs",
        "3",
        "--out",
        out_s,
    ]);
    let fuzzed = o(&["fuzz", "targets/race_bank.c", "--out", out_s]);
    let min = out.join("min.toml");
    let m = heddle_out(&[
        "minimize",
        fuzzed.to_str().unwrap(),
        "-o",
        min.to_str().unwrap(),
    ]);
    assert_eq!(m.status.code(), Some(0), "{}", text(&m.stderr));
    let bare = checkout(base.path().join("bare"), base.path().join("cache"), false);
    let mail = base.path().join("mail");
    for path in [explored, planned, fuzzed, min] {
        let sent = send(&path, &mail);
        let file = ReplayFile::load(&sent).unwrap();
        let o = bare.heddle_in(
            &mail,
            Path::new(env!("CARGO_BIN_EXE_heddle")),
            &["replay", sent.to_str().unwrap()],
        );
        assert_reproduced(&o, &file, &path.display().to_string());
    }
}

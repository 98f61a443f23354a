//! Ready-made deployment: the container definition (deploy/container/), the
//! Kubernetes Jobs (deploy/kubernetes/), the Slurm array job
//! (deploy/slurm/) and the GitHub Actions workflows (.github/workflows/).
//!
//! None of the engines runs here, so each file is checked as far as this
//! machine allows: the manifests against the engines' JSON Schemas
//! (kubernetes-validate, check-jsonschema) and the scripts and the
//! Containerfile with their linters (shellcheck, hadolint), all from
//! scripts/manifest-tools.sh; then the cross-references no schema sees (the
//! shard count in two places, the volume the output goes to, the script a
//! manifest runs being the one the image installs); and the entry points
//! run as processes with the variables each engine sets, through shard →
//! stop → resume → merge.

use crate::common::*;
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn repo_file(rel: &str) -> String {
    read(&repo().join(rel))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Every YAML document of a file, as a JSON value.
fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = read(path);
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// The `.yaml`/`.yml` files of a directory of the repository, sorted.
fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no YAML file in {dir}");
    v
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

// ---------------------------------------------------------------------------
// The checking tools

/// The bin directory of scripts/manifest-tools.sh's venv (check-jsonschema,
/// kubernetes-validate, shellcheck, hadolint), installed on first use. None
/// when it cannot be installed (no Python venv, no package registry), unless
/// `HEDDLE_REQUIRE_MANIFEST_TOOLS` is set, as scripts/test.sh does.
fn tools() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        let o = Command::new("bash")
            .arg(repo().join("scripts/manifest-tools.sh"))
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/manifest-tools.sh");
        if o.status.success() {
            return Some(PathBuf::from(text(&o.stdout).trim()));
        }
        assert!(
            std::env::var_os("HEDDLE_REQUIRE_MANIFEST_TOOLS").is_none(),
            "scripts/manifest-tools.sh failed: {}",
            text(&o.stderr)
        );
        eprintln!(
            "skipped: the schema checks and linters (scripts/manifest-tools.sh failed: {})",
            text(&o.stderr).trim()
        );
        None
    })
    .as_deref()
}

/// Runs a tool of [`tools`] on `args` (paths relative to the repository),
/// which must succeed; does nothing when the tools are not there.
fn check_with(tool: &str, args: &[&str]) {
    let Some(bin) = tools() else { return };
    let o = Command::new(bin.join(tool))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert!(
        o.status.success(),
        "{tool} {}:\n{}{}",
        args.join(" "),
        text(&o.stdout),
        text(&o.stderr)
    );
}

// ---------------------------------------------------------------------------
// The container definition

/// One instruction of a Containerfile: its keyword, its arguments (line
/// continuations joined) and the line it starts on.
struct Instruction {
    keyword: String,
    args: String,
    line: usize,
}

const CONTAINERFILE: &str = "deploy/container/Containerfile";

/// The instructions of the Containerfile, read as Docker's parser does:
/// comment and blank lines skipped (also inside a continued instruction), a
/// trailing `\` continues an instruction on the next line.
fn instructions() -> Vec<Instruction> {
    let text = repo_file(CONTAINERFILE);
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (start, mut acc) = open.take().unwrap_or((i + 1, String::new()));
        if let Some(body) = line.strip_suffix('\\') {
            acc.push_str(body.trim_end());
            acc.push(' ');
            open = Some((start, acc));
        } else {
            acc.push_str(line);
            let (keyword, args) = acc.split_once(char::is_whitespace).unwrap_or((&acc, ""));
            out.push(Instruction {
                keyword: keyword.to_string(),
                args: args.trim().to_string(),
                line: start,
            });
        }
    }
    assert!(
        open.is_none(),
        "{CONTAINERFILE}: ends inside a continued line"
    );
    out
}

/// The scripts the image installs (`install -m 0755 SRC DST` in a RUN): the
/// installed file's name and the repository path it comes from.
fn image_scripts() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for ins in instructions().iter().filter(|i| i.keyword == "RUN") {
        for cmd in ins.args.split("&&") {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            if words.first() == Some(&"install") && words.len() >= 3 {
                let (src, dst) = (words[words.len() - 2], words[words.len() - 1]);
                let name = Path::new(dst).file_name().unwrap().to_str().unwrap();
                m.insert(name.to_string(), src.to_string());
            }
        }
    }
    m
}

/// The Containerfile is well formed: only known instructions, in capitals;
/// ARG only before the first FROM, which is Debian 12; heddle built from
/// this tree with `cargo install --path runner --locked`, then its
/// toolchain installed at build time; the entry point heddle (exec form);
/// what it copies or installs exists, and .dockerignore keeps it in the
/// build context. hadolint, the Dockerfile linter, agrees.
#[test]
fn containerfile_builds_heddle_with_its_toolchain() {
    const KNOWN: &[&str] = &[
        "FROM",
        "RUN",
        "CMD",
        "LABEL",
        "MAINTAINER",
        "EXPOSE",
        "ENV",
        "ADD",
        "COPY",
        "ENTRYPOINT",
        "VOLUME",
        "USER",
        "WORKDIR",
        "ARG",
        "ONBUILD",
        "STOPSIGNAL",
        "HEALTHCHECK",
        "SHELL",
    ];
    let ins = instructions();
    for i in &ins {
        assert!(
            KNOWN.contains(&i.keyword.as_str()),
            "{CONTAINERFILE}:{}: unknown instruction `{}`",
            i.line,
            i.keyword
        );
        assert!(
            !i.args.is_empty(),
            "{CONTAINERFILE}:{}: no arguments",
            i.line
        );
    }
    let first_from = ins
        .iter()
        .position(|i| i.keyword == "FROM")
        .expect("a FROM instruction");
    assert!(
        ins[..first_from].iter().all(|i| i.keyword == "ARG"),
        "only ARG may come before the first FROM"
    );
    // The base image, with the ARG defaults given before FROM.
    let mut base = ins[first_from].args.clone();
    for a in &ins[..first_from] {
        if let Some((k, v)) = a.args.split_once('=') {
            base = base.replace(&format!("${{{k}}}"), v);
        }
    }
    assert!(
        base.starts_with("docker.io/library/rust:") && base.ends_with("-bookworm"),
        "the base is Debian 12 with rustup: {base}"
    );
    let entry: Vec<&Instruction> = ins.iter().filter(|i| i.keyword == "ENTRYPOINT").collect();
    assert_eq!(entry.len(), 1, "one ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(&entry[0].args).expect("ENTRYPOINT in exec form");
    assert_eq!(entry, ["heddle"]);
    let run_at = |needle: &str| {
        ins.iter()
            .position(|i| i.keyword == "RUN" && i.args.contains(needle))
            .unwrap_or_else(|| panic!("no RUN with `{needle}`"))
    };
    assert!(run_at("cargo install --path runner --locked") < run_at("heddle toolchain install"));
    let copies: Vec<&Instruction> = ins
        .iter()
        .filter(|i| i.keyword == "COPY" || i.keyword == "ADD")
        .collect();
    assert!(
        copies.iter().any(|c| c.args == ". ."),
        "the build context (the repository) is copied in"
    );
    for c in &copies {
        let words: Vec<&str> = c
            .args
            .split_whitespace()
            .filter(|w| !w.starts_with("--"))
            .collect();
        for src in &words[..words.len() - 1] {
            assert!(
                repo().join(src).exists(),
                "{CONTAINERFILE}:{}: no {src}",
                c.line
            );
        }
    }
    let scripts = image_scripts();
    assert!(!scripts.is_empty());
    for src in scripts.values() {
        assert!(
            repo().join(src).is_file(),
            "{CONTAINERFILE} installs {src}, missing"
        );
    }
    // Nothing the build needs is left out of the context.
    let ignore = repo_file(".dockerignore");
    for line in ignore.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        for needed in [
            "runner",
            "crates",
            "Cargo",
            "deploy",
            "targets",
            "guest-sdk",
            ".git",
        ] {
            assert!(
                !line.trim_start_matches('/').starts_with(needed),
                ".dockerignore leaves out {needed} with `{line}`"
            );
        }
    }
    assert_eq!(
        std::fs::read_link(repo().join("deploy/container/Dockerfile")).unwrap(),
        Path::new("Containerfile")
    );
    check_with("hadolint", &[CONTAINERFILE]);
}

// ---------------------------------------------------------------------------
// Kubernetes

fn k8s_docs() -> Vec<(PathBuf, Value)> {
    let mut v = Vec::new();
    for f in yaml_files("deploy/kubernetes") {
        for d in yaml_docs(&f) {
            v.push((f.clone(), d));
        }
    }
    v
}

fn k8s_job<'a>(docs: &'a [(PathBuf, Value)], name: &str) -> &'a Value {
    &docs
        .iter()
        .find(|(_, d)| d["kind"] == "Job" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Job {name} in deploy/kubernetes"))
        .1
}

/// The one container of a Job's pods.
fn k8s_container(job: &Value) -> &Value {
    let c = job["spec"]["template"]["spec"]["containers"]
        .as_array()
        .expect("containers");
    assert_eq!(c.len(), 1, "one container");
    &c[0]
}

/// A container's environment: the literal values (valueFrom ones as None).
fn k8s_env(container: &Value) -> BTreeMap<String, Option<String>> {
    container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            (
                str_of(&e["name"], "env name").to_string(),
                e["value"].as_str().map(String::from),
            )
        })
        .collect()
}

/// The script a Job's container runs: its command is a script the image
/// installs, and this is the repository file it comes from.
fn k8s_script(job: &Value) -> String {
    let command = k8s_container(job)["command"]
        .as_array()
        .expect("the container's command");
    assert_eq!(command.len(), 1, "the command is the entry script alone");
    let name = str_of(&command[0], "command");
    image_scripts()
        .get(name)
        .unwrap_or_else(|| panic!("the image does not install {name}"))
        .clone()
}

/// The PVC claim names defined in deploy/kubernetes, and the claim mounted
/// where `out` is for a Job.
fn k8s_claim_of(job: &Value, out: &str) -> String {
    let spec = &job["spec"]["template"]["spec"];
    let mount = k8s_container(job)["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .find(|m| Path::new(out).starts_with(str_of(&m["mountPath"], "mountPath")))
        .unwrap_or_else(|| panic!("OUT {out} is on no mounted volume"));
    let volume = spec["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume");
    str_of(&volume["persistentVolumeClaim"]["claimName"], "claimName").to_string()
}

/// The Kubernetes manifests pass Kubernetes' own OpenAPI schemas (strict:
/// no unknown field) for the oldest version they need (1.29:
/// backoffLimitPerIndex and podFailurePolicy on by default) and the newest
/// one known; and they fit together: the Indexed Job has as many
/// completions as the SHARDS its script is told, retries per index, gives
/// SIGTERM time, writes OUT on the shared claim, which pvc.yaml defines
/// and the merge Job reads at the same OUT; each Job runs the script the
/// image installs from deploy/kubernetes/, and every variable it sets is
/// one that script reads.
#[test]
fn kubernetes_manifests_are_valid_and_fit_together() {
    let docs = k8s_docs();
    for (f, d) in &docs {
        for key in ["apiVersion", "kind"] {
            assert!(d[key].is_string(), "{}: no {key}", f.display());
        }
        assert!(
            d["metadata"]["name"].is_string(),
            "{}: no name",
            f.display()
        );
    }
    let claims: BTreeSet<&str> = docs
        .iter()
        .filter(|(_, d)| d["kind"] == "PersistentVolumeClaim")
        .map(|(_, d)| str_of(&d["metadata"]["name"], "name"))
        .collect();

    let fuzz = k8s_job(&docs, "heddle-fuzz");
    let spec = &fuzz["spec"];
    assert_eq!(fuzz["apiVersion"], "batch/v1");
    assert_eq!(spec["completionMode"], "Indexed");
    let completions = spec["completions"].as_u64().expect("completions");
    let parallelism = spec["parallelism"].as_u64().expect("parallelism");
    assert!((1..=completions).contains(&parallelism));
    assert!(spec["backoffLimitPerIndex"]
        .as_u64()
        .is_some_and(|n| n >= 1));
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert!(
        pod["terminationGracePeriodSeconds"]
            .as_u64()
            .is_some_and(|s| s >= 60),
        "time to save on SIGTERM"
    );
    let container = k8s_container(fuzz);
    for rule in spec["podFailurePolicy"]["rules"].as_array().unwrap() {
        if let Some(name) = rule["onExitCodes"]["containerName"].as_str() {
            assert_eq!(container["name"], name);
        }
    }
    let env = k8s_env(container);
    assert_eq!(
        env["SHARDS"].as_deref(),
        Some(completions.to_string().as_str()),
        "SHARDS (--shard auto/N) is the Job's completions"
    );
    let jobs = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "JOBS")
        .expect("JOBS");
    assert_eq!(
        jobs["valueFrom"]["resourceFieldRef"]["resource"],
        "limits.cpu"
    );
    assert_eq!(
        jobs["valueFrom"]["resourceFieldRef"]["containerName"],
        container["name"]
    );
    assert!(container["resources"]["limits"]["cpu"].is_string());
    let out = env["OUT"].clone().expect("OUT");
    let claim = k8s_claim_of(fuzz, &out);
    assert!(
        claims.contains(claim.as_str()),
        "claim {claim} is not defined"
    );
    let shard_script = k8s_script(fuzz);
    assert_eq!(shard_script, "deploy/kubernetes/shard.sh");
    let script_text = repo_file(&shard_script);
    for name in env.keys() {
        assert!(
            script_text.contains(&format!("${{{name}")),
            "{shard_script} does not read {name}"
        );
    }
    assert!(script_text.contains("--shard \"auto/$SHARDS\""));
    assert!(script_text.contains("JOB_COMPLETION_INDEX"));

    let merge = k8s_job(&docs, "heddle-merge");
    assert_eq!(k8s_script(merge), "deploy/kubernetes/merge.sh");
    assert_eq!(
        k8s_env(k8s_container(merge))["OUT"].as_deref(),
        Some(out.as_str()),
        "the merge reads the fuzz Job's OUT"
    );
    assert_eq!(k8s_claim_of(merge, &out), claim);
    assert_eq!(merge["spec"]["backoffLimit"], 0);

    let files: Vec<String> = yaml_files("deploy/kubernetes")
        .iter()
        .map(|f| f.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    for version in ["1.29.0", "1.37.0"] {
        let mut args = vec!["--strict", "--quiet", "-k", version];
        args.extend(files.iter().map(String::as_str));
        check_with("kubernetes-validate", &args);
    }
}

// ---------------------------------------------------------------------------
// GitHub Actions

/// The expressions in a workflow value: the inside of every `${{ … }}`, and
/// every `if:` condition whole.
fn expressions(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(i) = rest.find("${{") {
                let end = rest[i..].find("}}").expect("an unclosed ${{") + i;
                out.push(rest[i + 3..end].trim().to_string());
                rest = &rest[end + 2..];
            }
        }
        Value::Array(a) => a.iter().for_each(|x| expressions(x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("if", Value::String(s)) if !s.contains("${{") => out.push(s.clone()),
                    _ => expressions(x, out),
                }
            }
        }
        _ => {}
    }
}

/// The dotted paths that follow `root.` in an expression (`inputs.runs` →
/// ["runs"], `needs.build.outputs.x` → ["build", "outputs", "x"]).
fn references(expr: &str, root: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let pat = format!("{root}.");
    let mut v = Vec::new();
    for (i, _) in expr.match_indices(&pat) {
        if expr[..i]
            .chars()
            .next_back()
            .is_some_and(|c| ident(c) || c == '.')
        {
            continue;
        }
        let rest = &expr[i + pat.len()..];
        let end = rest
            .find(|c: char| !(ident(c) || c == '.'))
            .unwrap_or(rest.len());
        v.push(
            rest[..end]
                .split('.')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        );
    }
    v
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

fn workflow(name: &str) -> Value {
    let docs = yaml_docs(&repo().join(".github/workflows").join(name));
    assert_eq!(docs.len(), 1, "{name}: one document");
    docs.into_iter().next().unwrap()
}

/// A job's `needs`, as a list.
fn needs(job: &Value) -> Vec<String> {
    match &job["needs"] {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().map(|x| str_of(x, "needs").to_string()).collect(),
        Value::Null => vec![],
        x => panic!("needs: {x}"),
    }
}

/// The structure of one workflow: triggers and jobs; each job either calls
/// a reusable workflow (a local one must exist and declare what it is
/// given) or has runs-on, a time limit and steps that each use an action or
/// run a script; `needs` names jobs; every `inputs.X` is declared (and, in
/// a reusable workflow, every declared input is used); every
/// `needs.J.outputs.O` names a job it needs and an output that job
/// declares; every `steps.S` a step of its job; every `matrix.K` a key of
/// its matrix.
fn check_workflow(name: &str, w: &Value) {
    assert!(w["name"].is_string(), "{name}: no name");
    let on = &w["on"];
    assert!(on.is_object(), "{name}: no `on`");
    let declared: BTreeSet<String> = keys(&on["workflow_call"]["inputs"])
        .union(&keys(&on["workflow_dispatch"]["inputs"]))
        .cloned()
        .collect();
    let jobs = w["jobs"].as_object().expect("jobs");
    assert!(!jobs.is_empty());
    let mut all = Vec::new();
    expressions(w, &mut all);
    let mut used = BTreeSet::new();
    for e in &all {
        for r in references(e, "inputs") {
            assert!(
                declared.contains(&r[0]),
                "{name}: inputs.{} is not declared",
                r[0]
            );
            used.insert(r[0].clone());
        }
    }
    if on["workflow_call"].is_object() {
        assert_eq!(
            used,
            keys(&on["workflow_call"]["inputs"]),
            "{name}: unused inputs"
        );
        for (out, o) in on["workflow_call"]["outputs"]
            .as_object()
            .into_iter()
            .flatten()
        {
            let mut e = Vec::new();
            expressions(&o["value"], &mut e);
            for r in e.iter().flat_map(|e| references(e, "jobs")) {
                assert!(
                    keys(&jobs[&r[0]]["outputs"]).contains(&r[2]),
                    "{name}: output {out} names jobs.{}",
                    r.join(".")
                );
            }
        }
    }
    for (jname, job) in jobs {
        let needed = needs(job);
        for n in &needed {
            assert!(
                jobs.contains_key(n),
                "{name}: {jname} needs {n}, no such job"
            );
        }
        if let Some(uses) = job["uses"].as_str() {
            let called = uses
                .strip_prefix("./")
                .expect("a reusable workflow of this repository");
            let callee = yaml_docs(&repo().join(called)).remove(0);
            let inputs = &callee["on"]["workflow_call"]["inputs"];
            let given = keys(&job["with"]);
            for g in &given {
                assert!(
                    keys(inputs).contains(g),
                    "{name}: {jname} gives {uses} no input {g}"
                );
            }
            for (i, spec) in inputs.as_object().unwrap() {
                if spec["required"] == true {
                    assert!(given.contains(i), "{name}: {jname} lacks input {i}");
                }
            }
            continue;
        }
        assert!(job["runs-on"].is_string(), "{name}: {jname} has no runs-on");
        assert!(
            !job["timeout-minutes"].is_null(),
            "{name}: {jname}: no timeout-minutes"
        );
        let steps = job["steps"].as_array().expect("steps");
        assert!(!steps.is_empty());
        let ids: BTreeSet<&str> = steps.iter().filter_map(|s| s["id"].as_str()).collect();
        for s in steps {
            assert!(
                s["uses"].is_string() != s["run"].is_string(),
                "{name}: {jname}: a step either uses an action or runs a script: {s}"
            );
        }
        let matrix = keys(&job["strategy"]["matrix"]);
        let mut exprs = Vec::new();
        expressions(job, &mut exprs);
        for e in &exprs {
            for r in references(e, "needs") {
                assert!(
                    needed.contains(&r[0]),
                    "{name}: {jname} does not need {}",
                    r[0]
                );
                assert_eq!(r.get(1).map(String::as_str), Some("outputs"));
                assert!(
                    keys(&jobs[&r[0]]["outputs"]).contains(&r[2]),
                    "{name}: job {} has no output {}",
                    r[0],
                    r[2]
                );
            }
            for r in references(e, "steps") {
                assert!(
                    ids.contains(r[0].as_str()),
                    "{name}: {jname} has no step {}",
                    r[0]
                );
            }
            for r in references(e, "matrix") {
                assert!(
                    matrix.contains(&r[0]),
                    "{name}: {jname}: no matrix.{}",
                    r[0]
                );
            }
        }
    }
}

/// The step of a job whose script contains `needle`.
fn step_running<'a>(job: &'a Value, needle: &str) -> &'a Value {
    job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["run"].as_str().is_some_and(|r| r.contains(needle)))
        .unwrap_or_else(|| panic!("no step runs `{needle}`"))
}

/// The step of a job that uses `action` (`actions/upload-artifact`) with
/// `key` (its `with:`) containing `needle`.
fn step_using<'a>(job: &'a Value, action: &str, key: &str, needle: &str) -> &'a Value {
    job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["uses"].as_str().is_some_and(|u| u.starts_with(action))
                && s["with"][key].as_str().is_some_and(|p| p.contains(needle))
        })
        .unwrap_or_else(|| panic!("no step uses {action} with {key} ~ {needle}"))
}

/// The workflows pass schemastore's GitHub workflow schema (and the
/// stricter one that asks every job for a time limit), and their structure
/// holds together (see check_workflow). ci.yml runs .ci/run in Debian 12
/// within CI's 90 minutes; heddle-fuzz.yml is a reusable workflow whose
/// matrix is the list of shard numbers, whose fuzz step passes the matrix
/// value and the shard count as `--shard K/N` and uploads the directory it
/// writes, and whose merge job merges what the shards uploaded;
/// example-fuzz.yml calls it on a bundled target.
#[test]
fn workflows_are_valid_and_fit_together() {
    let files = yaml_files(".github/workflows");
    let mut names = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        check_workflow(&name, &workflow(&name));
        names.push(name);
    }
    for want in ["ci.yml", "heddle-fuzz.yml", "example-fuzz.yml"] {
        assert!(names.iter().any(|n| n == want), "no {want}");
    }

    let ci = workflow("ci.yml");
    let test = &ci["jobs"]["test"];
    assert_eq!(test["container"], "debian:12");
    assert_eq!(test["timeout-minutes"], 90);
    step_running(test, ".ci/run");
    assert!(repo().join(".ci/run").is_file());

    let fuzz = workflow("heddle-fuzz.yml");
    let inputs = keys(&fuzz["on"]["workflow_call"]["inputs"]);
    for i in [
        "target",
        "runs",
        "shards",
        "strategy",
        "time-budget",
        "heddle-ref",
    ] {
        assert!(inputs.contains(i), "heddle-fuzz.yml: no input {i}");
    }
    let job = &fuzz["jobs"]["fuzz"];
    assert_eq!(
        job["strategy"]["matrix"]["shard"],
        "${{ fromJSON(needs.build.outputs.shards) }}"
    );
    assert_eq!(job["strategy"]["fail-fast"], false);
    let step = step_running(job, "--shard \"$SHARD/$SHARDS\"");
    assert_eq!(step["env"]["SHARD"], "${{ matrix.shard }}");
    assert_eq!(step["env"]["SHARDS"], "${{ inputs.shards }}");
    assert!(str_of(&step["run"], "run").contains("--out \"shard-$SHARD\""));
    step_using(
        job,
        "actions/upload-artifact",
        "path",
        "shard-${{ matrix.shard }}",
    );
    let merge = &fuzz["jobs"]["merge"];
    assert!(needs(merge).contains(&"fuzz".to_string()));
    step_running(merge, "merge shards/* --out merged");
    step_using(merge, "actions/upload-artifact", "path", "merged");

    let example = workflow("example-fuzz.yml");
    let call = example["jobs"]
        .as_object()
        .unwrap()
        .values()
        .find(|j| j["uses"] == "./.github/workflows/heddle-fuzz.yml")
        .expect("example-fuzz.yml calls heddle-fuzz.yml");
    assert!(repo()
        .join(str_of(&call["with"]["target"], "target"))
        .is_file());

    let rel: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(repo()).unwrap().display().to_string())
        .collect();
    let mut args = vec!["--builtin-schema", "vendor.github-workflows"];
    args.extend(rel.iter().map(String::as_str));
    check_with("check-jsonschema", &args);
    check_with(
        "check-jsonschema",
        &[
            "--builtin-schema",
            "custom.github-workflows-require-timeout",
            ".github/workflows/ci.yml",
            ".github/workflows/heddle-fuzz.yml",
        ],
    );
}

/// Evaluates the `${{ … }}` parts of a workflow string from `vars` (an
/// expression's text → its value); any other expression is an error.
fn eval(s: &str, vars: &BTreeMap<&str, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${{") {
        let end = rest[i..].find("}}").unwrap() + i;
        let e = rest[i + 3..end].trim();
        out.push_str(&rest[..i]);
        out.push_str(
            vars.get(e)
                .unwrap_or_else(|| panic!("cannot evaluate `{e}` here")),
        );
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// A directory holding `heddle`, a link to the heddle under test.
fn heddle_bin_dir(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_heddle"), dir.join("heddle")).unwrap();
    dir.to_path_buf()
}

/// Runs a workflow step's script as the runner would (`shell: bash`: bash
/// --noprofile --norc -eo pipefail), in `cwd`, with the step's env
/// evaluated and `extra` variables.
fn run_step(
    step: &Value,
    cwd: &Path,
    vars: &BTreeMap<&str, String>,
    extra: &[(&str, String)],
) -> Output {
    let script = cwd.join(".step.sh");
    std::fs::write(&script, str_of(&step["run"], "run")).unwrap();
    let mut c = Command::new("bash");
    c.args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&script)
        .current_dir(cwd)
        .stdin(Stdio::null());
    for (k, v) in step["env"].as_object().into_iter().flatten() {
        c.env(k, eval(str_of(v, k), vars));
    }
    for (k, v) in extra {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    std::fs::remove_file(&script).unwrap();
    o
}

/// heddle-fuzz.yml's own scripts, run here as the runner would run them:
/// the build job's list of shards, each matrix job's fuzz step (a shard
/// that finds a failure still succeeds, so its replay files are uploaded)
/// and the merge step on the uploaded directories, which fails the
/// workflow on the failure found, says so in its output, writes the job
/// summary and leaves the merged campaign of all the runs where the upload
/// step takes it.
#[test]
fn reusable_workflow_steps_shard_and_merge_a_campaign() {
    toolchain();
    let w = workflow("heddle-fuzz.yml");
    let dir = tempdir();
    let target = repo().join("targets/race_bank.c");
    let temp = dir.path().join("runner-temp");
    let bin = heddle_bin_dir(&temp.join("heddle-bin"));
    let mut vars: BTreeMap<&str, String> = BTreeMap::from([
        ("inputs.target", p(&target).to_string()),
        ("inputs.runs", "400".to_string()),
        ("inputs.shards", "4".to_string()),
        ("inputs.strategy", "random,pct:3".to_string()),
        ("inputs.time-budget", String::new()),
        ("inputs.fuzz-args", String::new()),
        ("inputs.artifact-prefix", "heddle".to_string()),
        ("runner.temp", p(&temp).to_string()),
    ]);

    // The build job's list of shard numbers: the fuzz job's matrix.
    let build = &w["jobs"]["build"];
    let plan = build["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "plan")
        .expect("the plan step");
    assert_eq!(
        build["outputs"]["shards"],
        "${{ steps.plan.outputs.shards }}"
    );
    let ws = dir.path().join("plan");
    std::fs::create_dir_all(&ws).unwrap();
    let output = dir.path().join("plan-output");
    let o = run_step(
        plan,
        &ws,
        &vars,
        &[("GITHUB_OUTPUT", p(&output).to_string())],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let line = read(&output);
    let shards: Vec<u64> =
        serde_json::from_str(line.trim().strip_prefix("shards=").expect("shards=")).unwrap();
    assert_eq!(shards, [1, 2, 3, 4]);

    // Each matrix job, then its upload, as the merge job's download lays
    // them out (one directory per artifact under its path).
    let fuzz = &w["jobs"]["fuzz"];
    let merge = &w["jobs"]["merge"];
    let step = step_running(fuzz, "--shard");
    let upload = step_using(fuzz, "actions/upload-artifact", "path", "shard-");
    let download = step_using(merge, "actions/download-artifact", "pattern", "-shard-*");
    let merge_ws = dir.path().join("merge");
    let downloaded = merge_ws.join(str_of(&download["with"]["path"], "path"));
    let pattern = eval(str_of(&download["with"]["pattern"], "pattern"), &vars);
    let path_var = format!("{}:{}", p(&bin), std::env::var("PATH").unwrap_or_default());
    for k in shards {
        vars.insert("matrix.shard", k.to_string());
        let ws = dir.path().join(format!("fuzz-{k}"));
        std::fs::create_dir_all(&ws).unwrap();
        let o = run_step(step, &ws, &vars, &[("PATH", path_var.clone())]);
        assert_eq!(o.status.code(), Some(0), "shard {k}: {}", text(&o.stderr));
        let name = eval(str_of(&upload["with"]["name"], "name"), &vars);
        let path = eval(str_of(&upload["with"]["path"], "path"), &vars);
        assert!(
            name.starts_with(pattern.trim_end_matches('*')),
            "{name} ~ {pattern}"
        );
        let from = ws.join(&path);
        assert!(
            from.join("campaign.toml").is_file(),
            "shard {k} uploads {path}"
        );
        std::fs::create_dir_all(&downloaded).unwrap();
        std::fs::rename(&from, downloaded.join(&name)).unwrap();
    }
    vars.remove("matrix.shard");

    let step = merge["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "merge")
        .expect("the merge step");
    let (out, summary) = (
        dir.path().join("merge-output"),
        dir.path().join("summary.md"),
    );
    let o = run_step(
        step,
        &merge_ws,
        &vars,
        &[
            ("RUNNER_TEMP", p(&temp).to_string()),
            ("GITHUB_OUTPUT", p(&out).to_string()),
            ("GITHUB_STEP_SUMMARY", p(&summary).to_string()),
        ],
    );
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    assert!(
        stdout.contains("::error::the campaign found a failure"),
        "{stdout}"
    );
    assert_eq!(read(&out).trim(), "failed=true");
    assert!(
        read(&summary).contains("distinct failures 1"),
        "{}",
        read(&summary)
    );
    let upload = step_using(merge, "actions/upload-artifact", "path", "merged");
    let merged = merge_ws.join(str_of(&upload["with"]["path"], "path"));
    assert_eq!(stat(&summary_of(&merged), "runs"), 400);
}

// ---------------------------------------------------------------------------
// Running the entry points

/// The variables the entry scripts read, and those the engines set: none
/// leaks in from the environment the tests run in.
const SCRIPT_ENV: &[&str] = &[
    "TARGET",
    "RUNS",
    "STRATEGY",
    "TIME_BUDGET",
    "OUT",
    "HEDDLE",
    "JOBS",
    "SHARDS",
    "HEDDLE_FUZZ_ARGS",
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_CPUS_PER_TASK",
    "SLURM_JOB_ID",
];

/// `bash SCRIPT` (a repository path) in the repository, with `env` and the
/// heddle under test.
fn script<K: AsRef<OsStr>, V: AsRef<OsStr>>(rel: &str, env: &[(K, V)]) -> Command {
    let mut c = Command::new("bash");
    c.arg(repo().join(rel))
        .current_dir(repo())
        .stdin(Stdio::null());
    for k in SCRIPT_ENV {
        c.env_remove(k);
    }
    c.env("HEDDLE", env!("CARGO_BIN_EXE_heddle"));
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn run(mut c: Command, what: &str, code: i32) -> Output {
    let o = c.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(code),
        "{what}: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    o
}

/// Starts `c`, waits until heddle's campaign in `dir` has found a failure
/// (its first replay file is there; race_bank fails within its first few
/// seeds, far short of the runs of a shard in the tests below), then sends
/// `sig` to the script alone or to its whole process group (the script and
/// heddle, as a terminal's Ctrl-C or Slurm's scancel do), and returns the
/// output.
fn stop_once_started(mut c: Command, dir: &Path, sig: i32, group: bool) -> Output {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    if group {
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
    }
    let mut child = c.spawn().unwrap();
    let started = Instant::now();
    let found = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|d| {
            d.flatten().any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.contains("-seed") && name.ends_with(".toml")
            })
        })
    };
    while !found(dir) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before it started"
        );
        assert!(started.elapsed() < Duration::from_secs(120), "too slow");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = child.id() as i32;
    // SAFETY: kill(2) with a pid (or process group) this test started.
    let r = unsafe { libc::kill(if group { -pid } else { pid }, sig) };
    assert_eq!(r, 0);
    child.wait_with_output().unwrap()
}

fn summary_of(dir: &Path) -> toml::Value {
    toml::from_str(&read(&dir.join("campaign.toml"))).unwrap()
}

fn stat(v: &toml::Value, key: &str) -> i64 {
    v["stats"][key]
        .as_integer()
        .unwrap_or_else(|| panic!("stats.{key}"))
}

/// What two campaigns over the same seeds must agree on: the runs, the
/// failing runs, the distinct schedules, and each failure with its first
/// seed.
fn outcome(v: &toml::Value) -> (Vec<i64>, BTreeSet<(String, i64)>) {
    let stats = [
        "runs",
        "failing_runs",
        "distinct_failures",
        "distinct_schedules",
    ]
    .iter()
    .map(|k| stat(v, k))
    .collect();
    let failures = v
        .get("failure")
        .and_then(|f| f.as_array())
        .into_iter()
        .flatten()
        .map(|f| {
            (
                f["signature"].as_str().unwrap().to_string(),
                f["first_seed"].as_integer().unwrap(),
            )
        })
        .collect();
    (stats, failures)
}

/// The same campaign unsharded and uninterrupted, for comparison.
fn reference(dir: &Path, runs: &str, strategy: &str) -> toml::Value {
    let out = dir.join("reference");
    let o = heddle_out(&[
        "fuzz",
        "targets/race_bank.c",
        "--runs",
        runs,
        "--keep-going",
        "--strategy",
        strategy,
        "--jobs",
        "2",
        "--quiet",
        "--out",
        p(&out),
    ]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        text(&o.stderr)
    );
    summary_of(&out)
}

/// The `#SBATCH` options of a batch script, in order.
fn sbatch_options(rel: &str) -> BTreeMap<String, String> {
    repo_file(rel)
        .lines()
        .filter_map(|l| l.strip_prefix("#SBATCH "))
        .map(|o| {
            let (k, v) = o.trim().split_once('=').unwrap_or((o.trim(), ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// The task ids of `--array` (`0-7`, `1,3,5-6`; a `%limit` ignored).
fn array_ids(spec: &str) -> Vec<u64> {
    let spec = spec.split('%').next().unwrap();
    let mut v = Vec::new();
    for part in spec.split(',') {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<u64>().unwrap()..=b.parse().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

const SBATCH: &str = "deploy/slurm/heddle-array.sbatch";
const SBATCH_MERGE: &str = "deploy/slurm/merge.sbatch";

/// The Slurm array job run here, one task after the other, with the
/// variables Slurm sets for each task of its `--array` (the ids read from
/// the script's own #SBATCH line): every task succeeds although the
/// campaign finds failures (exit 1 becomes 0, so that the array is not
/// failed and the replays are kept), each writes its shard directory; the
/// merge job exits 1 and its summary has every run of the campaign, with
/// the outcome of the same campaign unsharded. A task started again
/// resumes its shard. The script asks Slurm for what it relies on:
/// requeueing, and SIGUSR1 before the time limit.
#[test]
fn slurm_array_job_runs_locally_then_merges() {
    toolchain();
    let opts = sbatch_options(SBATCH);
    for o in ["--cpus-per-task", "--time", "--requeue", "--array"] {
        assert!(opts.contains_key(o), "{SBATCH}: no #SBATCH {o}");
    }
    assert!(
        opts["--signal"].starts_with("B:USR1@"),
        "{SBATCH}: the time-limit warning goes to the script"
    );
    let ids = array_ids(&opts["--array"]);
    assert!(ids.len() >= 2);
    let dir = tempdir();
    let out = dir.path().join("results");
    let (runs, strategy) = ("400", "random,pct:3,pct:10,rr:0.2");
    let env = |id: u64| {
        vec![
            ("SLURM_ARRAY_TASK_ID", id.to_string()),
            ("SLURM_ARRAY_TASK_MIN", ids[0].to_string()),
            ("SLURM_ARRAY_TASK_COUNT", ids.len().to_string()),
            ("SLURM_CPUS_PER_TASK", "2".to_string()),
            ("SLURM_JOB_ID", format!("7{id}")),
            ("TARGET", "targets/race_bank.c".to_string()),
            ("RUNS", runs.to_string()),
            ("STRATEGY", strategy.to_string()),
            ("OUT", p(&out).to_string()),
        ]
    };
    for &id in &ids {
        run(script(SBATCH, &env(id)), &format!("task {id}"), 0);
        assert!(out.join(format!("shard-{id}/campaign.toml")).is_file());
    }
    let merged = out.join("merged");
    let o = run(
        script(SBATCH_MERGE, &[("OUT", p(&out).to_string())]),
        "merge",
        1,
    );
    assert!(text(&o.stdout).contains(&format!("merged {} directories", ids.len())));
    let v = summary_of(&merged);
    assert_eq!(stat(&v, "runs"), 400);
    assert_eq!(outcome(&v), outcome(&reference(dir.path(), runs, strategy)));

    let shard = out.join(format!("shard-{}", ids[0]));
    let before = stat(&summary_of(&shard), "runs");
    let o = run(script(SBATCH, &env(ids[0])), "the task again", 0);
    assert!(text(&o.stderr).contains(" --resume"), "{}", text(&o.stderr));
    assert_eq!(stat(&summary_of(&shard), "runs"), before);
}

/// Slurm's stops, here: SIGUSR1 to the script alone (the time-limit
/// warning of `--signal=B:USR1@…`) makes heddle save and the task exit 143
/// for its requeue, also when heddle found failures (whose exit code 1
/// would otherwise say "done"); SIGTERM to every process of the task (how
/// Slurm ends or preempts a job) lets heddle save too, not ended by a
/// second signal. Both tasks resume to the end when started again, and the
/// merge equals the same campaign run unsharded in one go.
#[test]
fn slurm_tasks_stop_save_and_resume() {
    toolchain();
    let dir = tempdir();
    let out = dir.path().join("results");
    let (runs, strategy) = ("20000", "random,pct:3");
    let env = |id: u64| {
        vec![
            ("SLURM_ARRAY_TASK_ID", id.to_string()),
            ("SLURM_ARRAY_TASK_MIN", "0".to_string()),
            ("SLURM_ARRAY_TASK_COUNT", "2".to_string()),
            ("SLURM_CPUS_PER_TASK", "2".to_string()),
            ("RUNS", runs.to_string()),
            ("STRATEGY", strategy.to_string()),
            ("OUT", p(&out).to_string()),
        ]
    };
    for (id, sig, group) in [(0, libc::SIGUSR1, false), (1, libc::SIGTERM, true)] {
        let shard = out.join(format!("shard-{id}"));
        let o = stop_once_started(script(SBATCH, &env(id)), &shard, sig, group);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(143), "task {id}: {err}");
        assert!(err.contains("stopped by SIGTERM"), "{err}");
        // Stopped with failures found: heddle's own exit code was 1.
        let v = summary_of(&shard);
        assert!(stat(&v, "failing_runs") > 0, "task {id}: no failure yet");
        let done = stat(&v, "runs");
        assert!(
            done < 20000,
            "task {id} ran {done} runs before it was stopped"
        );
    }
    for id in [0, 1] {
        let o = run(script(SBATCH, &env(id)), "resume", 0);
        assert!(text(&o.stderr).contains(" --resume"));
    }
    run(
        script(SBATCH_MERGE, &[("OUT", p(&out).to_string())]),
        "merge",
        1,
    );
    let v = summary_of(&out.join("merged"));
    assert_eq!(stat(&v, "runs"), 20000);
    assert_eq!(outcome(&v), outcome(&reference(dir.path(), runs, strategy)));
}

/// The environment of a Job's container as the manifest sets it, with
/// `over` replacing or adding values (a valueFrom variable must be given
/// here: no cluster fills it in).
fn manifest_env(job: &Value, over: &[(&str, String)]) -> Vec<(String, String)> {
    let mut m: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in k8s_env(k8s_container(job)) {
        if let Some(v) = v {
            m.insert(k, v);
        } else {
            assert!(
                over.iter().any(|(o, _)| *o == k),
                "{k} comes from the cluster"
            );
        }
    }
    for (k, v) in over {
        m.insert(k.to_string(), v.clone());
    }
    m.into_iter().collect()
}

/// The Indexed Job run here, pod by pod: the script the manifest's
/// container runs, with the manifest's own variables (SHARDS, TARGET,
/// STRATEGY), JOB_COMPLETION_INDEX as Kubernetes sets it for each of the
/// `completions`, OUT a temporary volume and few RUNS; the fixed target,
/// so the shards and the merge Job exit 0. A pod started again resumes.
#[test]
fn kubernetes_indexed_job_runs_locally_then_merges() {
    toolchain();
    let docs = k8s_docs();
    let job = k8s_job(&docs, "heddle-fuzz");
    let merge_job = k8s_job(&docs, "heddle-merge");
    let completions = job["spec"]["completions"].as_u64().unwrap();
    let dir = tempdir();
    let out = dir.path().join("results");
    let runs = "400";
    let env = manifest_env(
        job,
        &[
            ("RUNS", runs.to_string()),
            ("OUT", p(&out).to_string()),
            ("JOBS", "2".to_string()),
            ("HEDDLE_FUZZ_ARGS", "--fixed".to_string()),
        ],
    );
    let shard_script = k8s_script(job);
    for index in 0..completions {
        let mut e = env.clone();
        e.push(("JOB_COMPLETION_INDEX".to_string(), index.to_string()));
        run(script(&shard_script, &e), &format!("pod {index}"), 0);
        assert!(out.join(format!("shard-{index}/campaign.toml")).is_file());
    }
    let merge_env = manifest_env(merge_job, &[("OUT", p(&out).to_string())]);
    let o = run(script(&k8s_script(merge_job), &merge_env), "merge", 0);
    assert!(text(&o.stdout).contains(&format!("merged {completions} directories")));
    let v = summary_of(&out.join("merged"));
    assert_eq!(stat(&v, "runs"), 400);
    assert_eq!(stat(&v, "failing_runs"), 0);

    let mut e = env.clone();
    e.push(("JOB_COMPLETION_INDEX".to_string(), "0".to_string()));
    let o = run(script(&shard_script, &e), "the pod again", 0);
    assert!(text(&o.stderr).contains(" --resume"), "{}", text(&o.stderr));
}

/// A pod stopped as Kubernetes stops one (SIGTERM to the container's first
/// process, the script, alone): heddle saves the shard and the pod exits
/// 143, also when heddle found failures, so that the Job retries the index
/// rather than count it done; the retried pod resumes the shard to its
/// end, and the merge equals the same campaign run unsharded in one go.
#[test]
fn kubernetes_pod_stops_saves_and_resumes() {
    toolchain();
    let docs = k8s_docs();
    let job = k8s_job(&docs, "heddle-fuzz");
    let shard_script = k8s_script(job);
    let dir = tempdir();
    let out = dir.path().join("results");
    let (runs, strategy) = ("20000", "random,pct:3");
    let env = |index: u64| {
        manifest_env(
            job,
            &[
                ("SHARDS", "2".to_string()),
                ("RUNS", runs.to_string()),
                ("STRATEGY", strategy.to_string()),
                ("OUT", p(&out).to_string()),
                ("JOBS", "2".to_string()),
                ("JOB_COMPLETION_INDEX", index.to_string()),
            ],
        )
    };
    let shard = out.join("shard-0");
    let o = stop_once_started(script(&shard_script, &env(0)), &shard, libc::SIGTERM, false);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(err.contains("stopped by SIGTERM"), "{err}");
    // Stopped with failures found: heddle's own exit code was 1.
    let v = summary_of(&shard);
    assert!(stat(&v, "failing_runs") > 0, "no failure yet");
    assert!(stat(&v, "runs") < 20000);
    run(script(&shard_script, &env(1)), "pod 1", 0);
    let o = run(script(&shard_script, &env(0)), "pod 0 again", 0);
    assert!(text(&o.stderr).contains(" --resume"));
    let merge_job = k8s_job(&docs, "heddle-merge");
    run(
        script(
            &k8s_script(merge_job),
            &manifest_env(merge_job, &[("OUT", p(&out).to_string())]),
        ),
        "merge",
        1,
    );
    let v = summary_of(&out.join("merged"));
    assert_eq!(stat(&v, "runs"), 20000);
    assert_eq!(outcome(&v), outcome(&reference(dir.path(), runs, strategy)));
}

/// The entry scripts pass shellcheck.
#[test]
fn deploy_scripts_pass_shellcheck() {
    check_with(
        "shellcheck",
        &[
            "--shell=bash",
            "deploy/kubernetes/shard.sh",
            "deploy/kubernetes/merge.sh",
            SBATCH,
            SBATCH_MERGE,
            "scripts/manifest-tools.sh",
        ],
    );
}

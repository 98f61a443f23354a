//! Tests: `heddle explore` — exhaustive and bounded search, user
//! interleavings, outcome histograms, replay files, DPOR.

use crate::common::*;
use heddle::explore::{self, Bound, Expect, Options, Preempt, Reduction, Report};
use heddle::instrument::Granularity;
use heddle::runtime::{RaceMode, RunConfig};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

fn opts(bound: Bound, reduction: Reduction) -> Options {
    Options {
        bound,
        reduction,
        max_schedules: None,
        observe: vec!["x".into()],
        observe_output: false,
        expect: None,
        preempt: Preempt::User,
    }
}

fn explore_target(source: &str, fixed: bool, args: &[&str], o: &Options) -> Report {
    let p = program(source, fixed, Granularity::All);
    let base = RunConfig {
        args: args.iter().map(|s| s.to_string()).collect(),
        races: RaceMode::Off,
        ..RunConfig::default()
    };
    explore::explore(&p, &base, o, &AtomicBool::new(false), &mut |_| {}).expect("explore")
}

/// Final x → user interleavings, from an exploration's histogram.
fn histogram(r: &Report) -> BTreeMap<i64, u64> {
    let mut h = BTreeMap::new();
    for (k, s) in &r.outcomes {
        let x: i64 = k
            .observed
            .iter()
            .find(|(n, _)| n == "x")
            .map(|(_, v)| v.parse().expect("x value"))
            .expect("x observed");
        *h.entry(x).or_insert(0) += s.interleavings;
    }
    h
}

/// An independent enumeration: every interleaving of the threads' load/store
/// sequences (thread i does k_i times `t = x; x = t + 1`), and the final x
/// of each.
fn enumerate(ks: &[u32]) -> (u64, BTreeMap<i64, u64>) {
    fn rec(
        left: &mut Vec<u32>,
        temp: &mut Vec<i64>,
        x: i64,
        hist: &mut BTreeMap<i64, u64>,
        count: &mut u64,
    ) {
        if left.iter().all(|&l| l == 0) {
            *count += 1;
            *hist.entry(x).or_insert(0) += 1;
            return;
        }
        for t in 0..left.len() {
            if left[t] == 0 {
                continue;
            }
            // Even remaining = next is a load, odd = a store.
            let load = left[t].is_multiple_of(2);
            left[t] -= 1;
            if load {
                let old = temp[t];
                temp[t] = x;
                rec(left, temp, x, hist, count);
                temp[t] = old;
            } else {
                let v = temp[t] + 1;
                rec(left, temp, v, hist, count);
            }
            left[t] += 1;
        }
    }
    let mut left: Vec<u32> = ks.iter().map(|k| 2 * k).collect();
    let mut temp = vec![0i64; ks.len()];
    let mut hist = BTreeMap::new();
    let mut count = 0;
    rec(&mut left, &mut temp, 0, &mut hist, &mut count);
    (count, hist)
}

fn multinomial(ks: &[u32]) -> u64 {
    let fact = |n: u64| (1..=n).product::<u64>().max(1);
    let total: u64 = ks.iter().map(|&k| 2 * k as u64).sum();
    ks.iter()
        .fold(fact(total), |acc, &k| acc / fact(2 * k as u64))
}

#[test]
fn explore_counter_spy_counts_user_interleavings() {
    // The numbers: k = (2, 3) → 210, k = (1, 1) → 6.
    let r = explore_target(
        "counter_spy.c",
        false,
        &["2", "3"],
        &opts(Bound::Unbounded, Reduction::Dpor),
    );
    assert!(r.complete, "exploration did not finish");
    assert_eq!(r.user_interleavings, 210);
    assert_eq!(
        histogram(&r),
        BTreeMap::from([(5, 10), (4, 70), (3, 104), (2, 26)])
    );
    assert!(r.schedules > 210, "raw schedules include library decisions");
    let f = r.first_failure.as_ref().expect("a failing schedule");
    assert_eq!(f.result.verdict.kind(), "assertion");
    assert!(f.interleaving.len() >= 10);

    let o = opts(Bound::Unbounded, Reduction::Dpor);
    let r = explore_target("counter_spy.c", false, &["1", "1"], &o);
    assert_eq!(r.user_interleavings, 6);
    assert_eq!(histogram(&r), BTreeMap::from([(2, 2), (1, 4)]));
}

#[test]
fn explore_user_count_is_the_multinomial_coefficient() {
    for ks in [vec![1u32, 2], vec![2, 2], vec![1, 1, 1]] {
        let args: Vec<String> = ks.iter().map(|k| k.to_string()).collect();
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let r = explore_target(
            "counter_spy.c",
            false,
            &args,
            &opts(Bound::Unbounded, Reduction::Dpor),
        );
        let (count, hist) = enumerate(&ks);
        assert_eq!(count, multinomial(&ks), "{ks:?}");
        assert!(r.complete, "{ks:?}");
        assert_eq!(r.user_interleavings, count, "{ks:?}");
        assert_eq!(histogram(&r), hist, "{ks:?}");
    }
}

#[test]
fn explore_dpor_finds_the_same_outcomes_with_fewer_schedules() {
    let none = explore_target(
        "counter_spy.c",
        false,
        &["1", "1"],
        &opts(Bound::Unbounded, Reduction::None),
    );
    let dpor = explore_target(
        "counter_spy.c",
        false,
        &["1", "1"],
        &opts(Bound::Unbounded, Reduction::Dpor),
    );
    assert!(none.complete && dpor.complete);
    let keys = |r: &Report| r.outcomes.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&none), keys(&dpor));
    assert_eq!(none.user_interleavings, dpor.user_interleavings);
    assert_eq!(histogram(&none), histogram(&dpor));
    assert!(
        dpor.schedules * 5 < none.schedules,
        "dpor {} vs none {}",
        dpor.schedules,
        none.schedules
    );
}

#[test]
fn explore_bound_one_finds_deadlock_and_lost_update() {
    let mut o = opts(Bound::Preemptions(1), Reduction::None);
    o.observe.clear();
    let r = explore_target("deadlock_abba.c", false, &[], &o);
    let f = r.first_failure.expect("deadlock found");
    assert_eq!(f.result.verdict.kind(), "deadlock");
    let r = explore_target("deadlock_abba.c", true, &[], &o);
    assert!(r.complete && r.failing == 0 && !r.exhaustive(&o));

    let r = explore_target("race_bank.c", false, &["2", "2"], &o);
    assert_eq!(
        r.first_failure.expect("lost update").result.verdict.kind(),
        "assertion"
    );
    let r = explore_target("race_bank.c", true, &["2", "2"], &o);
    assert!(r.complete && r.failing == 0);
}

/// With no `--bound` the explorer uses DPOR: `counter_spy 3 3` (924 user
/// interleavings) finishes as an exhaustive search; with a bound the
/// default stays `none`.
#[test]
fn explore_defaults_to_dpor_without_a_bound() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let o = heddle_out(&[
        "explore",
        "targets/counter_spy.c",
        "--observe",
        "x",
        "--out",
        out,
        "--",
        "3",
        "3",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains("(reduction dpor)"), "{stdout}");
    assert!(stdout.contains("924 user interleavings"), "{stdout}");
    assert!(stdout.contains("exhaustive:"), "{stdout}");
    let o = heddle_out(&[
        "explore",
        "targets/counter_spy.c",
        "--fixed",
        "--bound",
        "preemptions=1",
        "--out",
        out,
        "--",
        "1",
        "1",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}{}", text(&o.stderr));
    assert!(!stdout.contains("reduction dpor"), "{stdout}");
}

#[test]
fn explore_cli_histogram_replay_file_and_proof() {
    let dir = tempdir();
    let out = dir.path().to_str().unwrap();
    let o = heddle_out(&[
        "explore",
        "targets/counter_spy.c",
        "--reduction",
        "dpor",
        "--observe",
        "x",
        "--out",
        out,
        "--",
        "1",
        "1",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    assert!(stdout.contains("6 user interleavings"), "{stdout}");
    assert!(stdout.contains("x=1  assertion@"), "{stdout}");
    assert!(stdout.contains("user interleaving:"), "{stdout}");
    let replay = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: heddle replay "))
        .expect("replay line")
        .to_string();
    let o = heddle_out(&["replay", &replay]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("replay reproduced"));

    // The fixed build: no failure, no bound, no cap → a proof.
    let o = heddle_out(&[
        "explore",
        "targets/counter_spy.c",
        "--fixed",
        "--reduction",
        "dpor",
        "--observe",
        "x",
        "--expect",
        "x == 2",
        "--",
        "1",
        "1",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("a proof for this input"), "{stdout}");

    // --expect fails schedules whose verdict passes.
    let o = heddle_out(&[
        "explore",
        "targets/counter_spy.c",
        "--fixed",
        "--bound",
        "preemptions=1",
        "--expect",
        "x >= 3",
        "--out",
        out,
        "--",
        "1",
        "1",
    ]);
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("--expect `x >= 3` does not hold"),
        "{stdout}"
    );
    assert!(stdout.contains("within bound preemptions=1"), "{stdout}");
}

#[test]
fn explore_rejects_bad_input() {
    for (args, needle) in [
        (vec!["--bound", "preemptions"], "bad bound"),
        (
            vec!["--bound", "preemptions=1", "--reduction", "dpor"],
            "cannot be combined with --bound (bounded DPOR would not explore every bounded schedule): \
             drop --bound to explore every schedule with DPOR, or drop --reduction",
        ),
        (vec!["--reduction", "magic"], "unknown reduction"),
        (vec!["--observe", "nosuchvar"], "unknown variable"),
        (vec!["--expect", "x ~ 3"], "bad --expect"),
        (vec!["--runs", "0"], "at least 1"),
        (vec!["--preempt", "sometimes"], "unknown preemption points"),
        (vec!["--strategy", "pos"], "--strategy does not apply (drop it;"),
    ] {
        let mut a = vec!["explore", "targets/counter_spy.c"];
        a.extend(args);
        assert_usage_error(&heddle_out(&a), needle);
    }
    assert!(Expect::parse("x == 1 && exit == 0").is_ok());
}

#[test]
fn explore_dpor_agrees_with_none_on_a_spin_loop_and_proves_fixed_variants() {
    let mut o = opts(Bound::Unbounded, Reduction::None);
    o.observe.clear();
    let none = explore_target("spin_barrier.c", false, &[], &o);
    o.reduction = Reduction::Dpor;
    let dpor = explore_target("spin_barrier.c", false, &[], &o);
    assert!(none.complete && dpor.complete);
    let keys = |r: &Report| r.outcomes.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&none), keys(&dpor));
    assert!(dpor.schedules * 5 < none.schedules);
    assert!(dpor.exhaustive(&o) && dpor.failing == 0);

    // Without a bound, DPOR finds the deadlock and proves the fixed build.
    let r = explore_target("deadlock_abba.c", false, &[], &o);
    assert!(r.complete);
    assert_eq!(
        r.first_failure.expect("deadlock").result.verdict.kind(),
        "deadlock"
    );
    let r = explore_target("deadlock_abba.c", true, &[], &o);
    assert!(r.exhaustive(&o) && r.failing == 0, "{} failing", r.failing);
    // And proves race_bank's fixed build at the size (2×2).
    let r = explore_target("race_bank.c", true, &["2", "2"], &o);
    assert!(r.exhaustive(&o) && r.failing == 0, "{} failing", r.failing);
}

#[test]
fn explore_ctrl_c_prints_the_partial_histogram() {
    let child = heddle()
        .args([
            "explore",
            "targets/race_bank.c",
            "--reduction",
            "dpor",
            "--out",
            tempdir().path().to_str().unwrap(),
            "--",
            "4",
            "25",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn heddle");
    // Interrupt once the search has started (it says so when Ctrl-C is
    // handled), not after a guessed delay.
    let mut child = child;
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut reader, &mut first).unwrap();
    assert!(first.starts_with("exploring "), "{first}");
    // SAFETY: signalling a child process this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let mut stdout = first;
    std::io::Read::read_to_string(&mut reader, &mut stdout).unwrap();
    let out = child.wait_with_output().expect("wait");
    assert!(stdout.contains("interrupted: partial results"), "{stdout}");
    assert!(stdout.contains("outcomes:"), "{stdout}");
    assert!(!text(&out.stderr).contains("panicked"));
}

/// How the reference search without reduction is run for one target.
#[derive(Clone, Copy)]
enum Reference {
    /// Every schedule (the search finishes).
    Exhaustive,
    /// Every schedule with at most 2 preemptions: the unbounded search does
    /// not finish here (over 2,000,000 schedules), so DPOR's complete
    /// outcome set is compared with the bounded one. DPOR explores only
    /// real schedules, so equality means DPOR misses nothing the bounded
    /// search finds and finds nothing that is not an outcome.
    Preemptions2,
}

/// DPOR against no reduction on every bundled target, buggy and fixed where
/// the fixed variant is not proved elsewhere (small arguments where the
/// target takes them): the same outcome set (verdict signature, exit code,
/// failing or not), far fewer schedules. Prints the schedule counts.
#[test]
fn explore_dpor_matches_none_on_the_bundled_targets() {
    use Reference::*;
    let cases: &[(&str, bool, &[&str], Reference)] = &[
        // The longest first, so that the two workers finish together.
        ("uaf_publish.c", false, &[], Preemptions2),
        ("uaf_publish.c", true, &[], Preemptions2),
        ("aba_stack.c", false, &["2", "2"], Preemptions2),
        ("aba_stack.c", true, &["2", "2"], Preemptions2),
        ("counter_spy.c", false, &["1", "1"], Exhaustive),
        ("counter_spy.c", true, &["1", "1"], Exhaustive),
        ("spin_barrier.c", false, &[], Exhaustive),
        ("timed_wait.c", false, &[], Exhaustive),
        ("lost_wakeup.c", false, &[], Exhaustive),
        ("racy_counter.c", false, &["1"], Exhaustive),
        ("race_bank.c", false, &["2", "1"], Preemptions2),
        ("race_bank.c", true, &["2", "1"], Preemptions2),
        ("deadlock_abba.c", false, &[], Preemptions2),
        ("deadlock_abba.c", true, &[], Preemptions2),
        ("codeblock.cpp", false, &[], Preemptions2),
    ];
    let rows = par_map(cases, |&(source, fixed, args, reference)| {
        let mut o = opts(Bound::Unbounded, Reduction::Dpor);
        o.observe.clear();
        let dpor = explore_target(source, fixed, args, &o);
        o.reduction = Reduction::None;
        if let Preemptions2 = reference {
            o.bound = Bound::Preemptions(2);
        }
        let none = explore_target(source, fixed, args, &o);
        let what = format!("{source} {args:?} fixed={fixed}");
        assert!(dpor.complete, "{what}: DPOR did not finish");
        assert!(none.complete, "{what}: the reference did not finish");
        let keys = |r: &Report| r.outcomes.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&dpor), keys(&none), "{what}: outcome sets differ");
        assert!(
            matches!(reference, Preemptions2)
                || (dpor.schedules < none.schedules
                    && (none.schedules < 100 || dpor.schedules * 5 < none.schedules)),
            "{what}: DPOR ran {} schedules, the reference {}",
            dpor.schedules,
            none.schedules
        );
        format!(
            "{what}: dpor {} schedules, none {} ({}), {} outcomes",
            dpor.schedules,
            none.schedules,
            match reference {
                Exhaustive => "exhaustive",
                Preemptions2 => "preemptions=2",
            },
            dpor.outcomes.len()
        )
    });
    eprintln!("{}", rows.join("\n"));
}

/// An allocator call writes its block for DPOR's dependency relation: the
/// producer's free and the consumer's read of the buffer are explored in
/// both orders, so DPOR finds uaf_publish's use after free (with the free
/// taken as independent of the read it explored 42,648 schedules and found
/// none).
#[test]
fn explore_dpor_orders_frees_against_accesses_to_the_block() {
    let mut o = opts(Bound::Unbounded, Reduction::Dpor);
    o.observe.clear();
    o.max_schedules = Some(400);
    let r = explore_target("uaf_publish.c", false, &[], &o);
    let f = r
        .first_failure
        .expect("a use after free within 400 schedules");
    assert_eq!(f.result.verdict.kind(), "use-after-free", "{}", f.reason);
}

/// DPOR under `--preempt all`, where value decisions (`heddle_choose`
/// right before each thread's unlocked increment) sit on the path and a new
/// schedule can start right after one: the search runs, keeps its sleep
/// sets across them and finds the lost update.
#[test]
fn explore_dpor_preempting_everywhere_crosses_value_decisions() {
    let bytes = std::fs::read(build("tests/programs/choose_race.c", &[])).unwrap();
    let p = heddle::runtime::Program::new(&bytes, &heddle::instrument::Config::default())
        .expect("program");
    let mut o = opts(Bound::Unbounded, Reduction::Dpor);
    o.observe.clear();
    o.preempt = Preempt::All;
    o.max_schedules = Some(600);
    let base = RunConfig {
        races: RaceMode::Off,
        ..RunConfig::default()
    };
    let r = explore::explore(&p, &base, &o, &AtomicBool::new(false), &mut |_| {}).expect("explore");
    assert_eq!(r.schedules, 600);
    let f = r
        .first_failure
        .expect("the lost update within 600 schedules");
    assert!(
        f.result
            .decisions
            .iter()
            .any(|d| matches!(d, heddle::trace::Decision::Value { .. })),
        "no value decision on the failing schedule"
    );
    assert_eq!(f.result.verdict.kind(), "assertion", "{}", f.reason);
}

//! Pipes and socket pairs: channels inside the run (`runtime::pipes`).

use crate::common::*;

/// Builds tests/programs/`name` into `dir`.
fn build(name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let wasm = dir.join(name.replace(".c", ".wasm"));
    let out = heddle_out(&["cc", &prog(name), "-o", path_str(&wasm)]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    wasm
}

#[test]
fn pipes_and_socket_pairs_behave_as_on_linux_with_no_race_across_the_pipe() {
    let dir = tempdir();
    let wasm = build("pipe_corners.c", dir.path());
    let out = heddle_out(&["run", path_str(&wasm), "--races", "fail"]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    assert!(
        text(&out.stdout).contains("pipe corners: ok"),
        "{}",
        all_output(&out)
    );
    fuzz_expecting(&[path_str(&wasm), "--races", "fail", "--runs", "200"], 0);
}

#[test]
fn a_wake_up_lost_before_poll_is_a_deadlock_found_and_replayed() {
    let dir = tempdir();
    let wasm = build("pipe_pump.c", dir.path());
    let mut replays = Vec::new();
    for _ in 0..2 {
        // One job: the first failure is the same seed on any machine.
        let (_camp, stdout) = fuzz_expecting(&[path_str(&wasm), "--runs", "300", "-j", "1"], 1);
        assert!(
            stdout.contains("deadlock")
                && stdout.contains("for pipe fd 3 to read, pipe fd 5 to read"),
            "{stdout}"
        );
        let replay = printed_replay(&stdout);
        replays_the_same_twice(&replay, "for pipe fd 3 to read");
        replays.push(std::fs::read(&replay).unwrap());
    }
    assert_eq!(
        replays[0], replays[1],
        "the same campaign writes the same replay"
    );
    // Writing to the wake-up pipe every time is the fix.
    fuzz_expecting(
        &[path_str(&wasm), "--runs", "30", "-j", "2", "--", "fixed"],
        0,
    );
}

#[test]
fn explore_orders_a_pipe_handoff_and_finds_the_update_after_it() {
    let dir = tempdir();
    let wasm = build("pipe_handoff.c", dir.path());
    let out = heddle_out(&["explore", path_str(&wasm)]);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    assert!(
        text(&out.stdout).contains("no schedule fails"),
        "{}",
        all_output(&out)
    );
    let out = heddle_out(&["explore", path_str(&wasm), "--", "late"]);
    assert_eq!(out.status.code(), Some(1), "{}", all_output(&out));
    assert!(
        text(&out.stdout).contains("total == 11"),
        "{}",
        all_output(&out)
    );
}

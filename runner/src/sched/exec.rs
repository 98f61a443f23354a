//! `exec:PROGRAM` — a strategy in another process, in any language.
//!
//! heddle starts `PROGRAM` (split at whitespace into the program and its
//! arguments, resolved like a shell command, relative paths against the
//! working directory) and talks to it in line-delimited JSON: one object per
//! line on the program's stdin, one reply per line on its stdout. Messages,
//! in order:
//!
//! ```text
//! → {"type":"hello","protocol":1}                      once per process, no reply
//! → {"type":"reset","seed":17}                          a run starts, no reply
//! → {"type":"spawn","tid":1}                            a thread was created, no reply
//! → {"type":"thread","decision":0,"current":0,
//!    "candidates":[{"tid":0,"site":24,"kind":"read","addr":1040,"len":4,"spinning":false},
//!                  {"tid":1,"site":31,"kind":"start","addr":0,"len":0,"spinning":false}]}
//! ← {"tid":1}                                           one of the candidates' tids
//! → {"type":"value","tid":1,"n":3}                      a value choice (notify, heddle_choose)
//! ← {"value":2}                                         in [0, n)
//! ```
//!
//! `current` is the thread that reached the yield point, or `null` when it
//! blocked or ended; `decision` counts thread decisions in the run;
//! candidates come in ascending tid order, with the event each is about to
//! perform (`kind` is one of heddle's event kinds in kebab case: `read`,
//! `write`, `rmw`, `cmpxchg`, `wait`, `notify`, `lock`, `unlock`, `start`,
//! `exit`, …). A process serves many runs, one after the other: everything
//! it decides must follow from the seed and the messages since the last
//! `reset` — then the strategy is deterministic and every run reproducible.
//! The process is started only when a run first needs a decision from it, so
//! `heddle replay` of a recorded run never starts it.
//!
//! A program that cannot be started, exits, stays silent for
//! [`REPLY_TIMEOUT`] (`HEDDLE_EXEC_TIMEOUT_MS` overrides it) or replies with anything but the expected JSON makes the
//! run fail with a one-line error naming the decision and the reply.

use super::{Choice, Strategy};
use crate::model::Tid;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long heddle waits for one reply, unless `HEDDLE_EXEC_TIMEOUT_MS`
/// says otherwise.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// [`REPLY_TIMEOUT`], or `HEDDLE_EXEC_TIMEOUT_MS` milliseconds when set.
pub fn reply_timeout() -> Duration {
    std::env::var("HEDDLE_EXEC_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .unwrap_or(REPLY_TIMEOUT)
}

/// A running strategy process.
struct Proc {
    child: Child,
    /// Lines for the program's stdin, written by a thread of their own so
    /// that a program that stops reading cannot block a run.
    stdin: Sender<String>,
    lines: Receiver<Option<String>>,
    /// The last lines the program wrote to stderr (for error messages).
    stderr: Arc<Mutex<Vec<String>>>,
    /// Signalled when the program's stderr reaches its end.
    stderr_closed: Receiver<()>,
}

impl Proc {
    fn start(command: &str) -> Result<Proc, String> {
        let mut words = command.split_whitespace();
        let program = words.next().unwrap_or_default();
        let mut child = Command::new(program)
            .args(words)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start `{program}`: {e}"))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("cannot talk to `{program}`"));
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(Some(l)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send(None);
        });
        let (to_child, outgoing) = mpsc::channel::<String>();
        std::thread::spawn(move || write_lines(stdin, outgoing));
        let err_lines = Arc::new(Mutex::new(Vec::new()));
        let sink = err_lines.clone();
        let (stderr_done, stderr_closed) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                let mut v = sink.lock().unwrap_or_else(|e| e.into_inner());
                if v.len() >= 8 {
                    v.remove(0);
                }
                v.push(line);
            }
            let _ = stderr_done.send(());
        });
        let mut p = Proc {
            child,
            stdin: to_child,
            lines,
            stderr: err_lines,
            stderr_closed,
        };
        p.send(&json!({"type": "hello", "protocol": 1}))?;
        Ok(p)
    }

    fn send(&mut self, msg: &Value) -> Result<(), String> {
        self.stdin
            .send(msg.to_string())
            .map_err(|_| self.died("stopped reading its input"))
    }

    fn receive(&mut self) -> Result<String, String> {
        let timeout = reply_timeout();
        match self.lines.recv_timeout(timeout) {
            Ok(Some(line)) => Ok(line),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => Err(self.died("closed its output")),
            Err(RecvTimeoutError::Timeout) => {
                Err(format!("gave no reply within {} ms", timeout.as_millis()))
            }
        }
    }

    /// Describes how the program ended (`what` if it is still running),
    /// with its last stderr line.
    fn died(&mut self, what: &str) -> String {
        // Give the stderr reader a moment to collect the last words.
        let status = (0..50)
            .find_map(|_| match self.child.try_wait() {
                Ok(Some(s)) => Some(Some(s)),
                Ok(None) => {
                    std::thread::sleep(Duration::from_millis(10));
                    None
                }
                Err(_) => Some(None),
            })
            .flatten();
        if status.is_some() {
            // Its last words may still be in the pipe.
            let _ = self.stderr_closed.recv_timeout(Duration::from_millis(500));
        }
        let last = self
            .stderr
            .lock()
            .map(|v| v.last().cloned())
            .unwrap_or_default();
        let mut s = match status {
            Some(st) => format!("exited ({st})"),
            None => what.to_string(),
        };
        if let Some(l) = last {
            s.push_str(&format!(": {}", l.trim()));
        }
        s
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `lines` to a program's stdin until either side hangs up.
fn write_lines(mut stdin: ChildStdin, lines: Receiver<String>) {
    // A program that exits closes its end of the pipe: the next write must
    // fail with EPIPE, not kill heddle (whose SIGPIPE disposition is the
    // default, for `heddle … | head`). SIGPIPE is thread-directed, so
    // blocking it in this thread alone is enough.
    // SAFETY: plain signal-mask calls on a zeroed, initialised sigset_t.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    for line in lines {
        if writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .is_err()
        {
            return;
        }
    }
}

/// Idle strategy processes by command, so that consecutive runs (a fuzz
/// campaign) reuse one process instead of starting one per run.
static POOL: Mutex<BTreeMap<String, Vec<Proc>>> = Mutex::new(BTreeMap::new());

/// The `exec:` strategy.
pub struct Exec {
    command: String,
    proc: Option<Proc>,
    /// Messages for the process that were due before it was started.
    queued: Vec<Value>,
    failure: Option<String>,
}

impl Exec {
    /// A strategy served by `command` (started on first use).
    pub fn new(command: &str) -> Exec {
        Exec {
            command: command.trim().to_string(),
            proc: None,
            queued: Vec::new(),
            failure: None,
        }
    }

    fn fail(&mut self, what: String) {
        if self.failure.is_none() {
            self.failure = Some(format!("external strategy `{}` {what}", self.spec()));
        }
        if let Some(p) = self.proc.take() {
            p.kill();
        }
    }

    /// Sends `msg` (starting the process if needed) and returns its reply.
    fn ask(&mut self, msg: Value) -> Option<Value> {
        if self.failure.is_some() {
            return None;
        }
        if self.proc.is_none() {
            let pooled = POOL
                .lock()
                .ok()
                .and_then(|mut p| p.get_mut(&self.command).and_then(|v| v.pop()));
            let p = match pooled {
                Some(p) => p,
                None => match Proc::start(&self.command) {
                    Ok(p) => p,
                    Err(e) => {
                        self.fail(e);
                        return None;
                    }
                },
            };
            self.proc = Some(p);
            for m in std::mem::take(&mut self.queued) {
                if let Err(e) = self.proc.as_mut()?.send(&m) {
                    self.fail(e);
                    return None;
                }
            }
        }
        let p = self.proc.as_mut()?;
        let line = match p.send(&msg).and_then(|_| p.receive()) {
            Ok(l) => l,
            Err(e) => {
                let what = format!("{e} (at {})", describe(&msg));
                self.fail(what);
                return None;
            }
        };
        match serde_json::from_str::<Value>(&line) {
            Ok(v) => Some(v),
            Err(_) => {
                let what = format!(
                    "sent a line that is not JSON at {}: `{}`",
                    describe(&msg),
                    clip(&line)
                );
                self.fail(what);
                None
            }
        }
    }

    /// Queues a message that needs no reply.
    fn tell(&mut self, msg: Value) {
        if self.failure.is_some() {
            return;
        }
        match &mut self.proc {
            Some(p) => {
                if let Err(e) = p.send(&msg) {
                    self.fail(e);
                }
            }
            None => self.queued.push(msg),
        }
    }
}

fn describe(msg: &Value) -> String {
    match msg["type"].as_str() {
        Some("thread") => format!("thread decision {}", msg["decision"]),
        Some("value") => format!("value choice of thread {}", msg["tid"]),
        _ => "a message".into(),
    }
}

fn clip(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s.to_string()
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        if let Some(p) = self.proc.take() {
            if self.failure.is_none() {
                if let Ok(mut pool) = POOL.lock() {
                    pool.entry(self.command.clone()).or_default().push(p);
                    return;
                }
            }
            p.kill();
        }
    }
}

impl Strategy for Exec {
    fn spec(&self) -> String {
        format!("exec:{}", self.command)
    }

    fn reset(&mut self, seed: u64) {
        self.queued.clear();
        self.failure = None;
        self.tell(json!({"type": "reset", "seed": seed}));
    }

    fn on_spawn(&mut self, tid: Tid) {
        self.tell(json!({"type": "spawn", "tid": tid}));
    }

    fn pick_thread(&mut self, choice: &Choice) -> usize {
        let cands: Vec<Value> = choice
            .candidates
            .iter()
            .map(|c| {
                json!({
                    "tid": c.tid,
                    "site": c.pending.site,
                    "kind": c.pending.kind,
                    "addr": c.pending.addr,
                    "len": c.pending.len,
                    "spinning": c.spinning,
                })
            })
            .collect();
        let msg = json!({
            "type": "thread",
            "decision": choice.decision,
            "current": choice.current,
            "candidates": cands,
        });
        let reply = self.ask(msg);
        if let Some(r) = reply {
            let pick = r["tid"]
                .as_u64()
                .and_then(|t| choice.candidates.iter().position(|c| c.tid as u64 == t));
            match pick {
                Some(i) => return i,
                None => {
                    let tids: Vec<String> = choice
                        .candidates
                        .iter()
                        .map(|c| c.tid.to_string())
                        .collect();
                    self.fail(format!(
                        "gave a bad reply to thread decision {}: `{}` (expected {{\"tid\": N}} with N one of {})",
                        choice.decision,
                        clip(&r.to_string()),
                        tids.join(", ")
                    ));
                }
            }
        }
        // The run is reported as an error (see `failure`); finish it
        // quickly and deterministically: round-robin always makes progress.
        match choice.current {
            Some(cur) => choice
                .candidates
                .iter()
                .position(|c| c.tid > cur)
                .unwrap_or(0),
            None => 0,
        }
    }

    fn pick_value(&mut self, tid: Tid, n: u32) -> u32 {
        let reply = self.ask(json!({"type": "value", "tid": tid, "n": n}));
        if let Some(r) = reply {
            match r["value"].as_u64() {
                Some(v) if v < n as u64 => return v as u32,
                _ => self.fail(format!(
                    "gave a bad reply to a value choice of thread {tid}: `{}` (expected {{\"value\": V}} with V in [0, {n}))",
                    clip(&r.to_string())
                )),
            }
        }
        0
    }

    fn failure(&self) -> Option<String> {
        self.failure.clone()
    }
}

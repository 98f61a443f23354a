//! What a guest thread switch costs in wasmtime, two ways, in one process:
//!
//! - **host-call fiber**: heddle's way. Each guest thread is a wasm call
//!   on its own fiber (`call_async`); a switch is an async host call whose
//!   future is pending, which suspends the fiber back to the executor, and
//!   the executor polls the next thread's future, which resumes its fiber.
//! - **continuation**: the stack-switching proposal. Each guest thread is
//!   a continuation of one instance; a switch is a `suspend` to a
//!   dispatcher loop in wasm and a `resume` of the next continuation.
//!
//! Both loops do the same guest work per switch (a counter in a global, an
//! atomic add on shared memory, one synchronous host call), so the
//! difference is the switch. Also measured: starting and finishing a
//! thread (a fresh `call_async` on a kept instance against `cont.new` and
//! one `resume`, and against one kept continuation that runs thread after
//! thread). wasmtime 46 maps a new stack for every `cont.new` and
//! frees none before its store is dropped (about 100,000 of them crash the
//! process), so each round makes a new store for the continuations and
//! starts at most 10,000 threads. Prints one line per round and the ratios.
//!
//! Usage: heddle-switch-cost [switches per round] [rounds]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;
use wasmtime::*;

/// Two continuations taking turns `n` times (`switches`), `n`
/// continuations that start and return (`lifecycles`), and `n` threads run
/// in turn by one kept continuation (`pooled`): a thread that ends
/// suspends with `$done`, and the next start resumes it with the new
/// thread's id and argument.
const CONTINUATIONS: &str = r#"
(module
  (type $ft (func))
  (type $ct (cont $ft))
  (type $start (func (param i32 i32)))
  (type $pt (cont $start))
  (tag $yield)
  (tag $done (result i32 i32))
  (import "h" "step" (func $step (param i32) (result i32)))
  (memory 1 1 shared)
  (global $count (mut i32) (i32.const 0))
  (func $work (result i32)
    (global.set $count (i32.add (global.get $count) (i32.const 1)))
    (drop (i32.atomic.rmw.add (i32.const 0) (i32.const 1)))
    (call $step (global.get $count)))
  (func $thread
    (loop $l
      (drop (call $work))
      (suspend $yield)
      (br $l)))
  (func $short (drop (call $work)))
  (func $pooled (param $tid i32) (param $arg i32)
    (loop $l
      (drop (call $work))
      (suspend $done)
      (local.set $arg)
      (local.set $tid)
      (br $l)))
  (elem declare func $thread $short $pooled)
  (func (export "switches") (param $n i32) (result i32)
    (local $a (ref null $ct)) (local $b (ref null $ct)) (local $t (ref null $ct))
    (local.set $a (cont.new $ct (ref.func $thread)))
    (local.set $b (cont.new $ct (ref.func $thread)))
    (block $done
      (loop $l
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (block $y (result (ref $ct))
          (resume $ct (on $yield $y) (local.get $a))
          (br $done))
        (local.set $t)
        (local.set $a (local.get $b))
        (local.set $b (local.get $t))
        (br $l)))
    (global.get $count))
  (func (export "lifecycles") (param $n i32) (result i32)
    (block $done
      (loop $l
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (resume $ct (cont.new $ct (ref.func $short)))
        (br $l)))
    (global.get $count))
  (func (export "pooled") (param $n i32) (result i32)
    (local $k (ref null $pt))
    (local.set $k (cont.new $pt (ref.func $pooled)))
    (block $exit
      (loop $l
        (br_if $exit (i32.eqz (local.get $n)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (block $h (result (ref $pt))
          (resume $pt (on $done $h) (local.get $n) (i32.const 0) (local.get $k))
          (br $exit))
        (local.set $k)
        (br $l)))
    (global.get $count))
)
"#;

/// A thread that does the same work and then switches through an async
/// host call (`thread`), or returns (`short`).
const HOST_CALLS: &str = r#"
(module
  (import "h" "step" (func $step (param i32) (result i32)))
  (import "h" "switch" (func $switch))
  (import "env" "memory" (memory 1 1 shared))
  (global $count (export "count") (mut i32) (i32.const 0))
  (func $work (result i32)
    (global.set $count (i32.add (global.get $count) (i32.const 1)))
    (drop (i32.atomic.rmw.add (i32.const 0) (i32.const 1)))
    (call $step (global.get $count)))
  (func (export "thread")
    (loop $l
      (drop (call $work))
      (call $switch)
      (br $l)))
  (func (export "short") (drop (call $work)))
)
"#;

/// Pending once: the fiber suspends; the next poll finishes the call.
struct Switch(bool);

impl Future for Switch {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

fn step(x: i32) -> i32 {
    x & 1
}

struct Continuations {
    store: Store<()>,
    switches: TypedFunc<i32, i32>,
    lifecycles: TypedFunc<i32, i32>,
    pooled: TypedFunc<i32, i32>,
}

impl Continuations {
    fn new() -> Result<Continuations> {
        let mut cfg = Config::new();
        cfg.shared_memory(true)
            .wasm_threads(true)
            .wasm_stack_switching(true)
            .wasm_exceptions(true)
            .wasm_function_references(true);
        let engine = Engine::new(&cfg)?;
        let module = Module::new(&engine, wat::parse_str(CONTINUATIONS)?)?;
        let mut store = Store::new(&engine, ());
        let step = Func::wrap(&mut store, step);
        let instance = Instance::new(&mut store, &module, &[step.into()])?;
        let switches = instance.get_typed_func(&mut store, "switches")?;
        let lifecycles = instance.get_typed_func(&mut store, "lifecycles")?;
        let pooled = instance.get_typed_func(&mut store, "pooled")?;
        Ok(Continuations {
            store,
            switches,
            lifecycles,
            pooled,
        })
    }

    /// Two threads taking turns `n` times; returns the counter.
    fn switches(&mut self, n: usize) -> Result<i32> {
        self.switches.call(&mut self.store, n as i32)
    }

    /// `n` threads started and finished.
    fn lifecycles(&mut self, n: usize) -> Result<i32> {
        self.lifecycles.call(&mut self.store, n as i32)
    }

    /// `n` threads started and finished on one kept continuation.
    fn pooled(&mut self, n: usize) -> Result<i32> {
        self.pooled.call(&mut self.store, n as i32)
    }
}

/// One store and instance per thread over one shared memory, as heddle
/// keeps them; stacks from the pooling allocator.
struct HostCalls {
    threads: Vec<(Store<()>, Instance)>,
}

impl HostCalls {
    fn new() -> Result<HostCalls> {
        let mut cfg = Config::new();
        cfg.shared_memory(true)
            .wasm_threads(true)
            .allocation_strategy(PoolingAllocationConfig::default());
        let engine = Engine::new(&cfg)?;
        let module = Module::new(&engine, wat::parse_str(HOST_CALLS)?)?;
        let memory = SharedMemory::new(&engine, MemoryType::shared(1, 1))?;
        let mut linker: Linker<()> = Linker::new(&engine);
        linker.func_wrap("h", "step", step)?;
        linker.func_wrap_async("h", "switch", |_: Caller<'_, ()>, (): ()| {
            Box::new(Switch(false))
        })?;
        let mut threads = Vec::new();
        for _ in 0..2 {
            let mut store = Store::new(&engine, ());
            let mut l = linker.clone();
            l.define(&store, "env", "memory", memory.clone())?;
            let pre = l.instantiate_pre(&module)?;
            // Instantiation never suspends: polled once.
            let instance = match std::pin::pin!(pre.instantiate_async(&mut store))
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                Poll::Ready(r) => r?,
                Poll::Pending => return Err(Error::msg("instantiation suspended")),
            };
            threads.push((store, instance));
        }
        Ok(HostCalls { threads })
    }

    /// Two threads taking turns `n` times; returns the counters' sum.
    fn switches(&mut self, n: usize) -> Result<i32> {
        let mut futures = Vec::new();
        for (store, instance) in self.threads.iter_mut() {
            let f = instance.get_typed_func::<(), ()>(&mut *store, "thread")?;
            futures.push(Box::pin(async move { f.call_async(&mut *store, ()).await }));
        }
        let mut cx = Context::from_waker(Waker::noop());
        for i in 0..n {
            if let Poll::Ready(r) = futures[i & 1].as_mut().poll(&mut cx) {
                r?;
            }
        }
        // Dropping a suspended call unwinds its fiber.
        drop(futures);
        self.count()
    }

    /// `n` threads started and finished on a kept instance.
    fn lifecycles(&mut self, n: usize) -> Result<i32> {
        let (store, instance) = &mut self.threads[0];
        let f = instance.get_typed_func::<(), ()>(&mut *store, "short")?;
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..n {
            // Polled to its end: the thread never suspends.
            let mut call = Box::pin(f.call_async(&mut *store, ()));
            let r = loop {
                if let Poll::Ready(r) = call.as_mut().poll(&mut cx) {
                    break r;
                }
            };
            r?;
        }
        self.count()
    }

    fn count(&mut self) -> Result<i32> {
        let mut sum = 0;
        for (store, instance) in self.threads.iter_mut() {
            let g = instance
                .get_global(&mut *store, "count")
                .ok_or_else(|| Error::msg("the thread module exports no `count`"))?;
            sum += g.get(&mut *store).unwrap_i32();
        }
        Ok(sum)
    }
}

/// Nanoseconds per iteration of `f(n)`.
fn time(n: usize, f: impl FnOnce(usize) -> Result<i32>) -> Result<f64> {
    let t = Instant::now();
    std::hint::black_box(f(n)?);
    Ok(t.elapsed().as_secs_f64() * 1e9 / n as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Both measures of one kind in one round, alternating which goes first:
/// nanoseconds per iteration (host-call fiber, continuation).
fn pair(
    round: usize,
    n: usize,
    mut host: impl FnMut(usize) -> Result<i32>,
    mut cont: impl FnMut(usize) -> Result<i32>,
) -> Result<(f64, f64)> {
    if round.is_multiple_of(2) {
        let h = time(n, &mut host)?;
        Ok((h, time(n, &mut cont)?))
    } else {
        let c = time(n, &mut cont)?;
        Ok((time(n, &mut host)?, c))
    }
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(1_000_000), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(5), |s| s.parse())?;
    let mut host = HostCalls::new()?;
    let (mut sw, mut lc, mut pl) = (Vec::new(), Vec::new(), Vec::new());
    println!(
        "round | switch: host-call fiber ns | continuation ns | ratio \
         | thread start+end: host-call fiber ns | cont.new ns | ratio \
         | pooled continuation ns | ratio"
    );
    for round in 0..rounds {
        let cont = std::cell::RefCell::new(Continuations::new()?);
        let (h, c) = pair(
            round,
            n,
            |n| host.switches(n),
            |n| cont.borrow_mut().switches(n),
        )?;
        let m = (n / 10).min(10_000);
        let (hl, cl) = pair(
            round,
            m,
            |m| host.lifecycles(m),
            |m| cont.borrow_mut().lifecycles(m),
        )?;
        let (hp, cp) = pair(
            round,
            n,
            |n| host.lifecycles(n),
            |n| cont.borrow_mut().pooled(n),
        )?;
        println!(
            "{round} | {h:.1} | {c:.1} | {:.1} | {hl:.1} | {cl:.1} | {:.2} | {cp:.1} | {:.1}",
            h / c,
            hl / cl,
            hp / cp
        );
        sw.push(h / c);
        lc.push(hl / cl);
        pl.push(hp / cp);
    }
    println!(
        "median ratio (host-call fiber / continuation): switch {:.1}, \
         thread start+end {:.2} with cont.new, {:.1} pooled",
        median(&mut sw),
        median(&mut lc),
        median(&mut pl)
    );
    Ok(())
}

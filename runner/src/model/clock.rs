//! Virtual time.
//!
//! Both clocks the guest can read advance deterministically with guest
//! progress: every scheduling step adds [`Clock::STEP_NS`]. When every thread
//! is parked on time, the clock jumps to the earliest deadline. Wall-clock
//! time is a fixed epoch plus the monotonic time, so a run never observes the
//! host's clock.

/// The virtual clock of one run.
#[derive(Debug, Clone)]
pub struct Clock {
    now_ns: u64,
}

impl Clock {
    /// Virtual time charged per scheduling step.
    pub const STEP_NS: u64 = 1_000;
    /// Wall-clock time at the start of every run: 2026-01-01T00:00:00Z.
    pub const EPOCH_NS: u64 = 1_767_225_600 * 1_000_000_000;
    /// Resolution reported by `clock_res_get`.
    pub const RESOLUTION_NS: u64 = 1_000;

    /// A clock at the start of a run.
    pub fn new() -> Clock {
        Clock { now_ns: 0 }
    }

    /// Monotonic time since the run started.
    pub fn now(&self) -> u64 {
        self.now_ns
    }

    /// Wall-clock time (nanoseconds since the Unix epoch).
    pub fn wall(&self) -> u64 {
        Self::EPOCH_NS + self.now_ns
    }

    /// Advances the clock by one step.
    pub fn tick(&mut self) {
        self.now_ns += Self::STEP_NS;
    }

    /// Jumps forward to `t` (never backwards).
    pub fn advance_to(&mut self, t: u64) {
        self.now_ns = self.now_ns.max(t);
    }

    /// Converts a wall-clock deadline into monotonic time.
    pub fn wall_to_mono(&self, wall_ns: u64) -> u64 {
        wall_ns.saturating_sub(Self::EPOCH_NS)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

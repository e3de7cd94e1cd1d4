//! Start-up milestones, logged as `startup phase=<name> after=<ms>ms` from the start of
//! `tether run`: where a cold start spends its time (docs/design.md#start-up), for
//! operators and for the benchmark, which prints them as `tc_cold_start_phase_<name>`
//! lines.

use std::time::Instant;

pub struct Phases {
    start: Instant,
}

impl Phases {
    pub fn start() -> Phases {
        Phases {
            start: Instant::now(),
        }
    }

    pub fn mark(&self, name: &str) {
        log::info!(
            "startup phase={name} after={}ms",
            self.start.elapsed().as_millis()
        );
    }
}

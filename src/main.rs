//! The `tether` binary: hands its arguments to the library's commands (`commands`), which
//! say how it ends. Exit codes (docs/design.md#exit-codes): 0 clean stop, 1 runtime failure,
//! 2 bad usage or configuration.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    tether::commands::dispatch(&args)
}

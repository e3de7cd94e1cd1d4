//! `tether status`: ask the running daemon over its state socket (`status`) and print
//! the answer: the human table, `--json` the snapshot as the daemon sent it, `--metrics`
//! Prometheus text.

use std::io::Write;

use super::{CmdError, load_config};
use crate::status::{self, Request};

pub fn main(args: &[String], out: &mut dyn Write) -> Result<u8, CmdError> {
    let json = args.iter().any(|a| a == "--json");
    let metrics = args.iter().any(|a| a == "--metrics");
    let rest: Vec<String> = args
        .iter()
        .filter(|a| *a != "--json" && *a != "--metrics")
        .cloned()
        .collect();
    let cfg = load_config(&rest)?;
    let path = &cfg.state_socket;
    let text = if metrics {
        status::ask(path, Request::Metrics)
    } else if json {
        status::ask(path, Request::Status)
    } else {
        status::fetch(path).map(|s| status::render::human(&s))
    }
    .map_err(|e| CmdError::Failed(e.to_string()))?;
    let _ = out.write_all(text.as_bytes());
    Ok(0)
}

//! `tether run`: the daemon. Sets up the process (malloc arenas, logging, the signals that
//! stop it) and hands over to `daemon::run`; its stderr is its log, so its failures are
//! logged there, not printed.

use std::io::Write;

use super::{CmdError, load_config};
use crate::config::Input;
use crate::daemon::DaemonError;

pub fn main(args: &[String], _out: &mut dyn Write) -> Result<u8, CmdError> {
    crate::sys::limit_malloc_arenas();
    let cfg = load_config(args)?;
    crate::logging::init("info");
    // The kubeconfig and its files are checked by `daemon::run` before it connects to
    // anything; the manifests directory here (a directory others can change: exit 2).
    if let Input::Manifests(dir) = &cfg.source {
        if let Err(e) = crate::k8s::manifests::check_dir(dir) {
            log::error!("config: {e}");
            return Err(CmdError::Logged(2));
        }
    }
    let stop = match crate::sys::termination_signals() {
        Ok(rx) => rx,
        Err(e) => {
            log::error!("cannot install signal handlers: {e}");
            return Err(CmdError::Logged(1));
        }
    };
    let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
    let _ = std::thread::Builder::new()
        .name("stop".into())
        .spawn(move || {
            if let Ok(sig) = stop.recv() {
                log::info!("signal {sig}: stopping");
                let _ = stop_tx.send(());
            }
        });
    match crate::daemon::run(cfg, stop_rx, || log::info!("ready")) {
        Ok(()) | Err(DaemonError::Stopped) => Ok(0),
        Err(e @ DaemonError::Config(_)) => {
            log::error!("{e}");
            Err(CmdError::Logged(2))
        }
        Err(e) => {
            log::error!("{e}");
            Err(CmdError::Logged(1))
        }
    }
}

//! Benchmark group `daemon` (docs/design.md#benchmarks): the `tether` binary as a service.
//!
//! - `daemon_start_to_ready`: spawn `tether run` (manifests source: a Namespace, 8 Pods
//!   with OVS ports, one mirror TrafficControl) to its sd_notify `READY=1`, median of 5
//!   starts against the same switch (every start after the first is a restart: new flow
//!   round, old round deleted). Goal ≤ 200 ms.
//! - `daemon_idle_cpu`: CPU time (utime + stime, all threads) tether used over an idle
//!   window (60 s, `BENCH_IDLE_SECS` to change), ovs-vswitchd's over the same window as
//!   the baseline.
//! - `daemon_idle_wakeup_interval`: the window divided by the voluntary context switches
//!   of all threads (`/proc/<pid>/task/*/status`): how long the process sleeps between
//!   wake-ups on average; higher is better. Baseline: ovs-vswitchd.
//!
//! Run with `sudo ./scripts/bench.sh daemon`.

#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/e2e/mod.rs"]
mod e2e;

use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on every Linux ABI we run).
const USER_HZ: f64 = 100.0;

/// (utime + stime in seconds, voluntary context switches of all threads).
fn usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    let switches = per_thread(pid).values().sum();
    #[allow(clippy::cast_precision_loss)] // tick counts are far below 2^52
    (ticks as f64 / USER_HZ, switches)
}

/// Voluntary context switches per thread (`tid name` → count).
fn per_thread(pid: u32) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path();
        let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        let tid = path.file_name().unwrap().to_string_lossy().to_string();
        let n = field("voluntary_ctxt_switches:").parse().unwrap_or(0);
        out.insert(format!("{tid} {}", field("Name:")), n);
    }
    out
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(
    bed: &e2e::Bed,
    notify: &UnixDatagram,
    notify_path: &std::path::Path,
) -> (Daemon, Duration) {
    let args = bed.tether_args();
    let bin = common::tether::binary();
    let mut argv = vec![bin.to_str().unwrap(), "run"];
    argv.extend(args.iter().map(String::as_str));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(bed.sb.path("tether.log"))
        .unwrap();
    let t0 = Instant::now();
    let child = bed
        .sb
        .ns()
        .command(&argv)
        .env("NOTIFY_SOCKET", notify_path)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let d = Daemon(child);
    let mut buf = [0u8; 512];
    loop {
        let n = notify.recv(&mut buf).unwrap_or_else(|e| {
            panic!(
                "no READY from tether: {e}\n{}",
                std::fs::read_to_string(bed.sb.path("tether.log")).unwrap_or_default()
            )
        });
        if buf[..n].starts_with(b"READY=1") {
            return (d, t0.elapsed());
        }
    }
}

fn stop(mut d: Daemon) {
    common::run(std::process::Command::new("kill").args(["-TERM", &d.0.id().to_string()]));
    let _ = d.0.wait();
}

fn main() {
    if !common::privileged("bench_daemon") {
        return;
    }
    let idle_secs: u64 = std::env::var("BENCH_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mut bed = e2e::Bed::new();
    for i in 1..=8u8 {
        bed.add_pod(&format!("p{i}"), i);
    }
    let _coll = bed.add_collector(&["coll0"]);
    let labels: Vec<(String, &str)> = (1..=8).map(|i| (format!("p{i}"), "web")).collect();
    let labels: Vec<(&str, &str)> = labels.iter().map(|(n, a)| (n.as_str(), *a)).collect();
    bed.write_pods(&labels);
    bed.write("tc.yaml", e2e::MIRROR_WEB_TC);
    let notify_path = bed.sb.path("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();

    let mut times = Vec::new();
    for _ in 0..5 {
        let (d, took) = start(&bed, &notify, &notify_path);
        times.push(took);
        stop(d);
        // Drain STOPPING=1.
        let mut buf = [0u8; 64];
        let _ = notify.recv(&mut buf);
    }
    times.sort();
    println!(
        "bench daemon_start_to_ready: tether={:.1}ms",
        times[times.len() / 2].as_secs_f64() * 1000.0
    );

    let (d, _) = start(&bed, &notify, &notify_path);
    // Let the first full sync's follow-up work settle before measuring idle.
    std::thread::sleep(Duration::from_secs(2));
    let pid = d.0.id();
    let vswitchd = bed.sb.pid("ovs-vswitchd").unwrap();
    let (c0, w0) = usage(pid);
    let threads0 = per_thread(pid);
    let (b0, bw0) = usage(vswitchd);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(idle_secs));
    let window = t0.elapsed().as_secs_f64();
    let (c1, w1) = usage(pid);
    // Which threads wake up while idle (stderr: a diagnosis, not a figure).
    for (t, n) in per_thread(pid) {
        let d = n - threads0.get(&t).copied().unwrap_or(0);
        if d > 0 {
            eprintln!("idle wake-ups: thread {t}: {d}");
        }
    }
    let (b1, bw1) = usage(vswitchd);
    stop(d);
    let (cpu, base) = ((c1 - c0) * 1000.0, (b1 - b0) * 1000.0);
    let ratio = if base > 0.0 { cpu / base } else { 0.0 };
    println!("bench daemon_idle_cpu: tether={cpu:.0}ms baseline={base:.0}ms ratio={ratio:.3}");
    #[allow(clippy::cast_precision_loss)] // context-switch counts are small
    let interval = |w: u64| window * 1000.0 / (w.max(1) as f64);
    let (wt, wb) = (w1 - w0, bw1 - bw0);
    eprintln!("idle {window:.0}s: tether {wt} wake-ups, ovs-vswitchd {wb}");
    println!(
        "bench daemon_idle_wakeup_interval: tether={:.1}ms baseline={:.1}ms ratio={:.3}",
        interval(wt),
        interval(wb),
        interval(wt) / interval(wb)
    );
}

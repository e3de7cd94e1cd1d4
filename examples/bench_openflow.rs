//! Benchmark group `openflow` (docs/design.md#benchmarks): install N distinct flows on a
//! fresh bridge with tether (one atomic bundle through `OfFlows::apply`) and with
//! `ovs-ofctl -O OpenFlow15 --bundle add-flows <file>` holding the same flows, each on its
//! own fresh bridge in one sandbox; N = 10,000 and 100,000. Both sides are timed from "have
//! the flows as data" to "switch committed them", and each result is checked by counting
//! the bridge's flows; each figure is the median of 3 alternating runs (the machine is
//! shared).
//!
//! `openflow_peak_rss`: a fresh child process (this program, re-run with `--peak-child`)
//! builds 100,000 flows, installs them and keeps them for replay; its peak RSS (VmHWM) is
//! tether's figure. The baseline is the same child building the same flows and holding
//! them without installing them: what the caller's desired flows cost anyway. Each in its
//! own process, so neither inherits the other's heap (earlier runs in one process left
//! glibc's heap at the high-water mark of the largest run).
//!
//! Run: `sudo ./scripts/bench.sh openflow`.

// The shared harness re-exports more than this benchmark uses.
#[allow(unused_imports)]
#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write as _;
use std::time::{Duration, Instant};

use common::Sandbox;
use tether::openflow::action::Action;
use tether::openflow::flow::{Category, Flow, Owner};
use tether::openflow::oxm::{MatchField, values};
use tether::openflow::{OfFlows, OfFlowsConfig};

const OWNER: Owner = Owner {
    category: Category::TRAFFIC_CONTROL,
    object: 1,
};

fn flows(n: u32) -> Vec<Flow> {
    (0..n)
        .map(|i| {
            Flow::new(0, 100)
                .matches([
                    MatchField::EthType(values::ETH_TYPE_IPV4),
                    MatchField::Reg {
                        idx: 0,
                        value: i,
                        mask: None,
                    },
                ])
                .actions([Action::output(1)])
        })
        .collect()
}

/// The same flows as ovs-ofctl text (cookie = round 1, category 1, object 1), streamed to
/// the file so the text never sits in this process's memory (its peak RSS is tether's).
fn write_flow_file(path: &std::path::Path, n: u32) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create flow file"));
    for i in 0..n {
        writeln!(
            f,
            "cookie=0x1010000000001,table=0,priority=100,ip,reg0={i} actions=output:1"
        )
        .expect("write flow file");
    }
    f.flush().expect("flush flow file");
}

fn flow_count(sb: &Sandbox, bridge: &str) -> usize {
    let out = sb.ofctl(&[
        "-O",
        "OpenFlow15",
        "dump-aggregate",
        bridge,
        "cookie=0x1010000000001/-1",
    ]);
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("flow_count="))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|k| k.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Median of the runs (they are few and the machine is shared).
fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One ovs-ofctl run on a fresh bridge.
fn baseline_once(sb: &Sandbox, n: u32, label: &str, run: usize) -> Duration {
    let br = format!("bo{label}{run}");
    sb.add_bridge(&br);
    let file = sb.path(&format!("flows-{label}.txt"));
    if !file.exists() {
        write_flow_file(&file, n);
    }
    let file_s = file.to_str().expect("utf-8 path");
    let t = Instant::now();
    sb.ofctl(&["-O", "OpenFlow15", "--bundle", "add-flows", &br, file_s]);
    let d = t.elapsed();
    assert_eq!(flow_count(sb, &br), usize::try_from(n).unwrap_or(0));
    sb.vsctl(&["del-br", &br]);
    d
}

/// One tether run on a fresh bridge: from building the flows to the committed bundle.
fn tether_once(sb: &Sandbox, n: u32, label: &str, run: usize) -> Duration {
    let br = format!("bt{label}{run}");
    sb.add_bridge(&br);
    let mut cfg = OfFlowsConfig::new(sb.mgmt(&br), &br, 1);
    cfg.timeout = Duration::from_secs(120);
    let of = OfFlows::start(cfg).expect("start OfFlows");
    of.wait_connected(Duration::from_secs(10))
        .expect("connect to the bridge");
    // Let the first-connect replay (an empty bundle) finish outside the timing.
    let _ = of.reconnects().recv_timeout(Duration::from_secs(10));
    let t = Instant::now();
    of.apply(OWNER, flows(n)).expect("install flows");
    let d = t.elapsed();
    assert_eq!(flow_count(sb, &br), usize::try_from(n).unwrap_or(0));
    drop(of);
    sb.vsctl(&["del-br", &br]);
    d
}

/// The child of `openflow_peak_rss`: `--peak-child <mgmt socket|-> <bridge> <n>`. With a
/// socket it installs the flows and keeps them; with `-` it only builds and holds them.
/// Prints its VmHWM in MB.
fn peak_child(args: &[String]) {
    let [mgmt, bridge, n] = args else {
        panic!("usage: --peak-child <mgmt|-> <bridge> <n>");
    };
    let n: u32 = n.parse().expect("flow count");
    let built = flows(n);
    let _kept = if mgmt == "-" {
        Some(built)
    } else {
        let mut cfg = OfFlowsConfig::new(mgmt.into(), bridge, 1);
        cfg.timeout = Duration::from_secs(120);
        let of = OfFlows::start(cfg).expect("start OfFlows");
        of.wait_connected(Duration::from_secs(10))
            .expect("connect to the bridge");
        let _ = of.reconnects().recv_timeout(Duration::from_secs(10));
        of.apply(OWNER, built).expect("install flows");
        assert_eq!(of.flow_count(), usize::try_from(n).unwrap_or(0));
        println!("{:.1}", peak_rss_mb());
        return;
    };
    println!("{:.1}", peak_rss_mb());
}

/// Peak RSS of a fresh child installing (or, for the baseline, only building) `n` flows.
fn peak_in_child(sb: &Sandbox, n: u32, install: bool) -> f64 {
    let br = "bpeak";
    let mgmt = if install {
        sb.add_bridge(br);
        sb.mgmt(br).to_string_lossy().into_owned()
    } else {
        "-".to_string()
    };
    let exe = std::env::current_exe().expect("own path");
    let out = std::process::Command::new(exe)
        .args(["--peak-child", &mgmt, br, &n.to_string()])
        .output()
        .expect("run the peak child");
    assert!(
        out.status.success(),
        "peak child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if install {
        assert_eq!(flow_count(sb, br), usize::try_from(n).unwrap_or(0));
        sb.vsctl(&["del-br", br]);
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("child's VmHWM")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--peak-child") {
        peak_child(&args[1..]);
        return;
    }
    if !common::privileged("bench_openflow") {
        return;
    }
    let runs = 3;
    let sb = Sandbox::start();
    for (n, label) in [(10_000u32, "10k"), (100_000, "100k")] {
        // Alternate the two sides so both see the same background load.
        let (mut ours, mut base) = (Vec::new(), Vec::new());
        for run in 0..runs {
            base.push(baseline_once(&sb, n, label, run));
            ours.push(tether_once(&sb, n, label, run));
        }
        let (ours, base) = (median(ours), median(base));
        println!(
            "bench openflow_install_{label}: tether={:.1}ms baseline={:.1}ms ratio={:.2}",
            ms(ours),
            ms(base),
            ours.as_secs_f64() / base.as_secs_f64()
        );
    }
    let (ours, base) = (
        peak_in_child(&sb, 100_000, true),
        peak_in_child(&sb, 100_000, false),
    );
    println!(
        "bench openflow_peak_rss: tether={ours:.1}MB baseline={base:.1}MB ratio={:.2}",
        ours / base
    );
}

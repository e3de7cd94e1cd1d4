//! A stable-toolchain fuzz driver: a seeded, coverage-less, high-throughput mutation loop
//! over the targets of `tether_fuzz`. It exists because cargo-fuzz needs nightly flags; it
//! finds what random mutation of good seeds finds (bounds, lengths, nesting, odd tokens),
//! not what coverage guidance finds.
//!
//! ```text
//! mutate <target|all> [--secs N] [--execs N] [--seed S] [--seeds DIR] [--artifacts DIR]
//! ```
//! Prints one line per target:
//! `fuzz <target>: execs=<n> crashes=<n> secs=<s> rate=<n>/s driver=mutate seed=<s>`; a
//! crashing input is written to `<artifacts>/<target>/crash-<n>` and its panic message
//! printed. Exit status 1 when any target crashed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use tether_fuzz::TARGETS;

/// xorshift64*: deterministic for a seed, so a run is reproducible with `--seed`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform-ish in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n.max(1)).unwrap_or(1)).unwrap_or(0)
    }
    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }
}

/// Tokens spliced into inputs: JSON/YAML syntax, the words the decoders branch on, and
/// boundary numbers.
const DICT: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"1e999",
    b"-0",
    b"4294967296",
    b"16777216",
    b"65536",
    b"9223372036854775808",
    b"\"type\"",
    b"\"object\"",
    b"\"ADDED\"",
    b"\"MODIFIED\"",
    b"\"DELETED\"",
    b"\"BOOKMARK\"",
    b"\"ERROR\"",
    b"\"Status\"",
    b"\"kind\"",
    b"\"code\"",
    b"410",
    b"\"metadata\"",
    b"\"resourceVersion\"",
    b"\"spec\"",
    b"\"labels\"",
    b"\"items\"",
    b"\"set\"",
    b"\"map\"",
    b"\"uuid\"",
    b"\"named-uuid\"",
    b"\"id\"",
    b"\"result\"",
    b"\"error\"",
    b"\"method\"",
    b"\"params\"",
    b"---\n",
    b"\n- ",
    b": ",
    b"\n  ",
    b"&a ",
    b"*a",
    b"!!str ",
    b"!!binary ",
    b"? ",
    b"|\n",
    b">-\n",
    b"\t",
    b"#",
    b"%YAML 1.2\n",
    b"...\n",
    b"kind: List\nitems:\n",
    b"apiVersion: v1\n",
    b"crd.antrea.io/v1alpha2",
    b"crd.antrea.io/v1alpha1",
    b"TrafficControl",
    b"ExternalNode",
    b"targetPort",
    b"vxlan",
    b"erspan",
    b"remoteIP",
    b"matchExpressions",
    b"\"00000000-0000-0000-0000-000000000000\"",
];

/// Big-endian 16/32-bit values that OpenFlow length and type fields trip on.
const INTERESTING: &[u32] = &[
    0,
    1,
    4,
    7,
    8,
    15,
    16,
    24,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0xffff_ffff,
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>], max_len: usize) {
    let n = 1 + rng.below(6);
    for _ in 0..n {
        let len = input.len();
        match rng.below(11) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.byte();
            }
            2 => {
                let i = rng.below(len + 1);
                let k = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..k).map(|_| rng.byte()).collect();
                input.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let k = 1 + rng.below((len - i).min(64));
                input.drain(i..i + k);
            }
            4 if len > 0 => {
                // Duplicate a range (deeper nesting, repeated documents).
                let i = rng.below(len);
                let k = 1 + rng.below((len - i).min(128));
                let dup = input[i..i + k].to_vec();
                let at = rng.below(len + 1);
                input.splice(at..at, dup);
            }
            5 => {
                let t = DICT[rng.below(DICT.len())];
                let i = rng.below(len + 1);
                input.splice(i..i, t.iter().copied());
            }
            6 if len >= 2 => {
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let i = rng.below(len - 1);
                let b = v.to_be_bytes();
                input[i] = b[2];
                input[i + 1] = b[3];
            }
            7 if len >= 4 => {
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let i = rng.below(len - 3);
                input[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            8 if !corpus.is_empty() => {
                // Splice: our head, another input's tail.
                let other = &corpus[rng.below(corpus.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
            }
            9 if len > 0 => {
                input.truncate(rng.below(len));
            }
            10 if len >= 4 => {
                // OpenFlow: make the header length agree with the buffer (so the body
                // decoders, not the length check, see the mutation).
                if let Ok(l) = u16::try_from(len) {
                    input[2..4].copy_from_slice(&l.to_be_bytes());
                }
            }
            _ => {}
        }
    }
    input.truncate(max_len);
}

fn load_seeds(dir: &Path, target: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir.join(target)) {
        let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if let Ok(b) = std::fs::read(&p) {
                out.push(b);
            }
        }
    }
    if out.is_empty() {
        out.push(Vec::new());
    }
    out
}

struct Opts {
    targets: Vec<String>,
    secs: Option<f64>,
    execs: Option<u64>,
    seed: u64,
    seeds: PathBuf,
    artifacts: PathBuf,
}

fn parse_args() -> Result<Opts, String> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut o = Opts {
        targets: Vec::new(),
        secs: None,
        execs: None,
        seed: 0x7e7e_2026,
        seeds: here.join("seeds"),
        artifacts: here.join("artifacts"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--secs" => o.secs = Some(val()?.parse().map_err(|e| format!("--secs: {e}"))?),
            "--execs" => o.execs = Some(val()?.parse().map_err(|e| format!("--execs: {e}"))?),
            "--seed" => o.seed = val()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--seeds" => o.seeds = PathBuf::from(val()?),
            "--artifacts" => o.artifacts = PathBuf::from(val()?),
            "all" => o.targets = TARGETS.iter().map(|(n, _)| (*n).to_string()).collect(),
            t if TARGETS.iter().any(|(n, _)| *n == t) => o.targets.push(t.to_string()),
            other => {
                let names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown argument {other:?} (targets: all, {})",
                    names.join(", ")
                ));
            }
        }
    }
    if o.targets.is_empty() {
        return Err("name a target or all".into());
    }
    if o.secs.is_none() && o.execs.is_none() {
        o.secs = Some(10.0);
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mutate: {e}");
            return ExitCode::from(2);
        }
    };
    // Panics are counted and reported here, not printed by the default hook per exec.
    std::panic::set_hook(Box::new(|_| {}));
    let mut any_crash = false;
    for name in &o.targets {
        let Some(&(_, f)) = TARGETS.iter().find(|(n, _)| n == name) else {
            continue;
        };
        let mut rng = Rng(o.seed ^ 0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
        let seeds = load_seeds(&o.seeds, name);
        let max_len = seeds.iter().map(Vec::len).max().unwrap_or(0).max(256) * 2;
        let mut corpus = seeds.clone();
        let (mut execs, mut crashes) = (0u64, 0u64);
        let start = Instant::now();
        let deadline = o.secs.map(|s| start + Duration::from_secs_f64(s));
        // Seeds first, unmutated: they must pass too.
        let mut queue: Vec<Vec<u8>> = seeds.clone();
        let mut input = Vec::new();
        loop {
            if execs % 1024 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if o.execs.is_some_and(|n| execs >= n) {
                break;
            }
            match queue.pop() {
                Some(s) => input = s,
                None => {
                    input.clear();
                    input.extend_from_slice(&corpus[rng.below(corpus.len())]);
                    mutate(&mut rng, &mut input, &corpus, max_len);
                }
            }
            execs += 1;
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(&input))) {
                crashes += 1;
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
                    .unwrap_or_default();
                let dir = o.artifacts.join(name);
                let _ = std::fs::create_dir_all(&dir);
                let path = dir.join(format!("crash-{crashes}"));
                let _ = std::fs::write(&path, &input);
                if crashes <= 5 {
                    eprintln!(
                        "fuzz {name}: CRASH #{crashes} saved to {}: {msg}",
                        path.display()
                    );
                }
            } else if rng.below(4096) == 0 && corpus.len() < 512 {
                // Drift: keep an occasional mutant as a parent (no coverage to guide us).
                corpus.push(input.clone());
            }
        }
        let secs = start.elapsed().as_secs_f64();
        any_crash |= crashes > 0;
        println!(
            "fuzz {name}: execs={execs} crashes={crashes} secs={secs:.1} rate={:.0}/s driver=mutate seed={}",
            execs as f64 / secs.max(1e-9),
            o.seed
        );
    }
    if any_crash {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

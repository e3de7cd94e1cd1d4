//! A ping that runs in the background (`ping -D -i <interval>` inside a namespace) and says,
//! once stopped, which echo requests were answered and when each was sent: what "the VM
//! stayed reachable while …" is measured with.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Netns;

pub struct Pinger {
    child: Option<Child>,
    out: PathBuf,
    interval: Duration,
    started: f64,
}

/// What a stopped [`Pinger`] saw.
#[derive(Debug)]
pub struct Pings {
    /// Echo requests sent (ping's own count).
    pub sent: u64,
    /// Sequence number → when it was answered (seconds since the epoch, ping's `-D`).
    pub answered: std::collections::BTreeMap<u64, f64>,
    /// When the first request went out, and the interval between them.
    pub started: f64,
    pub interval: Duration,
    /// ping's output, for failure messages.
    pub text: String,
}

/// Seconds since the epoch, as ping's `-D` prints them.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Pinger {
    /// `ping -D -i <interval> -W 1 <to>` from `from`, its output in `out`.
    pub fn start(from: &Netns, to: &str, interval: Duration, out: PathBuf) -> Pinger {
        let file = std::fs::File::create(&out).expect("create ping output");
        let started = now();
        let child = from
            .command(&[
                "ping",
                "-D",
                "-n",
                "-W",
                "1",
                "-i",
                &format!("{:.3}", interval.as_secs_f64()),
                to,
            ])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("dup"))
            .stderr(file)
            .spawn()
            .expect("spawn ping");
        Pinger {
            child: Some(child),
            out,
            interval,
            started,
        }
    }

    /// SIGINT (ping then prints its summary) and read what it saw. The last requests,
    /// sent less than ping's own wait for an answer (`-W 1`) before the stop and not
    /// answered, were still in flight: they are left out, not counted as lost (under
    /// emulation a round trip takes a good part of an interval).
    pub fn stop(mut self) -> Pings {
        let stopped = now();
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-INT", &c.id().to_string()])
                .output();
            let _ = c.wait();
        }
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let mut p = parse(&text, self.started, self.interval);
        while p.sent > 0 && !p.answered.contains_key(&p.sent) && p.sent_at(p.sent) > stopped - 1.0 {
            p.sent -= 1;
        }
        p
    }
}

impl Drop for Pinger {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// ping's `-D` output: `[1733230000.123456] 64 bytes from …: icmp_seq=5 ttl=64 time=0.08 ms`
/// per answer, then `N packets transmitted, M received, …`.
pub fn parse(text: &str, started: f64, interval: Duration) -> Pings {
    let mut answered = std::collections::BTreeMap::new();
    let mut sent = 0;
    for line in text.lines() {
        if let Some((n, _)) = line.split_once(" packets transmitted") {
            sent = n.trim().parse().unwrap_or(0);
            continue;
        }
        let Some(ts) = line
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .and_then(|(t, _)| t.parse::<f64>().ok())
        else {
            continue;
        };
        if !line.contains(" bytes from ") {
            continue;
        }
        if let Some(seq) = line
            .split("icmp_seq=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|s| s.parse::<u64>().ok())
        {
            answered.entry(seq).or_insert(ts);
        }
    }
    Pings {
        sent,
        answered,
        started,
        interval,
        text: text.to_string(),
    }
}

impl Pings {
    /// Sequence numbers (from 1) never answered.
    pub fn lost(&self) -> Vec<u64> {
        (1..=self.sent)
            .filter(|s| !self.answered.contains_key(s))
            .collect()
    }

    /// When request `seq` was sent, about: an answered one when its answer came (plus a
    /// round trip, well under an interval here); a lost one between its nearest answered
    /// neighbours, in proportion (ping's schedule slips under emulation, so counting
    /// intervals from the start drifts); with no neighbour on one side, an interval per
    /// step from the other.
    pub fn sent_at(&self, seq: u64) -> f64 {
        if let Some(t) = self.answered.get(&seq) {
            return *t;
        }
        let step = self.interval.as_secs_f64();
        let before = self.answered.range(..seq).next_back();
        let after = self.answered.range(seq..).next();
        match (before, after) {
            (Some((&a, &ta)), Some((&b, &tb))) => {
                ta + (tb - ta) * (seq - a) as f64 / (b - a) as f64
            }
            (Some((&a, &ta)), None) => ta + (seq - a) as f64 * step,
            (None, Some((&b, &tb))) => tb - (b - seq) as f64 * step,
            (None, None) => self.started + (seq.saturating_sub(1)) as f64 * step,
        }
    }

    /// Requests lost among those sent between `from` and `to` (epoch seconds).
    pub fn lost_between(&self, from: f64, to: f64) -> Vec<u64> {
        self.lost()
            .into_iter()
            .filter(|s| (from..=to).contains(&self.sent_at(*s)))
            .collect()
    }

    /// Requests sent between `from` and `to`.
    pub fn sent_between(&self, from: f64, to: f64) -> u64 {
        (1..=self.sent)
            .filter(|s| (from..=to).contains(&self.sent_at(*s)))
            .count() as u64
    }
}

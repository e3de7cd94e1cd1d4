//! One finding of `tether check`: what was checked, the outcome and how to fix it, and the
//! report they make. Every check (this module's siblings and `preflight`) produces these;
//! none of them needs anything else from the others.

use std::fmt::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

/// One finding: what was checked, the outcome, and how to fix it when not `Ok`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    pub what: String,
    pub detail: String,
    pub fix: Option<String>,
}

pub fn ok(what: &str, detail: impl Into<String>) -> Finding {
    Finding {
        level: Level::Ok,
        what: what.into(),
        detail: detail.into(),
        fix: None,
    }
}

pub fn bad(level: Level, what: &str, detail: impl Into<String>, fix: impl Into<String>) -> Finding {
    Finding {
        level,
        what: what.into(),
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

/// The report text and the exit code.
pub fn report(findings: &[Finding]) -> (String, u8) {
    let mut o = String::new();
    let mut failed = 0;
    let mut warned = 0;
    for f in findings {
        let tag = match f.level {
            Level::Ok => "ok  ",
            Level::Warn => {
                warned += 1;
                "WARN"
            }
            Level::Fail => {
                failed += 1;
                "FAIL"
            }
        };
        let _ = writeln!(o, "{tag} {}: {}", f.what, f.detail);
        if let Some(fix) = &f.fix {
            let _ = writeln!(o, "     fix: {fix}");
        }
    }
    let _ = writeln!(
        o,
        "{} checks: {} failed, {} warnings",
        findings.len(),
        failed,
        warned
    );
    (o, u8::from(failed > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_counts_and_exit_code() {
        let f = vec![
            ok("ovsdb", "/r/db.sock answers"),
            bad(Level::Warn, "bridge", "br lacks OpenFlow15", "set it"),
        ];
        let (text, code) = report(&f);
        assert_eq!(
            text,
            "ok   ovsdb: /r/db.sock answers\nWARN bridge: br lacks OpenFlow15\n     fix: set it\n2 checks: 0 failed, 1 warnings\n"
        );
        assert_eq!(code, 0);
        let (_, code) = report(&[bad(Level::Fail, "x", "y", "z")]);
        assert_eq!(code, 1);
    }
}

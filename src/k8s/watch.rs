//! The list/watch state machine of one resource kind, and the codec of its wire messages
//! (list pages, watch lines). Pure: no sockets, no clock reads — the driver in `source.rs`
//! performs the requests this machine asks for and feeds back what happened, with `now`.
//!
//! ```text
//!            ┌──────────────── 410 / ERROR 410 (relist) ───────────────┐
//!            ▼                                                         │
//!       NeedList ── LIST page ──► Listing{continue} ── last page ──► Watching{rv}
//!            ▲   (limit=500)        │  ▲    │            Replace(all)     │  ▲
//!            │                      │  └────┘ next page                  │  │ stream ended /
//!            └──── list error ──────┘                                    │  │ transport error:
//!                  (restart from scratch, backoff)                       └──┘ re-WATCH from rv
//! ```
//!
//! Algorithm of kube-rs's watcher (reference rust-ecosystem.md §5): a paginated LIST
//! without resourceVersion (a consistent read) fills a buffer; the last page replaces the
//! store atomically (`Delta::Replace`), which synthesizes deletes for objects that
//! vanished while we were not watching. Then WATCH from the list's resourceVersion with
//! bookmarks and `timeoutSeconds` < 295; every event advances `rv`, so a stream that ends
//! (server timeout, cut connection, garbage) resumes from the last `rv` without a relist.
//! A 410 — as HTTP status or as an `ERROR` event — means `rv` fell out of the server's
//! history: relist. Every error arms the backoff (0.8 s → 30 s, jitter); any success
//! resets it.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::backoff::{Backoff, BackoffConfig};
use super::error::KubeError;
use super::types::Resource;

/// Tunables of one watcher; `Default` is what the daemon uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchConfig {
    /// LIST page size (`limit`).
    pub page_size: u32,
    /// WATCH `timeoutSeconds`: kept below 295 s so the server, not a proxy or our own
    /// stall timeout (`HttpConfig::watch_stall_timeout`, 300 s), ends a quiet stream.
    pub timeout_seconds: u32,
    pub backoff: BackoffConfig,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            page_size: 500,
            timeout_seconds: 290,
            backoff: BackoffConfig::default(),
        }
    }
}

/// Where the machine is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Nothing known; the next request is the first LIST page.
    NeedList,
    /// Part way through a paginated LIST; `continue_token` fetches the next page.
    Listing { continue_token: String },
    /// The store is in sync up to `rv`; the next request is a WATCH from it.
    Watching { rv: String },
}

/// The request the driver should make next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    List {
        limit: u32,
        continue_token: Option<String>,
    },
    Watch {
        resource_version: String,
        timeout_seconds: u32,
    },
}

impl Request {
    /// Query parameters (besides selectors) for this request.
    pub fn query(&self) -> Vec<(&'static str, String)> {
        match self {
            Request::List {
                limit,
                continue_token,
            } => {
                let mut q = vec![("limit", limit.to_string())];
                if let Some(c) = continue_token {
                    q.push(("continue", c.clone()));
                }
                q
            }
            Request::Watch {
                resource_version,
                timeout_seconds,
            } => vec![
                ("watch", "true".to_string()),
                ("allowWatchBookmarks", "true".to_string()),
                ("resourceVersion", resource_version.clone()),
                ("timeoutSeconds", timeout_seconds.to_string()),
            ],
        }
    }
}

/// What the driver does next: wait out a backoff, or send a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Wait(Instant),
    Send(Request),
}

/// A change for the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta<T> {
    /// A full list: the store must hold exactly these objects.
    Replace(Vec<T>),
    Apply(T),
    Delete(T),
}

/// One decoded LIST page.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage<T> {
    pub items: Vec<T>,
    pub resource_version: String,
    pub continue_token: Option<String>,
}

/// One decoded watch line.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<T> {
    Added(T),
    Modified(T),
    Deleted(T),
    Bookmark {
        resource_version: String,
    },
    /// An `ERROR` event or a bare `Status` line.
    Error(KubeError),
}

/// The machine for one kind.
#[derive(Debug)]
pub struct Watcher<T> {
    cfg: WatchConfig,
    state: State,
    buffer: Vec<T>,
    backoff: Backoff,
    retry_at: Option<Instant>,
    last_error: Option<KubeError>,
    /// Events received on the current stream (a stream that ends with none backs off).
    stream_events: u64,
}

impl<T: Resource> Watcher<T> {
    pub fn new(cfg: WatchConfig, seed: u64) -> Watcher<T> {
        Watcher {
            cfg,
            state: State::NeedList,
            buffer: Vec::new(),
            backoff: Backoff::new(cfg.backoff, seed),
            retry_at: None,
            last_error: None,
            stream_events: 0,
        }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// The error that armed the current backoff, if any.
    pub fn last_error(&self) -> Option<&KubeError> {
        self.last_error.as_ref()
    }

    /// What to do at `now`.
    pub fn poll(&self, now: Instant) -> Step {
        if let Some(t) = self.retry_at {
            if t > now {
                return Step::Wait(t);
            }
        }
        Step::Send(match &self.state {
            State::NeedList => Request::List {
                limit: self.cfg.page_size,
                continue_token: None,
            },
            State::Listing { continue_token } => Request::List {
                limit: self.cfg.page_size,
                continue_token: Some(continue_token.clone()),
            },
            State::Watching { rv } => Request::Watch {
                resource_version: rv.clone(),
                timeout_seconds: self.cfg.timeout_seconds,
            },
        })
    }

    fn fail(&mut self, err: KubeError, now: Instant) -> Duration {
        let d = self.backoff.next_delay();
        self.retry_at = Some(now + d);
        self.last_error = Some(err);
        d
    }

    fn succeed(&mut self) {
        self.backoff.reset();
        self.retry_at = None;
        self.last_error = None;
    }

    /// A LIST page arrived. Returns `Replace` after the last page.
    pub fn on_list_page(&mut self, page: ListPage<T>) -> Option<Delta<T>> {
        self.succeed();
        self.buffer.extend(page.items);
        match page.continue_token.filter(|c| !c.is_empty()) {
            Some(c) => {
                self.state = State::Listing { continue_token: c };
                None
            }
            None => {
                self.state = State::Watching {
                    rv: page.resource_version,
                };
                Some(Delta::Replace(std::mem::take(&mut self.buffer)))
            }
        }
    }

    /// A LIST request failed (including an expired continue token, 410): start the list
    /// again from the first page after the backoff. Returns the delay.
    pub fn on_list_error(&mut self, err: KubeError, now: Instant) -> Duration {
        self.buffer.clear();
        self.state = State::NeedList;
        self.fail(err, now)
    }

    /// The WATCH request was answered 200 and the stream is open.
    pub fn on_watch_opened(&mut self) {
        self.stream_events = 0;
    }

    /// One line of the stream. Returns the store change, if any; an `Err` means the
    /// stream must be abandoned (the machine has already chosen what to do next).
    pub fn on_watch_event(
        &mut self,
        ev: WatchEvent<T>,
        now: Instant,
    ) -> Result<Option<Delta<T>>, KubeError> {
        let State::Watching { rv } = &mut self.state else {
            return Ok(None);
        };
        self.stream_events += 1;
        let delta = match ev {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                rv.clone_from(&o.meta().resource_version);
                Delta::Apply(o)
            }
            WatchEvent::Deleted(o) => {
                rv.clone_from(&o.meta().resource_version);
                Delta::Delete(o)
            }
            WatchEvent::Bookmark { resource_version } => {
                *rv = resource_version;
                self.succeed();
                return Ok(None);
            }
            WatchEvent::Error(err) => {
                if matches!(err, KubeError::Gone { .. }) {
                    self.state = State::NeedList;
                }
                self.fail(err.clone(), now);
                return Err(err);
            }
        };
        self.succeed();
        Ok(Some(delta))
    }

    /// The WATCH request failed before or during the stream. HTTP 410 → relist; anything
    /// else → re-watch from the same `rv` after the backoff. Returns the delay.
    pub fn on_watch_error(&mut self, err: KubeError, now: Instant) -> Duration {
        if matches!(err, KubeError::Gone { .. }) {
            self.state = State::NeedList;
        }
        self.fail(err, now)
    }

    /// The stream ended cleanly (server-side timeout). Re-watch from `rv` at once — unless
    /// the stream delivered nothing, which would otherwise be a hot loop.
    pub fn on_watch_end(&mut self, now: Instant) {
        if self.stream_events == 0 {
            self.fail(
                KubeError::Transport {
                    what: "watch".to_string(),
                    detail: "stream ended without any event".to_string(),
                },
                now,
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Codec

#[derive(Deserialize)]
struct ListWire<W> {
    #[serde(default)]
    metadata: ListMetaWire,
    #[serde(default = "Vec::new")]
    items: Vec<W>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListMetaWire {
    #[serde(default)]
    resource_version: String,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

/// `metav1.Status`, the body of errors and of `ERROR` events.
#[derive(Deserialize, Default, Debug)]
pub struct StatusWire {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub code: u16,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
}

impl StatusWire {
    pub fn into_error(self, url: &str) -> KubeError {
        KubeError::from_status(self.code, url, self.reason, self.message)
    }
}

/// Decode a LIST response body.
pub fn decode_list<T: Resource>(body: &[u8]) -> Result<ListPage<T>, KubeError> {
    let w: ListWire<T::Wire> = serde_json::from_slice(body).map_err(|e| KubeError::Decode {
        what: format!("{} list", T::KIND),
        detail: e.to_string(),
    })?;
    if w.metadata.resource_version.is_empty() {
        return Err(KubeError::Decode {
            what: format!("{} list", T::KIND),
            detail: "no metadata.resourceVersion".to_string(),
        });
    }
    Ok(ListPage {
        items: w.items.into_iter().map(T::from_wire).collect(),
        resource_version: w.metadata.resource_version,
        continue_token: w.metadata.continue_token,
    })
}

#[derive(Deserialize)]
struct EventWire {
    #[serde(rename = "type", default)]
    type_: Option<String>,
    #[serde(default)]
    object: serde_json::Value,
    // A bare Status line has these at top level instead.
    #[serde(default)]
    kind: String,
    #[serde(default)]
    code: u16,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
}

/// Decode one line of a watch stream.
pub fn decode_event<T: Resource>(line: &[u8]) -> Result<WatchEvent<T>, KubeError> {
    let bad = |detail: String| KubeError::Decode {
        what: format!("{} watch event", T::KIND),
        detail,
    };
    let w: EventWire = serde_json::from_slice(line).map_err(|e| bad(e.to_string()))?;
    let Some(t) = w.type_ else {
        if w.kind == "Status" {
            return Ok(WatchEvent::Error(KubeError::from_status(
                w.code, "watch", w.reason, w.message,
            )));
        }
        return Err(bad("no \"type\"".to_string()));
    };
    let obj = |v: serde_json::Value| T::decode(v);
    Ok(match t.as_str() {
        "ADDED" => WatchEvent::Added(obj(w.object)?),
        "MODIFIED" => WatchEvent::Modified(obj(w.object)?),
        "DELETED" => WatchEvent::Deleted(obj(w.object)?),
        "BOOKMARK" => WatchEvent::Bookmark {
            resource_version: w
                .object
                .pointer("/metadata/resourceVersion")
                .and_then(|v| v.as_str())
                .ok_or_else(|| bad("BOOKMARK without metadata.resourceVersion".to_string()))?
                .to_string(),
        },
        "ERROR" => {
            let s: StatusWire = serde_json::from_value(w.object).map_err(|e| bad(e.to_string()))?;
            WatchEvent::Error(s.into_error("watch"))
        }
        other => return Err(bad(format!("unknown event type {other:?}"))),
    })
}

#[cfg(test)]
mod tests;

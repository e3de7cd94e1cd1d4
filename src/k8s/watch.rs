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
//! Algorithm of kube-rs's watcher (`kube-runtime/src/watcher.rs`): a paginated LIST
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
pub enum WatchNext {
    Wait(Instant),
    Send(Request),
}

/// A change for the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta<T> {
    /// A full list: the store must hold exactly these objects.
    Replace(Vec<T>),
    /// A full list in which the objects with these keys could not be decoded: the store
    /// holds these objects and keeps its own version of those keys ("I could not read it"
    /// is not "it was deleted").
    ReplaceKeeping(Vec<T>, Vec<String>),
    Apply(T),
    Delete(T),
}

/// One decoded LIST page.
#[derive(Debug, Clone, PartialEq)]
pub struct ListPage<T> {
    pub items: Vec<T>,
    pub resource_version: String,
    pub continue_token: Option<String>,
    /// Items that could not be decoded: (key, why). The rest of the page is good.
    pub skipped: Vec<(String, String)>,
}

/// What to do about a watch line that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadEvent {
    /// Skipped: its resourceVersion is known, the stream goes on past it.
    Skipped,
    /// The stream must be abandoned and re-watched (after the backoff).
    Rewatch,
    /// The same object (or line) keeps failing: relist.
    Relist,
}

/// Below this, a watch that ended without any event is suspicious (client-go's reflector
/// uses the same second): back off instead of re-watching at once.
pub const QUIET_WATCH_MIN: Duration = Duration::from_secs(1);
/// The longest `Retry-After` honoured (API Priority and Fairness sends small ones).
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

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
    /// Events received on the current stream, and when it opened: a stream that ends
    /// with none within [`QUIET_WATCH_MIN`] backs off.
    stream_events: u64,
    stream_opened: Option<Instant>,
    /// Undecodable events per object key (or `""` for lines without one), since the last
    /// list: the second failure of the same one relists.
    bad_events: std::collections::HashMap<String, u32>,
    /// Keys of list items that could not be decoded, over the pages of this list.
    skipped: Vec<String>,
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
            stream_opened: None,
            bad_events: std::collections::HashMap::new(),
            skipped: Vec::new(),
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
    pub fn poll(&self, now: Instant) -> WatchNext {
        if let Some(t) = self.retry_at {
            if t > now {
                return WatchNext::Wait(t);
            }
        }
        WatchNext::Send(match &self.state {
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
        let mut d = self.backoff.next_delay();
        // 429/503 with Retry-After (API Priority and Fairness): wait what the server
        // asked, capped, and never less than our own backoff.
        if let Some(ra) = err.retry_after() {
            d = d.max(ra.min(RETRY_AFTER_MAX));
        }
        self.retry_at = Some(now + d);
        self.last_error = Some(err);
        d
    }

    fn succeed(&mut self) {
        self.backoff.reset();
        self.retry_at = None;
        self.last_error = None;
    }

    /// A LIST page arrived. Returns `Replace` (or `ReplaceKeeping`, when items could not
    /// be decoded) after the last page.
    pub fn on_list_page(&mut self, page: ListPage<T>) -> Option<Delta<T>> {
        self.succeed();
        self.buffer.extend(page.items);
        self.skipped
            .extend(page.skipped.into_iter().map(|(k, _)| k));
        match page.continue_token.filter(|c| !c.is_empty()) {
            Some(c) => {
                self.state = State::Listing { continue_token: c };
                None
            }
            None => {
                self.state = State::Watching {
                    rv: page.resource_version,
                };
                self.bad_events.clear();
                let objs = std::mem::take(&mut self.buffer);
                let skipped = std::mem::take(&mut self.skipped);
                Some(if skipped.is_empty() {
                    Delta::Replace(objs)
                } else {
                    Delta::ReplaceKeeping(objs, skipped)
                })
            }
        }
    }

    /// A LIST request failed. Part way through a paginated list, the next attempt resumes
    /// with the same continue token (client-go's pager does too) — unless the token
    /// expired (410), which starts the list again from the first page. Returns the delay.
    pub fn on_list_error(&mut self, err: KubeError, now: Instant) -> Duration {
        let resumable =
            matches!(self.state, State::Listing { .. }) && !matches!(err, KubeError::Gone { .. });
        if !resumable {
            self.buffer.clear();
            self.skipped.clear();
            self.state = State::NeedList;
        }
        self.fail(err, now)
    }

    /// The WATCH request was answered 200 and the stream is open.
    pub fn on_watch_opened(&mut self, now: Instant) {
        self.stream_events = 0;
        self.stream_opened = Some(now);
    }

    /// A watch line that does not decode. With the object's resourceVersion known the
    /// stream goes on past it (the store keeps that object's previous version); the same
    /// object failing again, or three lines without a resourceVersion, relist.
    pub fn on_bad_event(
        &mut self,
        key: Option<&str>,
        rv: Option<&str>,
        err: KubeError,
        now: Instant,
    ) -> BadEvent {
        let n = self
            .bad_events
            .entry(key.unwrap_or("").to_string())
            .or_insert(0);
        *n += 1;
        let limit = if key.is_some() { 2 } else { 3 };
        if *n >= limit {
            self.state = State::NeedList;
            self.fail(err, now);
            return BadEvent::Relist;
        }
        match (rv, &mut self.state) {
            (Some(v), State::Watching { rv }) if !v.is_empty() => {
                *rv = v.to_string();
                self.last_error = Some(err);
                BadEvent::Skipped
            }
            _ => {
                self.fail(err, now);
                BadEvent::Rewatch
            }
        }
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

    /// The stream ended cleanly (the server's `timeoutSeconds`). Re-watch from `rv` at once:
    /// a quiet resource (no events, and no bookmarks when the server's watch cache is off)
    /// is not a failure. Only a stream that ended with no event within
    /// [`QUIET_WATCH_MIN`] of opening backs off, as it would otherwise be a hot loop.
    pub fn on_watch_end(&mut self, now: Instant) {
        let quick = self
            .stream_opened
            .is_none_or(|t| now.saturating_duration_since(t) < QUIET_WATCH_MIN);
        if self.stream_events == 0 && quick {
            self.fail(
                KubeError::Transport {
                    what: "watch".to_string(),
                    detail: "stream ended at once without any event".to_string(),
                },
                now,
            );
        } else {
            self.succeed();
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

/// Decode a LIST response body. An item that does not decode is skipped and named in
/// `skipped` (its key, when its metadata has one): one bad object must not fail the list.
///
/// A page is read straight into the kind's wire type, which passes over every field tether
/// does not use without keeping it. Only a page that does not decode that way is read again
/// as `serde_json::Value`s to find which items are bad: that tree allocates a map or a
/// string for every field of every item (a Pod's whole spec and status) before the typed
/// conversion, and made the first list of 10,000 Pods slower than a client that keeps
/// whole objects. A page pays for it only when it holds a bad item.
pub fn decode_list<T: Resource>(body: &[u8]) -> Result<ListPage<T>, KubeError> {
    let (metadata, items, skipped) = match serde_json::from_slice::<ListWire<T::Wire>>(body) {
        Ok(w) => (
            w.metadata,
            w.items.into_iter().map(T::from_wire).collect(),
            Vec::new(),
        ),
        Err(_) => decode_list_items::<T>(body)?,
    };
    if metadata.resource_version.is_empty() {
        return Err(KubeError::Decode {
            what: format!("{} list", T::KIND),
            detail: "no metadata.resourceVersion".to_string(),
        });
    }
    Ok(ListPage {
        items,
        resource_version: metadata.resource_version,
        continue_token: metadata.continue_token,
        skipped,
    })
}

/// A decoded page's metadata, good items, and (key, why) of the items skipped.
type PageParts<T> = (ListMetaWire, Vec<T>, Vec<(String, String)>);

/// The lenient read of a page that did not decode as a whole: each item on its own, the
/// bad ones named. The page's own error when even its envelope is broken.
fn decode_list_items<T: Resource>(body: &[u8]) -> Result<PageParts<T>, KubeError> {
    let w: ListWire<serde_json::Value> =
        serde_json::from_slice(body).map_err(|e| KubeError::Decode {
            what: format!("{} list", T::KIND),
            detail: e.to_string(),
        })?;
    let mut items = Vec::with_capacity(w.items.len());
    let mut skipped = Vec::new();
    for v in w.items {
        let key = identity(&v).map(|(k, _)| k);
        match T::decode(v) {
            Ok(o) => items.push(o),
            Err(e) => skipped.push((key.unwrap_or_default(), e.to_string())),
        }
    }
    Ok((w.metadata, items, skipped))
}

/// An object's key (`namespace/name`) and resourceVersion, read leniently from whatever
/// parts of its metadata are strings.
fn identity(v: &serde_json::Value) -> Option<(String, String)> {
    let m = v.get("metadata")?;
    let name = m.get("name")?.as_str()?;
    let ns = m.get("namespace").and_then(|n| n.as_str()).unwrap_or("");
    let rv = m
        .get("resourceVersion")
        .and_then(|r| r.as_str())
        .unwrap_or("");
    Some((super::types::object_key(ns, name), rv.to_string()))
}

/// The object key and resourceVersion of a watch line that did not decode, when its
/// envelope and metadata still say them.
pub fn bad_event_identity(line: &[u8]) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    identity(v.get("object")?)
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

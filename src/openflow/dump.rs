//! Reading flows back from the switch: the FLOW_DESC request for the flows of a cookie
//! (under a mask), the flows of every part of its reply, and a one-shot dump of a whole
//! bridge over a connection of its own (`tether flows`, `tether plan`). The backend's
//! read-backs (`OfFlows::dump`, `drift`) use the first two on their own connection.

use std::path::Path;
use std::time::Duration;

use super::conn::{Conn, ConnOptions, Reply};
use super::consts::Version;
use super::flowmod::{
    FlowDesc, FlowDescRequest, MultipartReplyBody, MultipartRequest, MultipartRequestBody,
};
use super::msg::Body;

/// The multipart FLOW_DESC request for every flow whose cookie matches `cookie` under
/// `mask` (`0, 0`: all of them).
pub fn flow_dump_request(cookie: u64, mask: u64) -> Body {
    Body::MultipartRequest(MultipartRequest {
        flags: 0,
        body: MultipartRequestBody::FlowDesc(FlowDescRequest::by_cookie(cookie, mask)),
    })
}

/// [`flow_dump_request`] for one table only.
pub fn table_dump_request(table_id: u8, cookie: u64, mask: u64) -> Body {
    Body::MultipartRequest(MultipartRequest {
        flags: 0,
        body: MultipartRequestBody::FlowDesc(FlowDescRequest {
            table_id,
            ..FlowDescRequest::by_cookie(cookie, mask)
        }),
    })
}

/// The flows of every part of a FLOW_DESC reply.
pub fn dumped_flows(r: Reply) -> Vec<FlowDesc> {
    let mut out = Vec::new();
    for (_, m) in r.replies {
        if let Body::MultipartReply(mp) = m.body {
            if let MultipartReplyBody::FlowDesc(v) = mp.body {
                out.extend(v);
            }
        }
    }
    out
}

/// Every flow of the bridge (one multipart FLOW_DESC request, all parts).
pub fn dump_all(mgmt: &Path) -> Result<Vec<FlowDesc>, String> {
    let conn = Conn::start(mgmt, ConnOptions::new(Version::OF15, "flows"))
        .map_err(|e| format!("openflow {}: {e}", mgmt.display()))?;
    conn.wait_connected(Duration::from_secs(5))
        .map_err(|e| format!("openflow {}: {e}", mgmt.display()))?;
    let reply = conn
        .transact(vec![flow_dump_request(0, 0)], Duration::from_secs(30))
        .map_err(|e| format!("flow dump from {}: {e}", mgmt.display()))?;
    if let Some((_, e)) = reply.errors.first() {
        return Err(format!("flow dump from {}: {e:?}", mgmt.display()));
    }
    Ok(dumped_flows(reply))
}

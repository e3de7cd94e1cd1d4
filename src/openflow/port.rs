//! OpenFlow 1.5's port description, `ofp_port` (§7.2.1): in `PORT_STATUS` messages and
//! `OFPMP_PORT_DESC` replies; and port names as their NUL-padded 16-byte field. Pure.

use super::WireError;
use super::codec::{Reader, Writer};
use super::oxm::Mac;

/// OF1.5 `ofp_port` (§7.2.1): fixed 40 bytes, then properties (kept raw).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub port_no: u32,
    pub hw_addr: Mac,
    pub name: [u8; 16],
    pub config: u32,
    pub state: u32,
    pub properties: Vec<u8>,
}

/// A NUL-padded port name as text.
pub fn port_name(raw: &[u8; 16]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// A port name as its NUL-padded 16-byte field (longer names are cut, as OVS does).
pub fn port_name_field(name: &str) -> [u8; 16] {
    let mut a = [0u8; 16];
    let n = name.len().min(15);
    a[..n].copy_from_slice(&name.as_bytes()[..n]);
    a
}

impl Port {
    pub fn encode(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        let start = w.pos();
        w.u32(self.port_no);
        let mark = w.reserve_len_from(start);
        w.zeros(2);
        w.bytes(&self.hw_addr);
        w.zeros(2);
        w.bytes(&self.name);
        w.u32(self.config);
        w.u32(self.state);
        w.bytes(&self.properties);
        w.patch_len(mark)?;
        Ok(())
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<Port, WireError> {
        let port_no = r.u32("port_no")?;
        let len = usize::from(r.u16("port length")?);
        if len < 40 {
            return Err(WireError::BadLength { what: "port", len });
        }
        let mut b = r.sub(len - 6, "port")?;
        b.skip(2, "port padding")?;
        let hw_addr = b.array("hw_addr")?;
        b.skip(2, "port padding")?;
        Ok(Port {
            port_no,
            hw_addr,
            name: b.array("port name")?,
            config: b.u32("config")?,
            state: b.u32("state")?,
            properties: b.rest().to_vec(),
        })
    }
}

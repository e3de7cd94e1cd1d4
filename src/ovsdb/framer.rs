//! Splits a byte stream into JSON-RPC messages (RFC 7047 §4: objects sent back to back with
//! no delimiter). Pure: bytes in, `serde_json::Value`s out. Handles a message split across
//! reads and several in one read; rejects a stream that does not start an object and any
//! message over the size cap, with an error rather than a panic or unbounded growth.

use serde_json::Value;

use super::OvsdbError;

/// Default cap on one message. A monitor reply for a few thousand ports is a few MB.
pub const DEFAULT_MAX_MESSAGE: usize = 64 << 20;

/// A buffer this big, mostly empty after a message, is shrunk to [`SHRINK_TO`].
const SHRINK_ABOVE: usize = 1 << 20;
const SHRINK_TO: usize = 64 << 10;

#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// Bytes of `buf` already scanned for the current message.
    scanned: usize,
    /// Offset where the current message starts (after inter-message whitespace).
    start: Option<usize>,
    depth: u32,
    in_string: bool,
    escaped: bool,
    max: usize,
}

impl Framer {
    pub fn new(max: usize) -> Framer {
        Framer {
            buf: Vec::new(),
            scanned: 0,
            start: None,
            depth: 0,
            in_string: false,
            escaped: false,
            max,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held for a message not yet complete.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete message, `Ok(None)` when more bytes are needed. After an error the
    /// stream is unusable: the caller drops the connection.
    pub fn next_message(&mut self) -> Result<Option<Value>, OvsdbError> {
        while self.scanned < self.buf.len() {
            let b = self.buf[self.scanned];
            let at = self.scanned;
            self.scanned += 1;
            if self.start.is_none() {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => continue,
                    b'{' => {
                        self.start = Some(at);
                        self.depth = 1;
                        continue;
                    }
                    _ => {
                        return Err(OvsdbError::Protocol(format!(
                            "expected '{{' to start a message, got byte 0x{b:02x}"
                        )));
                    }
                }
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return self.take(at + 1).map(Some);
                    }
                }
                _ => {}
            }
        }
        let held = self.start.map_or(0, |s| self.buf.len() - s);
        if held > self.max {
            return Err(OvsdbError::Oversize { limit: self.max });
        }
        if self.start.is_none() {
            // Only whitespace so far: nothing to keep.
            self.buf.clear();
            self.scanned = 0;
        }
        Ok(None)
    }

    fn take(&mut self, end: usize) -> Result<Value, OvsdbError> {
        let start = self.start.take().unwrap_or(0);
        if end - start > self.max {
            return Err(OvsdbError::Oversize { limit: self.max });
        }
        let parsed = serde_json::from_slice(&self.buf[start..end]);
        self.buf.drain(..end);
        self.scanned = 0;
        // A monitor reply for thousands of ports grows the buffer to MBs once; give that
        // back instead of holding it for the daemon's lifetime.
        if self.buf.capacity() > SHRINK_ABOVE && self.buf.len() < self.buf.capacity() / 4 {
            self.buf.shrink_to(self.buf.len().max(SHRINK_TO));
        }
        parsed.map_err(|e| OvsdbError::Protocol(format!("invalid JSON message: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_big_message_does_not_keep_its_buffer() {
        let mut f = Framer::new(DEFAULT_MAX_MESSAGE);
        let big = json!({"id": 1, "result": "x".repeat(4 << 20)}).to_string();
        f.push(big.as_bytes());
        f.push(b"{\"id\":");
        assert!(f.next_message().unwrap().is_some());
        // The 6-byte start of the next message is kept; the 4 MiB are given back.
        assert!(f.buf.capacity() <= SHRINK_TO, "{}", f.buf.capacity());
        f.push(b"2}");
        assert_eq!(f.next_message().unwrap(), Some(json!({"id": 2})));
    }

    fn all(f: &mut Framer) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = f.next_message().unwrap() {
            out.push(v);
        }
        out
    }

    #[test]
    fn split_across_reads_at_every_byte() {
        let msg = br#"{"id":1,"result":[{"rows":[{"name":"a}\"{["}]}],"error":null}"#;
        for cut in 0..msg.len() {
            let mut f = Framer::new(1024);
            f.push(&msg[..cut]);
            assert_eq!(f.next_message().unwrap(), None, "cut at {cut}");
            f.push(&msg[cut..]);
            assert_eq!(
                all(&mut f),
                vec![json!({"id":1,"result":[{"rows":[{"name":"a}\"{["}]}],"error":null})]
            );
        }
    }

    #[test]
    fn several_in_one_read_with_whitespace() {
        let mut f = Framer::new(1024);
        f.push(b" {\"a\":1}\n{\"b\":[2,{\"c\":\"\\\\\"}]}  {\"d\"");
        assert_eq!(
            all(&mut f),
            vec![json!({"a":1}), json!({"b":[2,{"c":"\\"}]})]
        );
        f.push(b":3}");
        assert_eq!(all(&mut f), vec![json!({"d":3})]);
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn garbage_is_an_error() {
        let mut f = Framer::new(1024);
        f.push(b"HTTP/1.1 200 OK\r\n");
        let e = f.next_message().unwrap_err();
        assert_eq!(
            e,
            OvsdbError::Protocol("expected '{' to start a message, got byte 0x48".into())
        );
    }

    #[test]
    fn balanced_but_invalid_json_is_an_error() {
        let mut f = Framer::new(1024);
        f.push(b"{\"a\" 1}");
        assert!(
            matches!(f.next_message(), Err(OvsdbError::Protocol(m)) if m.starts_with("invalid JSON message"))
        );
    }

    #[test]
    fn oversize_is_an_error_before_the_end_arrives() {
        let mut f = Framer::new(16);
        f.push(b"{\"k\":\"0123456789abcdef");
        assert_eq!(f.next_message(), Err(OvsdbError::Oversize { limit: 16 }));
        let mut f = Framer::new(8);
        f.push(b"{\"k\":\"0123\"}");
        assert_eq!(f.next_message(), Err(OvsdbError::Oversize { limit: 8 }));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            let mut f = Framer::new(256);
            for _ in 0..64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let bytes = x.to_le_bytes();
                f.push(&bytes[..(x % 8) as usize]);
                if f.next_message().is_err() {
                    break;
                }
            }
        }
    }
}

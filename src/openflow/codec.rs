//! Byte-level reader and writer for OpenFlow messages: big-endian integers, length fields
//! reserved and patched after the body is written, and the 8-byte alignment OpenFlow 1.5.1
//! requires of matches, actions, instructions and properties (§7.1). Nothing here knows a
//! message type; `msg`, `oxm` and `action` build on these two types.

use super::WireError;

/// A cursor over received bytes. Every read checks the remaining length first, so a short
/// buffer is a [`WireError::Truncated`] naming what was being read, never a panic.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread bytes, without consuming them.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.remaining() < n {
            return Err(WireError::Truncated {
                what,
                need: n,
                have: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N, what)?);
        Ok(a)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<(), WireError> {
        self.bytes(n, what).map(|_| ())
    }

    /// A sub-reader over the next `len` bytes (a length-delimited structure); the parent
    /// moves past them.
    pub fn sub(&mut self, len: usize, what: &'static str) -> Result<Reader<'a>, WireError> {
        Ok(Reader::new(self.bytes(len, what)?))
    }

    /// Fails unless everything was consumed (the `decode_exact` rule: trailing bytes are an
    /// inconsistency, not something to ignore).
    pub fn finish(&self, what: &'static str) -> Result<(), WireError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(WireError::Trailing {
                what,
                extra: self.remaining(),
            })
        }
    }
}

/// Appends big-endian fields to a caller's `Vec<u8>`, so a whole batch of messages is
/// encoded into one buffer and written with one syscall.
pub struct Writer<'a> {
    pub out: &'a mut Vec<u8>,
}

/// A 16-bit length field reserved by [`Writer::reserve_len`], patched by [`Writer::patch_len`].
#[must_use = "a reserved length must be patched"]
#[derive(Debug, Clone, Copy)]
pub struct LenMark {
    /// Offset of the length field itself.
    field: usize,
    /// Offset the counted structure starts at.
    start: usize,
}

impl<'a> Writer<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Writer<'a> {
        Writer { out }
    }

    pub fn pos(&self) -> usize {
        self.out.len()
    }

    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    pub fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    pub fn zeros(&mut self, n: usize) {
        self.out.resize(self.out.len() + n, 0);
    }

    /// Reserve a u16 length at the current position, counting from `start` (the offset
    /// where the structure the length describes begins).
    pub fn reserve_len_from(&mut self, start: usize) -> LenMark {
        let field = self.pos();
        self.u16(0);
        LenMark { field, start }
    }

    /// Patch the reserved length with the bytes written since the structure started.
    /// OpenFlow lengths are u16; a structure over 65535 bytes cannot be encoded.
    pub fn patch_len(&mut self, mark: LenMark) -> Result<usize, WireError> {
        let len = self.pos() - mark.start;
        let v = u16::try_from(len).map_err(|_| WireError::TooLong { len })?;
        self.out[mark.field..mark.field + 2].copy_from_slice(&v.to_be_bytes());
        Ok(len)
    }

    /// Zero-pad so the bytes written since `start` are a multiple of 8 (OpenFlow 1.5.1 §7.1).
    pub fn pad8_from(&mut self, start: usize) {
        let n = pad8(self.pos() - start);
        self.zeros(n);
    }
}

/// Bytes of padding that bring `len` to a multiple of 8.
pub fn pad8(len: usize) -> usize {
    (8 - len % 8) % 8
}

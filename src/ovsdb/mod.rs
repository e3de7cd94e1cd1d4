//! OVSDB (RFC 7047): JSON-RPC framing, datum codec, transactions, the connection and the bridge API.

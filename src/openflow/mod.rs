//! OpenFlow 1.5 (and the OF1.0 bits no-flood needs): codec, connection, flow sets.

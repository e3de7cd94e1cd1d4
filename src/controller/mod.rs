//! Controllers and the machinery they share (work queue); they never see a socket.

pub mod queue;

//! The TrafficControl controller (Antrea `pkg/agent/controller/trafficcontrol`).

pub mod ports;

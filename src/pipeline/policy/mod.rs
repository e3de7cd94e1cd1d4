//! Pure helpers for translating NetworkPolicy rules into flows (issue 30; the reference's
//! Part B §2.2–2.3): CIDR `except` subtraction and port-range value/mask lists
//! ([`ranges`]), the rules' total order and OpenFlow priorities ([`priority`]),
//! conjunction ids ([`conj`]), and one rule's match clauses as data ([`rule`]).
//!
//! Owns arithmetic on the controlplane's decoded values only. Not the flows themselves,
//! not the rule cache, not OpenFlow encoding, and no I/O or clocks: every function here is
//! a pure function of its arguments.

pub mod conj;
pub mod priority;
pub mod ranges;
pub mod rule;

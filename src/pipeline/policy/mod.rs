//! NetworkPolicy as flows (docs/networkpolicy.md): the compiler from
//! the controlplane's state to every policy flow of the VM ([`compile`]), the flows' shapes
//! ([`flows`]), and the pure helpers under them: CIDR `except` subtraction and port-range
//! value/mask lists ([`ranges`]), the rules' total order and stable OpenFlow priorities
//! ([`priority`]), conjunction ids ([`conj`]), one rule's match clauses as data
//! ([`rule`]), and a Reject rule's answer packets ([`reject`]).
//!
//! Owns what the flows are. Not applying them (bundles, owners on the switch), not the
//! controlplane watches, no I/O or clocks: every function here is a pure function of its
//! arguments, and [`Compiler`] keeps only ids, priorities and what each rule was last built
//! from between calls.

pub mod compile;
pub mod conj;
pub mod flows;
pub mod priority;
pub mod ranges;
pub mod reject;
pub mod rule;

pub use compile::{
    Changes, CompileError, Compiled, CompiledRule, Compiler, RuleInfo, RuleKey, RuleStatus, Scope,
    owners_of,
};
pub use flows::{
    BASE_OWNER, CT_ZONE, VmPorts, base_flows, decode_log_userdata, decode_reject_userdata,
    log_userdata, reject_userdata,
};

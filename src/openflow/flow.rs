//! The [`Flow`] value the controllers build and compare, its identity ([`FlowKey`]: table,
//! priority, match — what OpenFlow's "strict" commands match on), who owns it ([`Owner`]),
//! and the cookie layout `round(16) | category(8) | reserved(8) | object(32)` that Antrea
//! uses (`pkg/agent/openflow/cookie/allocator.go`; docs/antrea-compat.md#cookies-and-rounds).

use std::fmt;
use std::sync::Arc;

use super::action::{Action, Instruction};
use super::consts::FlowModCommand;
use super::flowmod::{FlowDesc, FlowMod};
use super::oxm::{Match, MatchField};

/// Cookie category (bits 40..47), numbered as Antrea's `cookie.Category`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Category(pub u8);

impl Category {
    /// Table-miss and pipeline flows.
    pub const DEFAULT: Category = Category(0);
    /// Antrea's PodConnectivity; every TrafficControl flow uses it.
    pub const TRAFFIC_CONTROL: Category = Category(1);
    /// Antrea's NetworkPolicy: object 0 is the policy pipeline's own flows (conntrack,
    /// established skip), every other object one rule, numbered by its conjunction id.
    pub const NETWORK_POLICY: Category = Category(2);
    /// Antrea's ExternalNodeConnectivity.
    pub const EXTERNAL_NODE: Category = Category(8);
}

/// Who a set of flows belongs to: a category and an object id (a TC, an ExternalNode, a
/// return port …). The owner is also the flows' cookie, so `dump-flows cookie=…/-1` shows
/// exactly one owner's flows.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Owner {
    pub category: Category,
    pub object: u32,
}

impl Owner {
    pub fn new(category: Category, object: u32) -> Owner {
        Owner { category, object }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "owner(category={},object={})",
            self.category.0, self.object
        )
    }
}

/// The mask selecting a cookie's round (bits 48..63).
pub const ROUND_MASK: u64 = 0xffff_0000_0000_0000;
/// The mask selecting round, category and object (everything but the reserved byte).
pub const OWNER_MASK: u64 = 0xffff_ff00_ffff_ffff;

/// `round << 48 | category << 40 | object` (bits 32..39 reserved, zero).
pub fn cookie(round: u16, category: Category, object: u32) -> u64 {
    u64::from(round) << 48 | u64::from(category.0) << 40 | u64::from(object)
}

/// A flow's identity in a table: two flows with the same key are the same OpenFlow entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub table: u8,
    pub priority: u16,
    pub match_: Match,
}

/// What a flow does; compared to decide between "unchanged", modify and re-add.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowValue {
    pub instructions: Arc<Vec<Instruction>>,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
}

/// A desired flow. Build with [`Flow::new`] and the chained helpers; the match is kept in
/// canonical order, so equal flows compare equal however they were built.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Flow {
    pub key: FlowKey,
    pub value: FlowValue,
}

impl Flow {
    /// An empty flow (matches everything, drops) in `table` at `priority`.
    pub fn new(table: u8, priority: u16) -> Flow {
        Flow {
            key: FlowKey {
                table,
                priority,
                match_: Match::default(),
            },
            value: FlowValue {
                instructions: Arc::default(),
                idle_timeout: 0,
                hard_timeout: 0,
            },
        }
    }

    /// Add a match field.
    pub fn matching(mut self, field: MatchField) -> Flow {
        let mut fields = self.key.match_.fields().to_vec();
        fields.push(field);
        self.key.match_ = Match::new(fields);
        self
    }

    /// Add several match fields at once (one canonical re-sort instead of one per field).
    pub fn matches(mut self, fields: impl IntoIterator<Item = MatchField>) -> Flow {
        let mut all = self.key.match_.fields().to_vec();
        all.extend(fields);
        self.key.match_ = Match::new(all);
        self
    }

    /// Append actions to the flow's apply-actions instruction (created on first use, and
    /// kept before any goto_table, the order OVS prints and encodes).
    pub fn actions(mut self, actions: impl IntoIterator<Item = Action>) -> Flow {
        let ins = Arc::make_mut(&mut self.value.instructions);
        if let Some(Instruction::ApplyActions(list)) = ins
            .iter_mut()
            .find(|i| matches!(i, Instruction::ApplyActions(_)))
        {
            list.extend(actions);
        } else {
            ins.insert(0, Instruction::ApplyActions(actions.into_iter().collect()));
        }
        self
    }

    /// `goto_table:<table>`.
    pub fn goto(mut self, table: u8) -> Flow {
        Arc::make_mut(&mut self.value.instructions).push(Instruction::GotoTable(table));
        self
    }

    pub fn timeouts(mut self, idle: u16, hard: u16) -> Flow {
        self.value.idle_timeout = idle;
        self.value.hard_timeout = hard;
        self
    }

    /// The flow as a switch describes it (cookie 0, no counters): what `tether plan`
    /// prints and compares with the switch's own descriptions.
    pub fn to_desc(&self) -> FlowDesc {
        FlowDesc {
            table_id: self.key.table,
            priority: self.key.priority,
            idle_timeout: self.value.idle_timeout,
            hard_timeout: self.value.hard_timeout,
            match_: self.key.match_.clone(),
            instructions: self.value.instructions.as_ref().clone(),
            ..FlowDesc::default()
        }
    }

    /// The flow mod that installs (`ADD`), changes (`MODIFY_STRICT`) or removes
    /// (`DELETE_STRICT`) this flow under `cookie`.
    pub fn to_flow_mod(&self, command: FlowModCommand, cookie: u64) -> FlowMod {
        let mut fm = FlowMod::new(
            command,
            self.key.table,
            self.key.priority,
            self.key.match_.clone(),
        );
        fm.cookie = cookie;
        if command != FlowModCommand::DELETE_STRICT && command != FlowModCommand::DELETE {
            fm.idle_timeout = self.value.idle_timeout;
            fm.hard_timeout = self.value.hard_timeout;
            fm.instructions = self.value.instructions.clone();
        }
        fm
    }
}

/// `(round, category, object)` if `cookie` has tether's shape: a round, a category tether
/// uses, the reserved byte zero.
pub fn tether_cookie(cookie: u64) -> Option<(u16, Category, u32)> {
    let round = u16::try_from(cookie >> 48).unwrap_or(0);
    let category = Category(u8::try_from((cookie >> 40) & 0xff).unwrap_or(0));
    let reserved = (cookie >> 32) & 0xff;
    let object = u32::try_from(cookie & 0xffff_ffff).unwrap_or(0);
    let known = [
        Category::DEFAULT,
        Category::TRAFFIC_CONTROL,
        Category::NETWORK_POLICY,
        Category::EXTERNAL_NODE,
    ]
    .contains(&category);
    (round != 0 && reserved == 0 && known).then_some((round, category, object))
}

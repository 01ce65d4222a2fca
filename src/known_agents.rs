//! The agents agentls knows by name (`known_agents.toml`, shipped in the binary): how to run
//! each, the mode that asks before editing, the folders it keeps for itself and what it needs
//! for the editor tools. `[agents.<name>] use = "<id>"` in the user's config takes an entry
//! whole; the keys the config sets itself override it. Agents are data: nothing here branches
//! on an agent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The table, as shipped.
const TABLE: &str = include_str!("known_agents.toml");

/// One agent of the table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KnownAgent {
    /// What to call it.
    pub name: String,
    /// The program that starts it.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The mode that asks before editing (`None`: the one it starts in asks).
    #[serde(default)]
    pub mode: Option<String>,
    /// What it needs in its environment to use agentls's editor tools.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Folders in the workspace where it keeps its own state.
    #[serde(default)]
    pub own_files: Vec<PathBuf>,
    /// How to get it.
    pub install: String,
    /// Why it may not use the editor tools, when something is known.
    #[serde(default)]
    pub tools_hint: Option<String>,
}

/// The known agents by id, in id order (the table is read once).
pub fn all() -> &'static BTreeMap<String, KnownAgent> {
    static KNOWN: OnceLock<BTreeMap<String, KnownAgent>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        toml::from_str(TABLE).unwrap_or_else(|e| {
            tracing::error!("the table of known agents does not parse: {e}");
            BTreeMap::new()
        })
    })
}

impl KnownAgent {
    /// The entry as the config's JSON for an agent (camelCase keys of `AgentSpec`).
    pub fn as_config(&self) -> Value {
        let mut spec = Map::new();
        spec.insert("command".into(), Value::from(self.command.clone()));
        spec.insert("args".into(), Value::from(self.args.clone()));
        if let Some(mode) = &self.mode {
            spec.insert("mode".into(), Value::from(mode.clone()));
        }
        let env = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())));
        spec.insert("env".into(), Value::Object(env.collect()));
        let own = self
            .own_files
            .iter()
            .map(|p| Value::from(p.display().to_string()));
        spec.insert("ownFiles".into(), Value::Array(own.collect()));
        if let Some(hint) = &self.tools_hint {
            spec.insert("toolsHint".into(), Value::from(hint.clone()));
        }
        Value::Object(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses_and_every_entry_can_be_started() {
        let known = all();
        assert!(known.len() >= 8, "{known:#?}");
        for (id, agent) in known {
            assert!(!agent.command.is_empty(), "{id}");
            assert!(!agent.install.is_empty(), "{id}");
        }
    }
}

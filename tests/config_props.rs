//! The guard rails under random editor layers: whatever JSON the editor sends at (and around)
//! the keys of `agents`, `fs.allowOutsideWorkspace`, `review.autoAccept`,
//! `review.agents.*.autoAccept` and `mcp.enabled`, the policy in force is never looser than the
//! user's config file alone says.

use agentls::config::{Config, Layers};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Agent names the file and the layers talk about; `unnamed` appears in neither.
const NAMES: [&str; 4] = ["demo", "other", "mine", "unnamed"];

/// Keys that make up the paths of the layers' values.
const KEYS: [&str; 12] = [
    "autoAccept",
    "allowOutsideWorkspace",
    "enabled",
    "agents",
    "demo",
    "other",
    "review",
    "fs",
    "mcp",
    "maxPreviewLines",
    "command",
    "agentls",
];

/// Where the layers put values: every guard rail, its tables, and keys around them.
const PATHS: [&str; 17] = [
    "agents",
    "agents.demo",
    "agents.demo.command",
    "fs",
    "fs.allowOutsideWorkspace",
    "review",
    "review.autoAccept",
    "review.maxPreviewLines",
    "review.agents",
    "review.agents.demo",
    "review.agents.demo.autoAccept",
    "review.agents.other",
    "review.agents.other.autoAccept",
    "review.agents.mine.autoAccept",
    "mcp",
    "mcp.enabled",
    "defaultAgent",
];

/// Any JSON: mostly the wrong type for where it lands (such a layer must be left out whole).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-2i64..10).prop_map(Value::from),
        Just(json!(1.5)),
        prop::sample::select(vec!["true", "false", "1", "", "demo", "yes"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..4)
                .prop_map(object),
        ]
    })
}

/// JSON that often fits the schema where it lands: `null`, booleans, and arrays and tables of
/// them under the guard rails' keys (serde reads a table from an array too).
fn plausible_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        2 => Just(Value::Null),
        3 => any::<bool>().prop_map(Value::Bool),
        1 => Just(json!(3)),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS[..6].to_vec()), inner), 0..3)
                .prop_map(object),
        ]
    })
}

fn object(entries: Vec<(&str, Value)>) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

/// Puts `value` at the dotted `path` of `layer`, making the tables on the way.
fn put(layer: &mut Map<String, Value>, path: &str, value: Value) {
    let (head, rest) = match path.split_once('.') {
        Some((head, rest)) => (head, Some(rest)),
        None => (path, None),
    };
    match rest {
        None => {
            layer.insert(head.to_owned(), value);
        }
        Some(rest) => {
            let entry = layer
                .entry(head.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            put(entry.as_object_mut().unwrap(), rest, value);
        }
    }
}

/// An editor layer: values at some of [`PATHS`], or now and then any value at all.
fn layer() -> impl Strategy<Value = Option<Value>> {
    let value = prop_oneof![3 => plausible_value(), 1 => json_value()];
    let at_paths = prop::collection::vec((prop::sample::select(PATHS.to_vec()), value), 0..4)
        .prop_map(|entries| {
            let mut layer = Map::new();
            for (path, value) in entries {
                put(&mut layer, path, value);
            }
            Value::Object(layer)
        });
    prop_oneof![
        1 => Just(None),
        6 => at_paths.prop_map(Some),
        1 => json_value().prop_map(Some),
    ]
}

/// A user's config file that sets some of the guard rails, as TOML.
fn config_file() -> impl Strategy<Value = String> {
    let flag = || prop::option::of(any::<bool>());
    (
        flag(),
        flag(),
        flag(),
        prop::collection::vec((prop::sample::select(NAMES[..3].to_vec()), flag()), 0..3),
        any::<bool>(),
    )
        .prop_map(|(outside, auto_accept, mcp, overrides, with_agent)| {
            let mut toml = String::new();
            if with_agent {
                toml.push_str("[agents.mine]\ncommand = \"true\"\n");
            }
            if let Some(outside) = outside {
                toml.push_str(&format!("[fs]\nallowOutsideWorkspace = {outside}\n"));
            }
            toml.push_str("[review]\n");
            if let Some(auto_accept) = auto_accept {
                toml.push_str(&format!("autoAccept = {auto_accept}\n"));
            }
            let mut seen = Vec::new();
            for (name, value) in overrides {
                if seen.contains(&name) {
                    continue;
                }
                seen.push(name);
                toml.push_str(&format!("[review.agents.{name}]\n"));
                if let Some(value) = value {
                    toml.push_str(&format!("autoAccept = {value}\n"));
                }
            }
            if let Some(mcp) = mcp {
                toml.push_str(&format!("[mcp]\nenabled = {mcp}\n"));
            }
            toml
        })
}

/// Every way `config` is looser than `limits`, by key.
fn loosened(config: &Config, limits: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if config.agents.keys().ne(limits.agents.keys()) {
        out.push("agents".to_owned());
    }
    if config.fs.allow_outside_workspace && !limits.fs.allow_outside_workspace {
        out.push("fs.allowOutsideWorkspace".to_owned());
    }
    if config.review.auto_accept && !limits.review.auto_accept {
        out.push("review.autoAccept".to_owned());
    }
    for name in NAMES {
        if config.review.auto_accepts(name) && !limits.review.auto_accepts(name) {
            out.push(format!("review.agents.{name}.autoAccept"));
        }
    }
    if config.mcp.enabled && !limits.mcp.enabled {
        out.push("mcp.enabled".to_owned());
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn editor_layers_never_loosen_what_the_file_set(
        file in config_file(),
        initialization_options in layer(),
        settings in layer(),
        wrapped in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, &file).unwrap();
        let file_alone = Layers::with_file(Some(&path)).load();
        prop_assert!(file_alone.problems.is_empty(), "{file}: {:?}", file_alone.problems);
        let mut layers = Layers::with_file(Some(&path));
        layers.set_initialization_options(initialization_options.clone());
        if let Some(settings) = settings.clone() {
            let settings = if wrapped { json!({"agentls": settings}) } else { settings };
            layers.set_editor_settings(settings);
        }
        let loaded = layers.load();
        let looser = loosened(&loaded.config, &file_alone.config);
        prop_assert!(
            looser.is_empty(),
            "looser at {looser:?}\nfile:\n{file}\ninitializationOptions: {initialization_options:?}\n\
             settings: {settings:?}\nconfig: {:?}",
            loaded.config
        );
    }
}

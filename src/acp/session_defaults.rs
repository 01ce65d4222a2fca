//! Session defaults as data: `agents.<name>.mode` and `agents.<name>.configOptions`, applied to
//! every new session before its first prompt, and the check that a mode id is one the agent
//! offers (an unknown one gets a message listing the agent's modes, never a silent no-op).

use agent_client_protocol::v1::schema::{
    SessionId, SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use serde_json::Value;

use super::agent::{REQUEST_TIMEOUT, RunningAgent};
use super::error::AgentFailure;
use crate::editor::Level;

/// The mode ids a session offers (its `SessionModeState`, as sent); empty when it has none.
pub fn mode_ids(modes: Option<&Value>) -> Vec<String> {
    modes
        .and_then(|m| m["availableModes"].as_array())
        .map(|modes| {
            modes
                .iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Why `mode` cannot be set on a session offering `known` modes, or `None` when it can.
pub fn unknown_mode(mode: &str, known: &[String]) -> Option<String> {
    if known.iter().any(|m| m == mode) {
        return None;
    }
    Some(if known.is_empty() {
        format!("mode `{mode}` is not available: the agent offers no modes")
    } else {
        format!(
            "mode `{mode}` is not one of the agent's modes: {}",
            known.join(", ")
        )
    })
}

/// Puts the new session `session` in the configured mode and sets the configured options.
/// A default the agent does not offer is reported to the user, and the session goes on.
pub async fn apply(agent: &RunningAgent, session: &str) {
    let spec = agent.spec();
    let name = agent.name();
    let tell = |text: String| agent.link.editor.tell_user(Level::Warning, text);
    if let Some(mode) = &spec.mode {
        let (current, modes) = agent
            .link
            .with_session(session, |s| (s.current_mode.clone(), s.modes.clone()))
            .unwrap_or_default();
        if current.as_deref() != Some(mode.as_str()) {
            match unknown_mode(mode, &mode_ids(modes.as_ref())) {
                Some(why) => tell(format!("{name}: agents.{name}.mode: {why}")),
                None => {
                    if let Err(e) = set_mode(agent, session, mode).await {
                        tell(format!("{name}: could not set mode `{mode}`: {e}"));
                    }
                }
            }
        }
    }
    for (id, value) in &spec.config_options {
        if let Err(e) = set_config_option(agent, session, id, value).await {
            tell(format!("{name}: agents.{name}.configOptions.{id}: {e}"));
        }
    }
}

/// Sets `session`'s config option `id` to `value`; an option the agent does not offer is
/// refused with the ones it does.
pub async fn set_config_option(
    agent: &RunningAgent,
    session: &str,
    id: &str,
    value: &str,
) -> Result<(), AgentFailure> {
    let offered = agent
        .link
        .with_session(session, |s| option_ids(s.config_options.as_ref()))
        .unwrap_or_default();
    if !offered.iter().any(|o| o == id) {
        return Err(AgentFailure::NotOffered(if offered.is_empty() {
            format!("the agent offers no option `{id}`: it offers none")
        } else {
            format!(
                "the agent offers no option `{id}` (it offers: {})",
                offered.join(", ")
            )
        }));
    }
    let request = SetSessionConfigOptionRequest::new(SessionId::new(session), id.to_owned(), value);
    let response = agent
        .request(request, "session/set_config_option", Some(REQUEST_TIMEOUT))
        .await?;
    let options = serde_json::to_value(&response.config_options).ok();
    agent
        .link
        .with_session(session, |s| s.config_options = options);
    Ok(())
}

/// Switches `session` to `mode` (which the caller checked).
pub async fn set_mode(agent: &RunningAgent, session: &str, mode: &str) -> Result<(), AgentFailure> {
    let request = SetSessionModeRequest::new(SessionId::new(session), mode.to_owned());
    agent
        .request(request, "session/set_mode", Some(REQUEST_TIMEOUT))
        .await?;
    agent
        .link
        .with_session(session, |s| s.current_mode = Some(mode.to_owned()));
    Ok(())
}

/// The ids of a session's config options (as sent).
fn option_ids(options: Option<&Value>) -> Vec<String> {
    options
        .and_then(Value::as_array)
        .map(|options| {
            options
                .iter()
                .filter_map(|o| o["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unknown_mode_is_named_with_the_agents_modes() {
        let modes = json!({"currentModeId": "auto", "availableModes": [
            {"id": "auto", "name": "Auto"}, {"id": "default", "name": "Ask"}]});
        let known = mode_ids(Some(&modes));
        assert_eq!(known, ["auto", "default"]);
        assert_eq!(unknown_mode("default", &known), None);
        assert_eq!(
            unknown_mode("plan", &known).unwrap(),
            "mode `plan` is not one of the agent's modes: auto, default"
        );
        assert!(unknown_mode("x", &[]).unwrap().contains("offers no modes"));
    }
}

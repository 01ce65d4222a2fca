//! What a tool call ends in, before it becomes MCP: text blocks, or an error of one of three
//! classes (the caller's mistake, a tool we do not have, a failure the agent should read). The
//! first two are JSON-RPC errors with code -32602 (Invalid params): the MCP specification
//! (server/tools, "Error Handling") makes an unknown tool a protocol error and shows -32602 for
//! it; -32601 (Method not found) would say `tools/call` itself does not exist.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema (a JSON-RPC error).
    #[error("invalid arguments: {0}")]
    InvalidParams(String),
    /// No tool by that name (a JSON-RPC error).
    #[error("no tool named `{0}`")]
    UnknownTool(String),
    /// The tool ran and failed; the agent sees this text (`isError: true`).
    #[error("{0}")]
    Failed(String),
}

/// Text blocks, in order.
pub type ToolOutcome = Result<Vec<String>, ToolError>;

/// The MCP form of an outcome.
pub fn into_mcp(outcome: ToolOutcome) -> Result<CallToolResult, ErrorData> {
    match outcome {
        Ok(texts) => Ok(CallToolResult::success(
            texts.into_iter().map(ContentBlock::text).collect(),
        )),
        Err(ToolError::Failed(text)) => Ok(CallToolResult::error(vec![ContentBlock::text(text)])),
        Err(e @ (ToolError::InvalidParams(_) | ToolError::UnknownTool(_))) => {
            Err(ErrorData::invalid_params(e.to_string(), None))
        }
    }
}

/// Parses a tool's arguments.
pub fn parse<T: DeserializeOwned>(arguments: Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments).map_err(|e| ToolError::InvalidParams(e.to_string()))
}

/// One text block holding `value` as JSON.
pub fn json(value: &Value) -> ToolOutcome {
    Ok(vec![value.to_string()])
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorCode;

    use super::*;

    #[test]
    fn each_class_keeps_its_mcp_form() {
        let unknown = into_mcp(Err(ToolError::UnknownTool("executeCode".into()))).unwrap_err();
        assert_eq!(
            unknown.code,
            ErrorCode::INVALID_PARAMS,
            "MCP: unknown tool is -32602"
        );
        assert_eq!(unknown.message, "no tool named `executeCode`");
        let invalid = into_mcp(Err(ToolError::InvalidParams("missing `uri`".into()))).unwrap_err();
        assert_eq!(invalid.code, ErrorCode::INVALID_PARAMS);
        let failed = into_mcp(Err(ToolError::Failed("boom".into()))).unwrap();
        assert_eq!(failed.is_error, Some(true));
        let ok = into_mcp(Ok(vec!["a".into()])).unwrap();
        assert_eq!(ok.is_error, Some(false));
    }
}

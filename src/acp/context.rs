//! What goes along with a prompt: the user's text, and a file or selection as context — an
//! embedded `resource` where the agent advertised `embeddedContext`, else a `resource_link`
//! plus the text quoted in the prompt.

use std::path::PathBuf;

use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResource, EmbeddedResourceResource, ResourceLink, TextContent,
    TextResourceContents,
};

use crate::editor::{Range, file_name};

/// A prompt for an agent, as the host hands it over.
#[derive(Debug, Clone, Default)]
pub struct Prompt {
    /// The agent; the default agent when `None`.
    pub agent: Option<String>,
    /// What the user asks.
    pub text: String,
    /// Files or selections sent along.
    pub context: Vec<PromptContext>,
    /// The chat document the reply streams into, when the prompt came from one.
    pub chat: Option<std::path::PathBuf>,
    /// What agentls tells the agent along with it (e.g. the transcript of a resumed chat).
    pub note: Option<String>,
    /// The comment prompt it answers, which goes once the turn changed its file.
    pub comment: Option<AnsweredComment>,
}

/// A comment prompt a turn answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnsweredComment {
    /// Its file.
    pub path: std::path::PathBuf,
    /// Its line as written.
    pub line: String,
}

/// A file, or part of one, sent with a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptContext {
    /// The file.
    pub path: PathBuf,
    /// The selected range, or `None` for the whole file.
    pub range: Option<Range>,
    /// The text of the range (or of the whole file).
    pub text: String,
}

/// The prompt's content blocks, degraded to what the agent accepts.
pub fn blocks(text: &str, context: &[PromptContext], embedded: bool) -> Vec<ContentBlock> {
    let mut blocks = vec![ContentBlock::Text(TextContent::new(text))];
    for context in context {
        context_blocks(context, embedded, &mut blocks);
    }
    blocks
}

/// The blocks of one file or selection.
fn context_blocks(context: &PromptContext, embedded: bool, blocks: &mut Vec<ContentBlock>) {
    let uri = crate::file_uri::from_path(&context.path);
    let what = match context.range {
        Some(range) => format!(
            "Selected lines {}–{} of {}",
            u64::from(range.start.line) + 1,
            u64::from(range.end.line) + 1,
            context.path.display()
        ),
        None => format!("The file {}", context.path.display()),
    };
    if embedded {
        blocks.push(ContentBlock::Text(TextContent::new(format!("{what}:"))));
        blocks.push(ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::TextResourceContents(
                TextResourceContents::new(context.text.clone(), uri).mime_type("text/plain"),
            ),
        )));
    } else {
        blocks.push(ContentBlock::ResourceLink(ResourceLink::new(
            file_name(&context.path),
            uri,
        )));
        let fence = if context.text.contains("```") {
            "````"
        } else {
            "```"
        };
        blocks.push(ContentBlock::Text(TextContent::new(format!(
            "{what}:\n{fence}\n{}\n{fence}",
            context.text.trim_end_matches('\n')
        ))));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::editor::Position;

    fn context() -> PromptContext {
        PromptContext {
            path: PathBuf::from("/ws/a b.rs"),
            range: Some(Range::new(Position::new(2, 0), Position::new(4, 0))),
            text: "let x = 1;\n".into(),
        }
    }

    #[test]
    fn embedded_context_where_advertised() {
        let blocks = serde_json::to_value(blocks("explain", &[context()], true)).unwrap();
        assert_eq!(blocks[0], json!({"type": "text", "text": "explain"}));
        assert_eq!(blocks[1]["text"], "Selected lines 3–5 of /ws/a b.rs:");
        assert_eq!(
            blocks[2],
            json!({"type": "resource", "resource": {"uri": "file:///ws/a%20b.rs",
                   "text": "let x = 1;\n", "mimeType": "text/plain"}})
        );
    }

    #[test]
    fn a_link_and_quoted_text_otherwise() {
        let blocks = serde_json::to_value(blocks("explain", &[context()], false)).unwrap();
        assert_eq!(
            blocks[1],
            json!({"type": "resource_link", "name": "a b.rs", "uri": "file:///ws/a%20b.rs"})
        );
        assert_eq!(
            blocks[2]["text"],
            "Selected lines 3–5 of /ws/a b.rs:\n```\nlet x = 1;\n```"
        );
    }
}

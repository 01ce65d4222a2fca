//! What the user can do about pending agent business at a place in a document: the code
//! actions the host offers. Built from questions (and reviews) in the state.

use std::path::Path;

use serde::Serialize;

use super::position::Range;
use super::questions::ChoiceKind;
use super::state::State;

/// What running an action does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ActionCommand {
    /// Answer a question with one of its choices.
    Answer {
        /// The question.
        question: u64,
        /// The chosen answer's id.
        choice: String,
    },
    /// Accept or reject a review's hunk (or all its open hunks).
    Decide {
        /// The review.
        review: u64,
        /// One hunk, or all open ones.
        hunk: Option<usize>,
        /// Accept (else reject).
        accept: bool,
        /// Reject and ask the agent to propose again.
        rerequest: bool,
    },
    /// Send what the user wrote in a chat document to its agent.
    SendChat {
        /// The chat document.
        path: std::path::PathBuf,
    },
}

/// One action to offer, with its title.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserAction {
    /// What the user sees.
    pub title: String,
    /// What it does.
    pub command: ActionCommand,
}

impl State {
    /// The actions to offer for `range` of `path`: review changes there, then open questions,
    /// which are offered everywhere (the user should not have to find the right file to answer).
    pub fn actions(&self, path: &Path, range: Range) -> Vec<UserAction> {
        let mut actions = Vec::new();
        if let Some(agent) = self.chats.agent_of(path) {
            actions.push(UserAction {
                title: format!("Send to {agent}"),
                command: ActionCommand::SendChat {
                    path: path.to_owned(),
                },
            });
        }
        actions.extend(self.review_actions(path, range));
        actions.extend(self.question_actions());
        actions
    }

    fn question_actions(&self) -> Vec<UserAction> {
        self.questions
            .open()
            .flat_map(|question| {
                question.choices.iter().map(move |choice| {
                    let verb = match choice.kind {
                        ChoiceKind::Allow => "Allow",
                        ChoiceKind::Reject => "Reject",
                    };
                    UserAction {
                        title: format!(
                            "{verb} ({}): {} — {}",
                            choice.label, question.origin.label, question.text
                        ),
                        command: ActionCommand::Answer {
                            question: question.id,
                            choice: choice.id.clone(),
                        },
                    }
                })
            })
            .collect()
    }
}

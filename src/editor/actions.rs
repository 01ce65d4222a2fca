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
    /// The actions to offer for `range` of `path`. Open questions are offered everywhere: the
    /// user should not have to find the right file to answer one.
    pub fn actions(&self, _path: &Path, _range: Range) -> Vec<UserAction> {
        self.questions
            .open()
            .iter()
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

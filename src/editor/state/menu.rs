//! The code-action menu: what the user can do about pending agent business at a place in a
//! document (review changes there, then open questions, which are offered everywhere).

use super::State;
use crate::editor::actions::{ActionCommand, UserAction};
use crate::editor::documents::position::Range;
use crate::editor::file_names::file_name;
use crate::editor::questions::ChoiceKind;
use crate::editor::review::ReviewKind;
use crate::editor::review::decision::{Choice, Decision};
use std::path::Path;

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
            if self.chats.turn_running(path) {
                actions.push(UserAction {
                    title: format!("Stop {agent}"),
                    command: ActionCommand::Stop {
                        agent: agent.to_owned(),
                    },
                });
            }
            actions.extend(self.chat_review_actions(agent));
            actions.extend(self.turn_undo_actions(agent));
        }
        actions.extend(self.review_actions(path, range));
        actions.extend(self.question_actions());
        actions
    }

    /// *Open `agent`'s chat*, in a file that is not a chat, for each chat answering a prompt
    /// from elsewhere that the user has not opened since it got text: the way to the answer
    /// in every editor (the prompt's message names the file; this goes there).
    pub fn open_chat_actions(&self, path: &Path) -> Vec<UserAction> {
        if self.chats.agent_of(path).is_some() {
            return Vec::new();
        }
        self.chats
            .unread()
            .filter(|(chat, _)| self.documents.get(chat).is_none())
            .map(|(chat, agent)| UserAction {
                title: format!("Open {agent}'s chat ({})", file_name(chat)),
                command: ActionCommand::OpenChat {
                    agent: agent.to_owned(),
                },
            })
            .collect()
    }

    /// *Ask `agent` about this*, on a selection (a range that is not empty: Helix's always
    /// covers a character) of a file that is not a chat.
    pub fn ask_action(&self, path: &Path, range: Range, agent: &str) -> Option<UserAction> {
        let selected = range.start != range.end;
        let file = self.chats.agent_of(path).is_none() && self.documents.get(path).is_some();
        (selected && file).then(|| UserAction {
            title: format!("Ask {agent} about this"),
            command: ActionCommand::AskAbout {
                agent: agent.to_owned(),
                path: path.to_owned(),
                range,
            },
        })
    }

    /// In a chat with `agent`: for each of its proposals still open, show it, accept it all or
    /// reject it all, from where the user reads the conversation.
    fn chat_review_actions(&self, agent: &str) -> Vec<UserAction> {
        let proposals = self.reviews.iter().filter(|r| {
            r.origin.label == agent && r.kind == ReviewKind::Proposal && r.open_count() > 0
        });
        proposals
            .flat_map(|review| {
                let (file, open) = (file_name(&review.path), review.open_count());
                let acceptable = review.acceptable_count();
                let all = |choice| ActionCommand::Decide(Decision::all(review.id, choice));
                let show = UserAction {
                    title: format!("Show {agent}'s change to {file} ({open} open)"),
                    command: ActionCommand::ShowReview { review: review.id },
                };
                // Changes in conflict with the user's edits cannot be accepted.
                let accept = (acceptable > 0).then(|| UserAction {
                    title: format!("Accept all changes ({acceptable}) from {agent} to {file}"),
                    command: all(Choice::Accept),
                });
                let reject = UserAction {
                    title: format!("Reject all changes ({open}) from {agent} to {file}"),
                    command: all(Choice::Reject),
                };
                std::iter::once(show).chain(accept).chain([reject])
            })
            .collect()
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

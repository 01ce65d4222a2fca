//! Questions an agent puts to the user that are not diffs ("run `cargo test`?", "fetch this
//! URL?"). Editors that can show a dialog get `window/showMessageRequest` (the host decides);
//! for the others the question waits here and is offered as code actions until answered.

use serde::Serialize;
use tokio::sync::oneshot;

use super::Origin;

/// Whether a choice lets the agent go ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ChoiceKind {
    /// Lets the agent proceed.
    Allow,
    /// Stops the agent.
    Reject,
}

/// One answer the user may give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Choice {
    /// What the agent calls this answer.
    pub id: String,
    /// What the user sees.
    pub label: String,
    /// Allow or reject.
    pub kind: ChoiceKind,
}

/// A question waiting for the user.
#[derive(Debug)]
pub struct Question {
    /// Identifies the question in commands.
    pub id: u64,
    /// Who asks.
    pub origin: Origin,
    /// The question.
    pub text: String,
    /// The possible answers.
    pub choices: Vec<Choice>,
    reply: oneshot::Sender<Option<String>>,
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The question was answered already or its asker is gone.
    #[error("question {0} is no longer open")]
    NotOpen(u64),
    /// The choice is not one the question offered.
    #[error("question {0} has no choice `{1}`")]
    NoSuchChoice(u64, String),
}

/// Open questions, oldest first.
#[derive(Debug, Default)]
pub struct Questions {
    next_id: u64,
    open: Vec<Question>,
}

impl Questions {
    /// Adds a question; the answer (a choice id) goes to `reply`. Returns its id.
    pub fn ask(
        &mut self,
        origin: Origin,
        text: String,
        choices: Vec<Choice>,
        reply: oneshot::Sender<Option<String>>,
    ) -> u64 {
        self.next_id += 1;
        self.open.push(Question {
            id: self.next_id,
            origin,
            text,
            choices,
            reply,
        });
        self.next_id
    }

    /// Answers question `id` with `choice`.
    pub fn answer(&mut self, id: u64, choice: &str) -> Result<(), AnswerError> {
        self.open.retain(|q| !q.reply.is_closed());
        let index = self
            .open
            .iter()
            .position(|q| q.id == id)
            .ok_or(AnswerError::NotOpen(id))?;
        if !self.open[index].choices.iter().any(|c| c.id == choice) {
            return Err(AnswerError::NoSuchChoice(id, choice.to_owned()));
        }
        let question = self.open.remove(index);
        let _ = question.reply.send(Some(choice.to_owned()));
        Ok(())
    }

    /// Drops every question `origin` asked (its asker sees "cancelled"); returns how many.
    pub fn cancel_origin(&mut self, origin: &Origin) -> usize {
        let before = self.open.len();
        self.open.retain(|q| q.origin != *origin);
        before - self.open.len()
    }

    /// The open questions, oldest first; a question whose asker stopped waiting (the agent
    /// withdrew it) is no longer open.
    pub fn open(&self) -> impl Iterator<Item = &Question> {
        self.open.iter().filter(|q| !q.reply.is_closed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(key: &str) -> Origin {
        Origin::new(key, key)
    }

    fn choices() -> Vec<Choice> {
        vec![
            Choice {
                id: "yes".into(),
                label: "Allow".into(),
                kind: ChoiceKind::Allow,
            },
            Choice {
                id: "no".into(),
                label: "Reject".into(),
                kind: ChoiceKind::Reject,
            },
        ]
    }

    #[test]
    fn an_answer_reaches_the_asker_once() {
        let mut questions = Questions::default();
        let (tx, mut rx) = oneshot::channel();
        let id = questions.ask(origin("a"), "run?".into(), choices(), tx);
        assert_eq!(
            questions.answer(id, "maybe"),
            Err(AnswerError::NoSuchChoice(id, "maybe".into()))
        );
        questions.answer(id, "no").unwrap();
        assert_eq!(rx.try_recv().unwrap(), Some("no".into()));
        assert_eq!(questions.answer(id, "no"), Err(AnswerError::NotOpen(id)));
    }

    #[test]
    fn a_dead_origin_cancels_its_questions_only() {
        let mut questions = Questions::default();
        let (tx_a, mut rx_a) = oneshot::channel();
        let (tx_b, _rx_b) = oneshot::channel();
        questions.ask(origin("a"), "?".into(), choices(), tx_a);
        questions.ask(origin("b"), "?".into(), choices(), tx_b);
        assert_eq!(questions.cancel_origin(&origin("a")), 1);
        assert!(rx_a.try_recv().is_err());
        assert_eq!(questions.open().count(), 1);
    }
}

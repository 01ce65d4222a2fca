//! Questions an agent puts to the user that are not diffs ("run `cargo test`?", "fetch this
//! URL?"). Editors that can show a dialog get `window/showMessageRequest` (the host decides);
//! for the others the question waits here and is offered as code actions until answered.

use serde::Serialize;
use tokio::sync::oneshot;

use super::origin::Origin;

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

/// How many questions one origin may have waiting for the user at once (in dialogs or as code
/// actions); more are answered "no" at once, so a flood of questions cannot flood the editor.
pub const MAX_WAITING_PER_ORIGIN: usize = 10;

/// Open questions, oldest first.
#[derive(Debug, Default)]
pub struct Questions {
    next_id: u64,
    open: Vec<Question>,
    /// Questions waiting for the user, dialogs included, by origin key.
    waiting: std::collections::HashMap<String, usize>,
    /// Origins told their questions are refused, until they are under the cap again.
    told: std::collections::HashSet<String>,
}

/// Whether an origin's question may go to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It may; [`Questions::leave`] when it is answered.
    Admitted,
    /// It may not: the origin has [`MAX_WAITING_PER_ORIGIN`] waiting. `tell`: the first such
    /// refusal since it was under the cap, to be told to the user.
    Refused {
        /// Whether to tell the user.
        tell: bool,
    },
}

impl Questions {
    /// A question of `origin` is about to be asked: admitted while it has fewer than
    /// [`MAX_WAITING_PER_ORIGIN`] waiting.
    pub fn admit(&mut self, origin: &str) -> Admission {
        let waiting = self.waiting.entry(origin.to_owned()).or_default();
        if *waiting < MAX_WAITING_PER_ORIGIN {
            *waiting += 1;
            self.told.remove(origin);
            return Admission::Admitted;
        }
        Admission::Refused {
            tell: self.told.insert(origin.to_owned()),
        }
    }

    /// An admitted question of `origin` was answered (or given up).
    pub fn leave(&mut self, origin: &str) {
        if let Some(waiting) = self.waiting.get_mut(origin) {
            *waiting = waiting.saturating_sub(1);
            if *waiting == 0 {
                self.waiting.remove(origin);
            }
        }
    }

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

    /// A flood of questions from one origin: ten wait in dialogs, the other five are answered
    /// no at once, with one message; another origin still asks; an answered one makes room.
    #[tokio::test(start_paused = true)]
    async fn one_origin_has_at_most_ten_questions_waiting() {
        use crate::editor::documents::effects::Effect;
        let (editor, _feed, mut effects) = crate::editor::start();
        let ask = |key: &'static str| {
            let editor = editor.clone();
            tokio::spawn(async move { editor.ask_user(&origin(key), "run?", choices()).await })
        };
        let mut asks: Vec<_> = (0..MAX_WAITING_PER_ORIGIN + 5)
            .map(|_| ask("flood"))
            .collect();
        let mut dialogs = Vec::new();
        let mut told = 0;
        while dialogs.len() < MAX_WAITING_PER_ORIGIN || told == 0 {
            // (The clock is paused: this times out only when nothing else can happen.)
            let effect = tokio::time::timeout(std::time::Duration::from_secs(5), effects.recv());
            match effect.await.expect("ten dialogs and one message").unwrap() {
                Effect::AskUser { reply, .. } => dialogs.push(reply),
                Effect::Message { text, .. } if text.contains("further questions") => told += 1,
                _ => {}
            }
        }
        assert_eq!(
            dialogs.len(),
            MAX_WAITING_PER_ORIGIN,
            "more dialogs than the cap"
        );
        // The refused ones end without the user; the admitted ones wait for their dialogs.
        let mut refused = Vec::new();
        while refused.len() < 5 {
            if let Some(i) = asks.iter().position(|a| a.is_finished()) {
                refused.push(asks.remove(i).await.unwrap());
            } else {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(refused, vec![None; 5]);
        assert_eq!(dialogs.len(), MAX_WAITING_PER_ORIGIN);
        // Another origin is not held back.
        let other = ask("calm");
        let reply = loop {
            if let Effect::AskUser { reply, .. } = effects.recv().await.unwrap() {
                break reply;
            }
        };
        let _ = reply.send(Ok(Some("yes".into())));
        assert_eq!(other.await.unwrap().as_deref(), Some("yes"));
        // The user answers the ten; the flood may ask again.
        for dialog in dialogs {
            let _ = dialog.send(Ok(Some("yes".into())));
        }
        for waiting in asks {
            assert_eq!(waiting.await.unwrap().as_deref(), Some("yes"));
        }
        let again = ask("flood");
        loop {
            match effects.recv().await.unwrap() {
                Effect::AskUser { reply, .. } => {
                    let _ = reply.send(Ok(Some("no".into())));
                    break;
                }
                Effect::Message { text, .. } => assert!(!text.contains("further"), "{text}"),
                _ => {}
            }
        }
        assert_eq!(again.await.unwrap().as_deref(), Some("no"));
        assert_eq!(told, 1);
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

//! Property: an agent's accepted change lands exactly once, and nothing the user typed is lost.
//! The port runs for real (its state task, reviews, settlement) against an in-process editor
//! that applies `workspace/applyEdit` and reports `didChange`. For random files, proposals, user
//! insertions (while the review is open and between the verdict and the agent's write) and
//! per-hunk decisions, user saves, the agent writes as real edit tools do (what it reads, with
//! its change), through the port or straight to disk; then the buffer without the user's lines
//! is the base with exactly the accepted hunks, every user line is there once, and the disk is
//! what the user last saved (agentls never writes an open file) — or, when the agent wrote the
//! disk itself, that with the accepted hunks only. 10,000 cases through the port and 400 to
//! disk by default (`PROPTEST_CASES` to change).

// The test client's position math; the rest of it serves the other tests.
#[allow(dead_code)]
#[path = "support/text.rs"]
mod text;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentls::editor::review::decision::{Choice, Decision};
use agentls::editor::{
    self, EditorAccess, EditorFeed, Effect, Origin, Position, Range, Terms, TextChange, Verdict,
    diff,
};
use proptest::prelude::*;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("fn a() {}\n".to_owned()),
        Just("let x = 1;\n".to_owned()),
        Just("}\n".to_owned()),
        Just("// note\n".to_owned()),
        "[a-z]{1,6}\n",
    ]
}

/// A base text and a proposal made of line edits of it.
fn base_and_proposal() -> impl Strategy<Value = (String, String)> {
    (
        prop::collection::vec(line(), 1..12),
        prop::collection::vec((0usize..3, any::<prop::sample::Index>(), line()), 1..5),
    )
        .prop_map(|(lines, edits)| {
            let base = lines.concat();
            let mut new = lines;
            for (kind, at, text) in edits {
                let i = at.index(new.len() + 1);
                match kind {
                    0 => new.insert(i, text),
                    1 if i < new.len() => new[i] = text,
                    _ if i < new.len() => {
                        new.remove(i);
                    }
                    _ => {}
                }
            }
            (base, new.concat())
        })
}

/// What the user does: type a line of their own at a base line boundary, or decide a hunk.
#[derive(Debug, Clone)]
enum Step {
    Type(prop::sample::Index),
    Decide(prop::sample::Index, bool),
    /// The user saves: the buffer to the file, then `didSave`.
    Save,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Step::Type),
        (any::<prop::sample::Index>(), any::<bool>()).prop_map(|(i, a)| Step::Decide(i, a)),
        Just(Step::Save),
    ]
}

/// The editor: the buffer as the client has it, kept in step with the port.
#[derive(Debug, Default)]
struct Client {
    text: String,
    version: i32,
    /// The base line boundary each user line was typed at, in typing order.
    typed: Vec<usize>,
}

/// Byte offset of `at` in `text` (the user's marker lines are not ASCII).
fn offset(text: &str, at: Position) -> usize {
    let at = serde_json::to_value(at).expect("a position is JSON");
    text::offset(text, &at, text::Encoding::Utf16)
}

/// Applies the port's edits as an editor does and reports them back as `didChange`.
async fn run_editor(
    mut effects: editor::EffectReceiver,
    feed: EditorFeed,
    client: Arc<Mutex<Client>>,
    path: PathBuf,
) {
    while let Some(effect) = effects.recv().await {
        let Effect::ApplyEdit { edit, reply } = effect else {
            continue;
        };
        let mut c = client.lock().unwrap();
        let mut edits = edit.edits.clone();
        edits.sort_by_key(|e| std::cmp::Reverse((e.range.start.line, e.range.start.character)));
        let mut changes = Vec::new();
        for e in edits {
            let (s, t) = (offset(&c.text, e.range.start), offset(&c.text, e.range.end));
            c.text.replace_range(s..t, &e.new_text);
            changes.push(TextChange {
                range: Some(e.range),
                text: e.new_text,
            });
        }
        c.version += 1;
        feed.changed(path.clone(), c.version, changes);
        let _ = reply.send(Ok(()));
    }
}

/// The user types the marker line `n` at base line boundary `boundary`.
fn type_line(client: &Mutex<Client>, feed: &EditorFeed, path: &Path, boundary: usize) {
    let mut c = client.lock().unwrap();
    let n = c.typed.len();
    // Its line now: the boundary, plus the user's lines typed at or before it.
    let line = boundary + c.typed.iter().filter(|&&b| b <= boundary).count();
    let at = Position::new(line as u32, 0);
    let marker = format!("«typed {n}»\n");
    let byte = offset(&c.text, at);
    c.text.insert_str(byte, &marker);
    c.typed.push(boundary);
    c.version += 1;
    feed.changed(
        path.to_path_buf(),
        c.version,
        vec![TextChange {
            range: Some(Range::new(at, at)),
            text: marker,
        }],
    );
}

/// `text` without the user's marker lines.
fn without_typed(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|l| !l.starts_with("«typed "))
        .collect()
}

/// How the agent's edit tool writes once allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Reads and writes through the port (`fs/read_text_file`, `fs/write_text_file`).
    Port,
    /// Reads and writes the disk itself.
    Disk,
}

async fn one_case(
    base: String,
    proposal: String,
    steps: Vec<Step>,
    late: Vec<prop::sample::Index>,
    route: Route,
) {
    let hunks = diff::line_hunks(&base, &proposal);
    if hunks.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.rs");
    std::fs::write(&path, &base).unwrap();
    let (access, feed, effects): (EditorAccess, EditorFeed, _) = editor::start();
    feed.folders_changed(vec![dir.path().to_path_buf()], Vec::new());
    let client = Arc::new(Mutex::new(Client {
        text: base.clone(),
        ..Client::default()
    }));
    feed.opened(path.clone(), base.clone(), 0, "rust".into());
    tokio::spawn(run_editor(
        effects,
        feed.clone(),
        Arc::clone(&client),
        path.clone(),
    ));
    let origin = Origin::new("acp:agent:1", "agent");
    let review = {
        let (access, origin, path, proposal) = (
            access.clone(),
            origin.clone(),
            path.clone(),
            proposal.clone(),
        );
        tokio::spawn(async move {
            access
                .review_diff(&origin, &path, &proposal, "t", Terms::APPLIED_BY_PROPOSER)
                .await
        })
    };
    let id = loop {
        let id = feed
            .query(|s| s.reviews().iter().next().map(|r| r.id))
            .await
            .unwrap();
        if let Some(id) = id {
            break id;
        }
        tokio::task::yield_now().await;
    };
    // Boundaries the user may type at without touching a hunk's old lines.
    let lines = base.split_inclusive('\n').count();
    let allowed: Vec<usize> = (0..=lines)
        .filter(|&b| {
            !hunks
                .iter()
                .any(|h| h.old_lines.start < b && b < h.old_lines.end)
        })
        .collect();
    let mut decided = vec![None; hunks.len()];
    // What the file says: agentls never writes an open document's file, only the user's saves.
    let mut saved = base.clone();
    for step in steps {
        match step {
            Step::Type(at) => type_line(&client, &feed, &path, allowed[at.index(allowed.len())]),
            Step::Save => {
                saved = client.lock().unwrap().text.clone();
                std::fs::write(&path, &saved).unwrap();
                feed.saved(path.clone());
            }
            Step::Decide(i, accept) => {
                let i = i.index(hunks.len());
                if decided[i].is_none() {
                    decided[i] = Some(accept);
                    let choice = if accept {
                        Choice::Accept
                    } else {
                        Choice::Reject
                    };
                    let decision = Decision {
                        review: id,
                        hunk: Some(i),
                        choice,
                    };
                    feed.query(move |s| s.decide(decision))
                        .await
                        .unwrap()
                        .unwrap();
                }
            }
        }
    }
    for (i, d) in decided.iter_mut().enumerate() {
        if d.is_none() {
            *d = Some(false);
            let decision = Decision {
                review: id,
                hunk: Some(i),
                choice: Choice::Reject,
            };
            feed.query(move |s| s.decide(decision))
                .await
                .unwrap()
                .unwrap();
        }
    }
    let verdict = review.await.unwrap().unwrap();
    let accepted: Vec<bool> = decided.into_iter().map(Option::unwrap).collect();
    // The base with exactly the accepted hunks.
    let mut expected = String::new();
    let mut at = 0;
    for (h, &yes) in hunks.iter().zip(&accepted) {
        expected.push_str(&base[at..h.old.start]);
        expected.push_str(if yes {
            &proposal[h.new.clone()]
        } else {
            &base[h.old.clone()]
        });
        at = h.old.end;
    }
    expected.push_str(&base[at..]);
    if let Verdict::Accepted { .. } = verdict {
        // The agent's edit tool: read the file, then more typing, then write its change.
        let read = match route {
            Route::Port => access.read_text_file(&path, None, None).await.unwrap(),
            Route::Disk => std::fs::read_to_string(&path).unwrap(),
        };
        for at in late {
            type_line(&client, &feed, &path, allowed[at.index(allowed.len())]);
        }
        let content = diff::merge3(&base, &read, &proposal).unwrap_or_else(|| proposal.clone());
        match route {
            Route::Port => {
                access
                    .write_text_file(&origin, &path, &content, Some(&read))
                    .await
                    .unwrap();
            }
            Route::Disk => {
                std::fs::write(&path, &content).unwrap();
                settled(&feed, id).await;
                // What agentls makes of the disk: the agent's write turned into the accepted
                // hunks, on the file as the user last saved it.
                saved = diff::merge3(&base, &saved, &expected).unwrap_or(saved);
            }
        }
    } else {
        assert!(accepted.iter().all(|a| !a), "{verdict:?}");
    }
    {
        let c = client.lock().unwrap();
        assert_eq!(without_typed(&c.text), expected, "buffer {:?}", c.text);
        for n in 0..c.typed.len() {
            assert_eq!(
                c.text.matches(&format!("«typed {n}»\n")).count(),
                1,
                "{:?}",
                c.text
            );
        }
    }
    // agentls's correction of an agent's disk write goes out just after the review settles.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while route == Route::Disk
        && std::fs::read_to_string(&path).unwrap() != saved
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), saved);
}

/// Waits until review `id` is settled and gone, and its edit in the buffer.
async fn settled(feed: &EditorFeed, id: agentls::editor::review::ReviewId) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while feed
        .query(move |s| s.reviews().iter().any(|r| r.id == id))
        .await
        .unwrap()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent's disk write did not settle review {id}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// Cases for the disk route: each waits for the workspace watcher (inotify plus its 30 ms
/// batching, or its 1 s look when a case writes before its watch is set up), so a 25th of the
/// port route's.
fn disk_config() -> ProptestConfig {
    let port = config();
    ProptestConfig {
        cases: (port.cases / 25).max(1),
        ..port
    }
}

proptest! {
    #![proptest_config(config())]
    #[test]
    fn accepted_hunks_land_once_and_typing_survives(
        (base, proposal) in base_and_proposal(),
        steps in prop::collection::vec(step(), 0..8),
        late in prop::collection::vec(any::<prop::sample::Index>(), 0..3),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(one_case(base, proposal, steps, late, Route::Port));
    }
}

proptest! {
    #![proptest_config(disk_config())]
    #[test]
    fn accepted_hunks_written_to_disk_land_once_and_typing_survives(
        (base, proposal) in base_and_proposal(),
        steps in prop::collection::vec(step(), 0..8),
        late in prop::collection::vec(any::<prop::sample::Index>(), 0..3),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let case = one_case(base, proposal, steps, late, Route::Disk);
        // A case that hangs is a failure, shrunk like any other.
        runtime
            .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(40), case).await })
            .expect("the case hung");
    }
}

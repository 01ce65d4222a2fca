//! A real Helix (25.07, `../shared/tools/helix/`) in tmux, with no plugin, as a user drives it:
//! prompt the demo agent from the command line, type an unsaved line, accept the first change
//! with `space a`, reject the second, and save. Checks the screen (the agent's tool succeeded,
//! the buffer holds the accepted change and the typed line), the disk (untouched until the
//! save), and that a plain `:w` saves (no "modified by an external process", no `:w!`).
//!
//! Helix comes from `AGENTLS_TEST_HELIX` and tmux from `AGENTLS_TEST_TMUX`
//! (`eval "$(scripts/test-tools.sh)"`). The tests are ignored without the feature `real-peers`
//! (scripts/test.sh turns it on); with it, a missing peer fails its test.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::peers::{self, Sandbox};
use support::tmux::{SCREEN_WAIT, Tmux};

const NOTES: &str = "keep\n// TODO fix me\nx\nx\nx\nx\nx\n// TODO two\n";

/// The shipped `editors/helix/config.toml`, checked to be the block its README shows.
fn shipped_config_toml() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("editors/helix");
    let shipped = std::fs::read_to_string(dir.join("config.toml")).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let shown = readme.split("```toml\n").skip(1).map(|rest| {
        let block = rest.split("```").next().unwrap();
        // The block sits in a numbered list: its lines are indented by the list's three spaces.
        let body: Vec<&str> = block
            .lines()
            .map(|line| line.strip_prefix("   ").unwrap_or(line))
            .collect();
        body.join("\n").trim_end().to_owned() + "\n"
    });
    assert!(
        shown.into_iter().any(|block| block == shipped),
        "editors/helix/README.md does not show config.toml as it is"
    );
    shipped
}

/// The `[language-server.agentls]` section of `editors/helix/languages.toml`, comments left out.
fn shipped_server_section() -> String {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("editors/helix/languages.toml");
    let shipped = std::fs::read_to_string(shipped).unwrap();
    let section: Vec<&str> = shipped
        .lines()
        .skip_while(|line| *line != "[language-server.agentls]")
        .take_while(|line| !line.starts_with("[["))
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    assert!(
        !section.is_empty(),
        "no [language-server.agentls] in languages.toml"
    );
    section.join("\n") + "\n"
}

/// One Helix in its own tmux server.
struct Helix {
    screen: Tmux,
}

impl Helix {
    /// Helix on `file`, configured as `editors/helix/README.md` says: its `config.toml` block,
    /// and the `[language-server.agentls]` section of the shipped `languages.toml` (the command
    /// made this build's binary, with a log file), for rust and markdown.
    fn start(tmux: &Path, hx: &Path, sandbox: &Sandbox, file: &str) -> Self {
        let config = sandbox.root.join("config/helix");
        std::fs::create_dir_all(&config).unwrap();
        let server = env!("CARGO_BIN_EXE_agentls");
        let log = sandbox.root.join("agentls.log");
        let section = shipped_server_section().replace(
            "command = \"agentls\"",
            &format!(
                "command = {server:?}\nargs = [\"--log-file\", {:?}]",
                log.display().to_string()
            ),
        );
        assert!(
            section.contains(server),
            "no `command = \"agentls\"` in:\n{section}"
        );
        std::fs::write(
            config.join("languages.toml"),
            format!(
                "{section}\n[[language]]\nname = \"rust\"\nlanguage-servers = [\"agentls\"]\n\n\
                 [[language]]\nname = \"markdown\"\nlanguage-servers = [\"agentls\"]\n"
            ),
        )
        .unwrap();
        std::fs::write(config.join("config.toml"), shipped_config_toml()).unwrap();
        let runtime = sandbox.root.join("hx-runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        let shell = format!(
            "cd {:?} && env HOME={:?} XDG_CONFIG_HOME={:?} HELIX_RUNTIME={:?} {:?} {file}",
            sandbox.workspace,
            sandbox.root.join("home"),
            sandbox.root.join("config"),
            runtime,
            hx
        );
        Self {
            screen: Tmux::start(tmux, &shell, 120, 100),
        }
    }

    fn keys(&self, keys: &[&str]) {
        self.screen.keys(keys);
    }

    fn type_text(&self, text: &str) {
        self.screen.type_text(text);
    }

    fn screen(&self) -> String {
        self.screen.screen()
    }

    /// Waits until agentls is attached and initialized: the workspace command picker lists
    /// its commands (before that, Helix has none to run, and a typed command is lost).
    fn wait_for_server(&self) {
        let deadline = Instant::now() + SCREEN_WAIT;
        loop {
            self.type_text(":lsp-workspace-command");
            self.keys(&["Enter"]);
            let listed = (0..40).any(|_| {
                std::thread::sleep(Duration::from_millis(50));
                self.screen().contains("agentls.openChat")
            });
            self.keys(&["Escape"]);
            // Until Helix has taken the Escape, a key sent now would arrive right behind it
            // and be read with it as one Alt chord (Escape then `:` is Alt-:).
            self.wait_until("the picker closed", |screen| {
                !screen.contains("agentls.openChat") && screen.contains(" NOR ")
            });
            if listed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "agentls never attached:\n{}",
                self.screen()
            );
        }
    }

    /// From insert mode, back to normal mode: Escape once Helix shows insert mode (so the mode
    /// seen after it is the new one), then waits for normal mode. A key sent before Helix has
    /// taken the Escape would be read with it as one Alt chord (Escape then `2` is Alt-2).
    fn to_normal_mode(&self) {
        self.wait_for(" INS ");
        self.keys(&["Escape"]);
        self.wait_for(" NOR ");
    }

    fn wait_for(&self, needle: &str) -> String {
        self.screen.wait_for(needle)
    }

    fn wait_until(&self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        self.screen.wait_until(what, wanted)
    }
}

impl Helix {
    /// Prints the screen, and keeps it as `<name>.txt` in `$AGENTLS_TEST_CAPTURES` when that is set.
    fn capture(&self, name: &str) -> String {
        let screen = self.screen();
        eprintln!("--- {name} ---\n{screen}");
        let dir = std::env::var_os("AGENTLS_TEST_CAPTURES").map(PathBuf::from);
        Tmux::save(dir.as_deref(), name, &screen);
        screen
    }
}

/// The session `editors/helix/README.md` describes, with its keys: `space i c` opens a chat, a
/// message typed under `## You` goes with `space i s`, the reply streams in; the proposal it
/// makes opens its file, one change is accepted and one rejected with `space a`, an unsaved line
/// of the user's stays, and the file is left to Helix's save; `space i a` on selected lines
/// quotes them in the chat; `:wa` and `:qa` end Helix without a complaint (no `:w!`), with
/// exactly the accepted change on disk.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn helix_session_as_its_readme_describes() {
    let hx = peers::binary("AGENTLS_TEST_HELIX", "Helix");
    let tmux = peers::binary("AGENTLS_TEST_TMUX", "tmux");
    let sandbox = Sandbox::create();
    let notes = sandbox.workspace.join("notes.rs");
    std::fs::write(&notes, NOTES).unwrap();
    let helix = Helix::start(&tmux, &hx, &sandbox, "notes.rs");
    helix.wait_for("1  keep");
    helix.wait_for_server();
    helix.keys(&["Space", "i", "c"]);
    helix.wait_for("# Chat with demo");
    helix.keys(&["g", "e", "i"]);
    helix.type_text("uppercase notes.rs");
    helix.to_normal_mode();
    helix.keys(&["Space", "i", "s"]);
    // The reply streams into the chat; its proposal opens notes.rs.
    let in_file = |screen: &str| screen.contains("1  keep") && !screen.contains("# Chat with demo");
    helix.wait_until("notes.rs shown with the proposal", in_file);
    helix.wait_for("demo proposes 2 changes to notes.rs");
    // An unsaved line of the user's, between the two changes.
    helix.keys(&["4", "g", "g", "o"]);
    helix.type_text("mine");
    helix.to_normal_mode();
    helix.wait_for("5  mine");
    helix.keys(&["2", "g", "g"]);
    helix.capture("helix-1-review");
    helix.keys(&["Space", "a"]);
    helix.wait_for("Accept change 1/2 from demo");
    helix.keys(&["Enter"]);
    helix.wait_for("ACCEPTED");
    helix.keys(&["9", "g", "g", "Space", "a"]);
    helix.wait_for("Reject change 2/2 from demo");
    helix.keys(&["Down", "Enter"]);
    let screen = helix.wait_for("Done: I uppercase the TODO lines of notes.rs");
    assert!(
        screen.contains("// TODO FIX ME") && screen.contains("9  // TODO two"),
        "{screen}"
    );
    helix.capture("helix-2-decided");
    // The accepted change is in Helix's buffer; agentls left the file to Helix's own save.
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), NOTES);
    // Back in the chat (`ga`): the whole reply, to the end of the turn.
    helix.keys(&["g", "a"]);
    helix.wait_for("_demo: end_turn");
    let screen = helix.capture("helix-3-chat");
    for line in [
        "Hello from the demo agent.",
        "✓ Read notes.rs",
        "demo proposes",
    ] {
        assert!(screen.contains(line), "{line:?} not in the chat:\n{screen}");
    }
    // Ask about the first line of notes.rs: it is quoted in the chat, which comes to the front.
    helix.keys(&["g", "a"]);
    helix.wait_until("notes.rs again", in_file);
    helix.keys(&["1", "g", "g", "x", "Space", "i", "a"]);
    helix.wait_for("@notes.rs#L1:");
    helix.capture("helix-4-ask-about");
    helix.type_text(":wa");
    helix.keys(&["Enter"]);
    let screen = helix.wait_until("both buffers written", |screen| {
        screen.contains("written") && !screen.contains("[+]")
    });
    assert!(!screen.contains("use :w! to overwrite"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "keep\n// TODO FIX ME\nx\nx\nmine\nx\nx\nx\n// TODO two\n"
    );
    helix.capture("helix-5-saved");
    helix.type_text(":qa");
    helix.keys(&["Enter"]);
    helix.screen.wait_exit();
}

/// Writes `message` at the end of the chat in view and sends it with `space a` → *Send to demo*.
fn send_from_chat(helix: &Helix, message: &str) {
    // The last line, under `## You`.
    helix.keys(&["g", "e", "i"]);
    helix.type_text(message);
    helix.to_normal_mode();
    helix.keys(&["Space", "a"]);
    menu_offers(helix, "Send to demo");
    helix.keys(&["Enter"]);
}

/// Opens the code action menu and runs its entry `title`, the `index`th (from 0) as agentls
/// lists them (Helix keeps the order of actions of one kind).
fn run_action(helix: &Helix, title: &str, index: usize) {
    let before = helix.screen().matches(title).count();
    helix.keys(&["Space", "a"]);
    helix.wait_until(&format!("the menu offering {title:?}"), |screen| {
        screen.matches(title).count() > before
    });
    for _ in 0..index {
        helix.keys(&["Down"]);
    }
    helix.keys(&["Enter"]);
}

/// Waits for the code action menu to offer `title` (the chat's own text names it once).
fn menu_offers(helix: &Helix, title: &str) {
    helix.wait_until(&format!("the menu offering {title:?}"), |screen| {
        screen.matches(title).count() >= 2
    });
}

/// A real Helix in a new chat, and what it runs from.
struct InChat {
    hx: PathBuf,
    tmux: PathBuf,
    sandbox: Sandbox,
    helix: Helix,
}

/// Helix on `notes.rs` with agentls attached, in a chat it opened with `agentls.openChat`.
fn in_a_new_chat() -> InChat {
    let hx = peers::binary("AGENTLS_TEST_HELIX", "Helix");
    let tmux = peers::binary("AGENTLS_TEST_TMUX", "tmux");
    let sandbox = Sandbox::create();
    std::fs::write(sandbox.workspace.join("notes.rs"), NOTES).unwrap();
    let helix = Helix::start(&tmux, &hx, &sandbox, "notes.rs");
    helix.wait_for("1  keep");
    helix.wait_for_server();
    helix.type_text(":lsp-workspace-command agentls.openChat");
    helix.keys(&["Enter"]);
    helix.wait_for("# Chat with demo");
    InChat {
        hx,
        tmux,
        sandbox,
        helix,
    }
}

/// A conversation in a chat document in a real Helix with no plugin: `agentls.openChat` from
/// the command line opens the chat, the message is typed under `## You` and sent with `space a`,
/// the reply appears on screen, `:w` saves the chat; after Helix restarts on the chat file, the
/// next message goes the same way, to the agent's session of the first run.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn helix_holds_a_conversation_in_a_chat_document() {
    let InChat {
        hx,
        tmux,
        sandbox,
        helix,
    } = in_a_new_chat();
    send_from_chat(&helix, "read notes.rs");
    // In the document, not only in the one-line summary at the bottom.
    let screen = helix.wait_for("_demo: end_turn");
    eprintln!("the chat in Helix after the first reply:\n{screen}");
    for line in [
        // The header names the keys of the shipped config (its own line: Helix does not wrap).
        "Keys: space i s sends, space i x stops, space a lists every action",
        "## demo",
        "Hello from the demo agent.",
        "notes.rs has 8 lines.",
    ] {
        assert!(
            screen.contains(line),
            "{line:?} not on the screen:\n{screen}"
        );
    }
    helix.type_text(":w");
    helix.keys(&["Enter"]);
    let screen = helix.wait_for("written");
    assert!(!screen.contains("use :w! to overwrite"), "{screen}");
    let chat = chat_file(&sandbox);
    let saved = std::fs::read_to_string(&chat).unwrap();
    assert!(
        saved.contains("## You\nread notes.rs\n")
            && saved.contains("\n## demo\n\nHello from the demo agent.\n"),
        "{saved}"
    );
    helix.type_text(":qa");
    helix.keys(&["Enter"]);
    drop(helix);

    // Helix again, on the chat file: the conversation goes on.
    let helix = Helix::start(&tmux, &hx, &sandbox, chat.to_str().unwrap());
    // Helix shows the file before agentls is up; its menu would be empty until then.
    helix.wait_for("# Chat with demo");
    helix.wait_for_server();
    send_from_chat(&helix, "read notes.rs again");
    // The agent's session of the first run goes on (`session/load`): it recalls the first
    // message, and the reply ends.
    let screen = helix.wait_until("the second reply's end", |screen| {
        // In the document (a numbered line), not only in the status line.
        let recalled = screen.lines().any(|line| {
            line.trim_start()
                .split_once("  ")
                .is_some_and(|(number, text)| {
                    number.parse::<u32>().is_ok()
                        && text.starts_with("I recall this session: 1 earlier message;")
                })
        });
        recalled && screen.matches("  _demo: end_turn").count() == 2
    });
    eprintln!("the chat in Helix after a restart:\n{screen}");
    assert!(screen.contains("read notes.rs again"), "{screen}");
    helix.type_text(":wq");
    helix.keys(&["Enter"]);
}

/// The chat file agentls made in the sandbox (the only one).
fn chat_file(sandbox: &Sandbox) -> PathBuf {
    let chats = sandbox.root.join("home/.local/state/agentls/chats");
    std::fs::read_dir(&chats)
        .unwrap()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "md"))
        .expect("the chat file")
}

/// The messages agentls's record of the chat at `path` says the user sent, in order.
fn sent_messages(path: &Path) -> Vec<String> {
    let name = path.file_name().unwrap().to_str().unwrap();
    let record = std::fs::read_to_string(path.with_file_name(format!(".{name}.chat"))).unwrap();
    record
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|entry| entry["sent"].as_str().map(str::to_owned))
        .collect()
}

/// `:qa!` never loses a conversation: quit mid-reply, and again while a proposal waits for
/// review, Helix opened on the never-saved chat shows everything said (each interrupted turn
/// marked), the proposal never reached the disk, and the next message goes alone.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn helix_quit_without_saving_mid_reply_and_mid_review_loses_nothing() {
    let InChat {
        hx,
        tmux,
        sandbox,
        helix,
    } = in_a_new_chat();
    send_from_chat(&helix, "read notes.rs");
    helix.wait_for("_demo: end_turn");
    send_from_chat(&helix, "@hang");
    helix.wait_for("Waiting until you cancel");
    helix.type_text(":qa!");
    helix.keys(&["Enter"]);
    helix.screen.wait_exit();
    drop(helix);
    let chat = chat_file(&sandbox);
    assert!(!std::fs::read_to_string(&chat).unwrap().contains("## demo"));

    // Reopened: the conversation is back, the interrupted reply marked, under a new heading.
    let helix = Helix::start(&tmux, &hx, &sandbox, chat.to_str().unwrap());
    helix.wait_until("the conversation put back", |screen| {
        screen.contains("notes.rs has 8 lines.")
            && screen.contains("Waiting until you cancel")
            && screen.contains("_interrupted: agentls stopped before demo ended this turn_")
    });
    send_from_chat(&helix, "uppercase notes.rs");
    helix.wait_until("notes.rs shown with the proposal", |screen| {
        screen.contains("1  keep") && !screen.contains("# Chat with demo")
    });
    helix.type_text(":qa!");
    helix.keys(&["Enter"]);
    helix.screen.wait_exit();
    drop(helix);

    let helix = Helix::start(&tmux, &hx, &sandbox, chat.to_str().unwrap());
    helix.wait_until("the reviewed turn put back", |screen| {
        screen.contains("uppercase notes.rs")
            && screen.contains("demo proposes** changes to `notes.rs`")
            && screen
                .matches("_interrupted: agentls stopped before demo ended this turn_")
                .count()
                == 2
    });
    send_from_chat(&helix, "read notes.rs again");
    let screen = helix.wait_until("the next reply's end", |screen| {
        screen.matches("  _demo: end_turn").count() == 2
    });
    helix.capture("helix-quit-and-reopen");
    assert_eq!(
        std::fs::read_to_string(sandbox.workspace.join("notes.rs")).unwrap(),
        NOTES,
        "{screen}"
    );
    assert_eq!(
        sent_messages(&chat),
        [
            "read notes.rs",
            "@hang",
            "uppercase notes.rs",
            "read notes.rs again"
        ]
    );
    helix.type_text(":qa!");
    helix.keys(&["Enter"]);
}

/// From a chat in a real Helix, with `space a` only: a permission the agent asks is allowed
/// there, a turn is stopped there, and a proposal is followed to its file (*Show…* opens it at
/// the change).
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn helix_answers_stops_and_follows_a_proposal_from_a_chat() {
    // The sandbox is bound: it must outlive the Helix working in it.
    let InChat {
        helix,
        sandbox: _sandbox,
        ..
    } = in_a_new_chat();

    // Helix 25.07 shows the question as a dialog (`window/showMessageRequest`): Enter on its
    // first answer.
    send_from_chat(&helix, "@run echo hi");
    helix.wait_for("demo asks:");
    helix.wait_until("the dialog", |screen| {
        screen.lines().any(|line| line.trim() == "Don't run it")
    });
    helix.keys(&["Enter"]);
    helix.wait_for("> → Run it");
    helix.wait_for("The command printed \"hi\"");
    helix.wait_for("_demo: end_turn");

    // While the turn runs: Send, then Stop.
    send_from_chat(&helix, "@hang");
    helix.wait_for("Waiting until you cancel");
    run_action(&helix, "Stop demo", 1);
    helix.wait_for("_demo: cancelled");

    // The proposal: agentls shows its file at once (one showDocument per burst of reviews).
    send_from_chat(&helix, "uppercase notes.rs");
    let in_file = |screen: &str| screen.contains("1  keep") && !screen.contains("# Chat with demo");
    helix.wait_until("notes.rs shown with the proposal", in_file);
    // Back in the chat (`ga`: the file before), its menu while the proposal waits: Send, Stop,
    // then Show, Accept all, Reject all. Show goes to the file again.
    helix.keys(&["g", "a"]);
    helix.wait_for("demo proposes** changes to `notes.rs`");
    run_action(&helix, "Show demo's change to notes.rs", 2);
    // At the change: line 2, where the cursor is (the status line's `2:1`).
    let screen = helix.wait_until("notes.rs shown again at its change", |screen| {
        in_file(screen) && screen.contains(" 2:1")
    });
    eprintln!("Helix after Show… in the chat:\n{screen}");
    helix.type_text(":qa!");
    helix.keys(&["Enter"]);
}

/// Helix moves a chat's version on without telling when a completion's preview is undone (Tab
/// to an item, then `C-c`): the reply that follows is not held back. While a proposal waits,
/// the user starts a slash command in the chat and cancels its completion; accepting the
/// proposal from the chat lets the agent go on, and its reply lands with no keystroke to
/// unstick it.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn helix_cancelled_completion_does_not_hold_the_reply_back() {
    let InChat {
        helix,
        sandbox: _sandbox,
        ..
    } = in_a_new_chat();
    send_from_chat(&helix, "read notes.rs");
    helix.wait_for("_demo: end_turn");
    send_from_chat(&helix, "uppercase notes.rs");
    helix.wait_until("notes.rs shown with the proposal", |screen| {
        screen.contains("1  keep") && !screen.contains("# Chat with demo")
    });
    helix.keys(&["g", "a"]);
    helix.wait_for("demo proposes** changes to `notes.rs`");
    // A slash command begun on a line of its own, its completion taken, then cancelled.
    helix.keys(&["g", "e", "o"]);
    helix.wait_for(" INS ");
    helix.type_text("/he");
    helix.wait_until("the completion menu", |screen| {
        screen
            .lines()
            .any(|line| line.contains("/help") && !line.contains("/he "))
    });
    helix.keys(&["Tab"]);
    helix.wait_until("the item previewed", |screen| {
        screen
            .lines()
            .any(|line| line.trim_end().ends_with("/help"))
    });
    helix.keys(&["C-c"]);
    helix.capture("helix-completion-cancelled");
    helix.to_normal_mode();
    run_action(&helix, "Accept all changes (2)", 3);
    let accepted = Instant::now();
    let screen = helix.wait_until("the reply's end", |screen| {
        screen.matches("_demo: end_turn · ").count() == 2
    });
    let waited = accepted.elapsed();
    eprintln!("the reply's end landed {waited:?} after the accept, with no key pressed");
    helix.capture("helix-completion-reply");
    // Helix did refuse an append as outdated (the sequence moved its version), and the reply
    // went on without the user's help.
    assert!(screen.contains("outdated workspace edit"), "{screen}");
    assert!(!screen.contains("refuses to append"), "{screen}");
    helix.type_text(":qa!");
    helix.keys(&["Enter"]);
}

/// A reply streams in while the user keeps typing in the chat (a key every 30 ms, lines of
/// twenty near its top): the reply's end lands while the typing goes on, and every key typed is
/// in the buffer.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn helix_typing_all_along_does_not_hold_the_reply_back() {
    let InChat {
        helix,
        sandbox: _sandbox,
        ..
    } = in_a_new_chat();
    // Two seconds of reply, short enough that the whole chat stays on the screen.
    send_from_chat(&helix, "@flood 20 @pace 100");
    helix.keys(&["g", "g", "o"]);
    helix.wait_for(" INS ");
    let started = Instant::now();
    let mut lines = vec![String::new()];
    let ended = loop {
        let line = lines.last_mut().unwrap();
        if line.len() == 20 {
            helix.keys(&["Enter"]);
            lines.push(String::new());
            continue;
        }
        let letter = char::from(b'a' + line.len() as u8);
        helix.type_text(&letter.to_string());
        line.push(letter);
        std::thread::sleep(Duration::from_millis(30));
        if line.len() % 5 == 0 && helix.screen().contains("_demo: end_turn") {
            break true;
        }
        if started.elapsed() > SCREEN_WAIT {
            break false;
        }
    };
    assert!(
        ended,
        "the reply's end never landed while the user typed:\n{}",
        helix.screen()
    );
    // Helix may not have drawn the last keys yet.
    let typed_whole = |screen: &str| {
        lines.iter().all(|line| {
            screen
                .lines()
                .any(|l| l.trim_end().ends_with(&format!("  {line}")))
        })
    };
    helix.wait_until("every key typed on the screen", |screen| {
        typed_whole(screen) && screen.contains("chunk 19")
    });
    let screen = helix.capture("helix-typing-along");
    eprintln!(
        "the reply's end landed {:?} after the typing began, {} keys typed meanwhile",
        started.elapsed(),
        lines.concat().len() + lines.len() - 1
    );
    assert!(typed_whole(&screen), "{lines:?} not typed whole:\n{screen}");
    helix.to_normal_mode();
    helix.type_text(":qa!");
    helix.keys(&["Enter"]);
}

/// An agent that outlives agentls unless something ends it: the demo agent inside a shell deaf
/// to SIGTERM and SIGHUP, which starts a daemon with `setsid` and one by a double fork, writes
/// the three pids to `<name>.pid` in the workspace, and sleeps on once the demo agent ends.
fn deaf_agent_config() -> String {
    let script = format!(
        "trap '' TERM HUP; echo $$ > agent.pid; \
         setsid sh -c 'echo $$ > setsid.pid; exec sleep 600' >/dev/null 2>&1 & \
         (sleep 600 >/dev/null 2>&1 & echo $! > forked.pid) & \
         {:?} demo-agent; exec sleep 600",
        env!("CARGO_BIN_EXE_agentls")
    );
    format!(
        "[agents.demo]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {}]\n",
        serde_json::to_string(&script).unwrap()
    )
}

/// `:q!` in Helix kills agentls with SIGKILL (no cleanup of its own runs); the agent, deaf to
/// the end of its input and to SIGTERM, and the daemons it detached end all the same, within
/// about a second.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn quitting_helix_leaves_no_agent_running() {
    let hx = peers::binary("AGENTLS_TEST_HELIX", "Helix");
    let tmux = peers::binary("AGENTLS_TEST_TMUX", "tmux");
    let sandbox = Sandbox::create();
    std::fs::write(sandbox.workspace.join("notes.rs"), NOTES).unwrap();
    let agentls_config = sandbox.root.join("config/agentls");
    std::fs::create_dir_all(&agentls_config).unwrap();
    std::fs::write(agentls_config.join("config.toml"), deaf_agent_config()).unwrap();
    let helix = Helix::start(&tmux, &hx, &sandbox, "notes.rs");
    helix.wait_for("1  keep");
    helix.wait_for_server();
    helix.type_text(r#":lsp-workspace-command agentls.prompt {"text": "hello"}"#);
    helix.keys(&["Enter"]);
    // Not the turn's end on the status line: the note of the files the agent wrote without
    // asking (its pid files) may replace it before the screen is read.
    let pid_of = |name: &str| {
        std::fs::read_to_string(sandbox.workspace.join(format!("{name}.pid")))
            .ok()?
            .trim()
            .parse::<u32>()
            .ok()
    };
    let names = ["agent", "setsid", "forked"];
    let deadline = Instant::now() + SCREEN_WAIT;
    while names.iter().any(|n| pid_of(n).is_none()) {
        assert!(Instant::now() < deadline, "the agent never wrote its pids");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids: Vec<(&str, u32)> = names.iter().map(|n| (*n, pid_of(n).unwrap())).collect();
    for (name, pid) in &pids {
        assert!(
            support::processes::runs(pid),
            "{name} ({pid}) is not running"
        );
    }
    helix.type_text(":q!");
    helix.keys(&["Enter"]);
    helix.screen.wait_exit();
    let quit = Instant::now();
    let left = || -> Vec<(&str, u32)> {
        pids.iter()
            .copied()
            .filter(|(_, pid)| support::processes::runs(pid))
            .collect()
    };
    while !left().is_empty() && quit.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (took, left) = (quit.elapsed(), left());
    for (_, pid) in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(left.is_empty(), "{left:?} outlived Helix and agentls");
    eprintln!("all ended {took:?} after Helix quit");
    assert!(took < Duration::from_secs(3), "ended only after {took:?}");
}

/// A turn undone after the fact in a real Helix: the demo agent's two changes accepted and
/// saved, then *Undo demo's turn 1* from the chat's `space a` menu takes Helix to the file, whose
/// menu offers the turn's changes back; *Undo all* and `:w` put the file back as it was.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn helix_undoes_a_whole_turn_from_the_chat() {
    let InChat { sandbox, helix, .. } = in_a_new_chat();
    let notes = sandbox.workspace.join("notes.rs");
    send_from_chat(&helix, "uppercase notes.rs");
    helix.wait_for("demo proposes 2 changes to notes.rs");
    // The cursor is on the first change: its two actions come first.
    run_action(&helix, "Accept all changes (2) from demo", 2);
    helix.wait_for("Done: I uppercase the TODO lines of notes.rs");
    helix.type_text(":w");
    helix.keys(&["Enter"]);
    helix.wait_until("notes.rs written", |screen| {
        screen.contains("written") && !screen.contains("[+]")
    });
    let uppercased = NOTES.replace("fix me", "FIX ME").replace("two", "TWO");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), uppercased);
    // Back in the chat, its menu undoes the turn.
    helix.keys(&["g", "a"]);
    helix.wait_for("# Chat with demo");
    run_action(&helix, "Undo demo's turn 1 (1 file)", 1);
    helix.wait_until("notes.rs shown with the undo", |screen| {
        screen.contains("1  keep") && !screen.contains("# Chat with demo")
    });
    helix.wait_for("Undoing demo's turn 1: 1 file to review (notes.rs)");
    helix.capture("helix-undo-1-offered");
    run_action(&helix, "Undo all changes (2) by demo's turn 1", 2);
    helix.wait_until("the old lines back", |screen| {
        screen.contains("// TODO fix me") && screen.contains("// TODO two")
    });
    helix.type_text(":w");
    helix.keys(&["Enter"]);
    let screen = helix.wait_until("notes.rs written again", |screen| {
        screen.contains("written") && !screen.contains("[+]")
    });
    assert!(!screen.contains("use :w! to overwrite"), "{screen}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), NOTES);
    helix.capture("helix-undo-2-saved");
    // The chat is not saved: nothing of it is lost (agentls keeps its record).
    helix.type_text(":qa!");
    helix.keys(&["Enter"]);
    helix.screen.wait_exit();
}

//! A real Neovim in tmux, driven as a user types, in each Neovim the plugin claims (0.11 and
//! 0.10): installed exactly as `editors/nvim/README.md` says (its native-package commands, its
//! `init.lua`), with `agentls` on PATH and the built-in demo agent. Checks what is on the screen
//! (the streamed reply, the inline proposal, no question or error) and what is on disk.
//!
//! Neovim comes from `AGENTLS_TEST_NVIM` (0.11) and `AGENTLS_TEST_NVIM_OLD` (0.10), tmux from
//! `AGENTLS_TEST_TMUX` (`eval "$(scripts/test-tools.sh)"`). The tests are ignored without the
//! feature `real-peers` (scripts/test.sh turns it on); with it, a missing one fails them (each
//! test runs in both Neovims). With `AGENTLS_TEST_CAPTURES=DIR` the key screens are saved there
//! as `<test>-<neovim>-<n>-<moment>.txt`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::peers::{self, Sandbox};
use support::tmux::Tmux;

const NOTES: &str = "shopping\nTODO buy milk\neggs\nbread\nflour\nTODO call the plumber\n";
/// `NOTES` with the first change accepted and the second rejected.
const ACCEPTED: &str = "shopping\nTODO BUY MILK\neggs\nbread\nflour\nTODO call the plumber\n";

/// What must never be on the screen: Neovim's questions and errors.
const COMPLAINTS: &[&str] = &[
    "Press ENTER",
    "E37",
    "E162",
    "W11",
    "W12",
    "WARNING",
    "changed since",
    "Error",
    "E5108",
    "stack traceback",
];

/// The code block after the line holding `marker` in the README.
fn readme_block(marker: &str) -> String {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("editors/nvim/README.md");
    let readme = std::fs::read_to_string(readme_path).unwrap();
    let after = &readme[readme.find(marker).expect(marker)..];
    let start = after.find("```").unwrap();
    let body = &after[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("```").unwrap()].to_owned()
}

/// The Neovims to run, by name: 0.11 (`AGENTLS_TEST_NVIM`), then 0.10 (`AGENTLS_TEST_NVIM_OLD`).
fn neovims() -> Vec<(&'static str, PathBuf)> {
    [
        ("nvim-0.11", "AGENTLS_TEST_NVIM"),
        ("nvim-0.10", "AGENTLS_TEST_NVIM_OLD"),
    ]
    .into_iter()
    .map(|(name, var)| (name, peers::binary(var, name)))
    .collect()
}

/// One Neovim in tmux on a sandbox set up as the README says.
struct Session {
    screen: Tmux,
    sandbox: Sandbox,
    captures: Option<PathBuf>,
    label: String,
    shots: std::cell::Cell<usize>,
}

impl Session {
    /// Installs the plugin and `init.lua` (plus `extra_init` lines) as the README says, writes
    /// `notes.txt`, and starts `nvim notes.txt`.
    fn start(tmux: &Path, nvim: &Path, test: &str, name: &str, extra_init: &str) -> Self {
        let sandbox = Sandbox::create();
        let home = sandbox.root.join("home");
        let repo = env!("CARGO_MANIFEST_DIR");
        let install = readme_block("<!-- native package:").replace("/path/to/agentls", repo);
        let status = Command::new("sh")
            .args(["-eu", "-c", &install])
            .env("HOME", &home)
            .status()
            .unwrap();
        assert!(
            status.success(),
            "the README's install commands failed:\n{install}"
        );
        let config = home.join(".config/nvim");
        std::fs::create_dir_all(&config).unwrap();
        let init = readme_block("<!-- init.lua:") + extra_init;
        std::fs::write(config.join("init.lua"), init).unwrap();
        std::fs::write(sandbox.workspace.join("notes.txt"), NOTES).unwrap();
        let bin = Path::new(env!("CARGO_BIN_EXE_agentls")).parent().unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut unset = String::new();
        for var in [
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
            "XDG_CACHE_HOME",
            "XDG_CONFIG_DIRS",
            "XDG_DATA_DIRS",
            "NVIM",
            "NVIM_APPNAME",
            "NVIM_LOG_FILE",
            "VIMINIT",
            "VIMRUNTIME",
            "VIM",
            "AGENTLS_CONFIG",
            "AGENTLS_LOG",
        ] {
            unset.push_str(&format!("-u {var} "));
        }
        let shell = format!(
            "cd {ws:?} && exec env {unset}HOME={home:?} PATH={path:?} {nvim:?} notes.txt",
            ws = sandbox.workspace,
        );
        let screen = Tmux::start(tmux, &shell, 120, 50);
        let captures = std::env::var_os("AGENTLS_TEST_CAPTURES").map(PathBuf::from);
        let session = Self {
            screen,
            sandbox,
            captures,
            label: format!("{test}-{name}"),
            shots: std::cell::Cell::new(0),
        };
        session.screen.wait_for("TODO call the plumber");
        session.wait_for_server();
        session
    }

    /// Waits until agentls is attached and its demo agent known: `:AgentStatus` answers.
    fn wait_for_server(&self) {
        let deadline = std::time::Instant::now() + support::tmux::SCREEN_WAIT;
        loop {
            self.command("AgentStatus");
            let answered = (0..20).any(|_| {
                std::thread::sleep(Duration::from_millis(100));
                self.screen.screen().contains("demo (default)")
            });
            if answered {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "agentls never answered :AgentStatus:\n{}\n{}",
                self.screen.screen(),
                self.logs()
            );
        }
    }

    /// Types `:command` and Enter.
    fn command(&self, command: &str) {
        self.screen.type_text(&format!(":{command}"));
        self.screen.keys(&["Enter"]);
    }

    /// Saves the screen as the next capture, named `moment`; returns it.
    fn capture(&self, moment: &str) -> String {
        let screen = self.screen.screen();
        let n = self.shots.get() + 1;
        self.shots.set(n);
        Tmux::save(
            self.captures.as_deref(),
            &format!("{}-{n}-{moment}", self.label),
            &screen,
        );
        screen
    }

    /// Fails when the screen shows one of Neovim's questions or errors.
    fn assert_no_complaint(&self, screen: &str) {
        for complaint in COMPLAINTS {
            assert!(
                !screen.contains(complaint),
                "{complaint:?} on the screen:\n{screen}\n{}",
                self.logs()
            );
        }
    }

    fn notes(&self) -> String {
        std::fs::read_to_string(self.sandbox.workspace.join("notes.txt")).unwrap()
    }

    /// The tail of Neovim's LSP log, for failures.
    fn logs(&self) -> String {
        let log = self.sandbox.root.join("home/.local/state/nvim/lsp.log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        let start = (start..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        format!("--- {} (tail) ---\n{}", log.display(), &text[start..])
    }

    /// The text of the chat agentls wrote for this workspace, if there is one yet.
    fn chat_text(&self) -> Option<String> {
        let chats = self.sandbox.root.join("home/.local/state/agentls/chats");
        let chat = std::fs::read_dir(&chats)
            .ok()?
            .flatten()
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
            .map(|f| f.path())
            .find(|path| path.extension().is_some_and(|e| e == "md"))?;
        std::fs::read_to_string(chat).ok()
    }
}

/// Whether a line of the screen's left window (the file) starts with `text`: the buffer's own
/// line, possibly after the sign column.
fn file_line(screen: &str, text: &str) -> bool {
    screen.lines().any(|line| {
        line.trim_start_matches(['I', 'H', 'W', ' '])
            .starts_with(text)
    })
}

/// The whole conversation: `:AgentChat`, a message typed under `## You` and sent with
/// `:AgentSend`, the reply streaming in on screen, the proposal shown inline in the file with
/// its keys, `\aa` on the first change, `]e` then `\ar` on the second, `:wa` and `:qa` with no
/// question or error on the screen, and the file holding exactly the accepted change.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_in_tmux_chats_accepts_one_change_rejects_the_other_and_quits() {
    let tmux = peers::binary("AGENTLS_TEST_TMUX", "tmux");
    for (name, nvim) in neovims() {
        let started = std::time::Instant::now();
        let s = Session::start(&tmux, &nvim, "conversation", name, "");
        s.command("AgentChat");
        s.screen.wait_for("# Chat with demo");
        s.capture("chat-open");
        // The chat is current: a message under its last `## You`.
        s.screen.keys(&["G", "o"]);
        s.screen
            .type_slowly("uppercase notes.txt", Duration::from_millis(20));
        s.screen.keys(&["Escape"]);
        s.command("AgentSend");
        // The reply streams into the chat, on the right.
        s.screen.wait_for("Hello from the demo agent.");
        // The proposal, inline in the file on the left, where the cursor now is, and the
        // agent's words before it in the chat. The two go out separately (the chat's text
        // coalesced), so either may be drawn first.
        let screen = s
            .screen
            .wait_until("the proposal inline and the reply", |screen| {
                screen.contains(r"demo: change 1/2  \aa accept · \ar reject")
                    && screen.contains("demo: change 2/2")
                    && screen.contains("notes.txt has 6 lines.")
            });
        s.capture("reply-and-proposal");
        assert!(file_line(&screen, "TODO BUY MILK"), "{screen}");
        s.assert_no_complaint(&screen);
        s.screen.keys(&["\\", "a", "a"]);
        s.screen.wait_for("demo: change 1/2 ACCEPTED");
        s.capture("first-accepted");
        s.screen.keys(&["]", "e"]);
        s.screen.keys(&["\\", "a", "r"]);
        // The accepted change lands in the buffer; the rejected one never does; the turn ends.
        let screen = s
            .screen
            .wait_until("the accepted change and the turn's end", |screen| {
                !screen.contains("demo: change") && screen.contains("_demo: end_turn")
            });
        s.capture("decided");
        assert!(file_line(&screen, "TODO BUY MILK"), "{screen}");
        assert!(file_line(&screen, "TODO call the plumber"), "{screen}");
        assert!(!screen.contains("TODO CALL THE PLUMBER"), "{screen}");
        s.assert_no_complaint(&screen);
        // agentls left the file to Neovim's save.
        assert_eq!(s.notes(), NOTES, "{name}");
        s.command("wa");
        let screen = s.screen.wait_for("written");
        s.capture("saved");
        s.assert_no_complaint(&screen);
        assert_eq!(s.notes(), ACCEPTED, "{name}");
        s.command("qa");
        s.screen.wait_exit();
        assert_eq!(s.notes(), ACCEPTED, "{name}");
        eprintln!("{name}: the conversation took {:?}", started.elapsed());
    }
}

/// An agent that writes the file itself once allowed (`@diskwrite`): after the verdict agentls
/// brings the buffer in line with the disk, and the buffer, equal to its file, is not left
/// modified: no `[+]`, and a plain `:q` quits (no E37), the file holding the accepted change.
/// Before that, a selection survives `:AgentPrompt` typed at human speed: the prompt's context
/// is the selected lines, not the cursor.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_in_tmux_takes_a_file_the_agent_wrote_as_saved_and_keeps_a_selection() {
    let tmux = peers::binary("AGENTLS_TEST_TMUX", "tmux");
    for (name, nvim) in neovims() {
        let s = Session::start(&tmux, &nvim, "disk", name, "");
        // A charwise selection over lines 2–3, then the command line, typed slowly (over the
        // selection's 100 ms debounce many times).
        s.screen.keys(&["2", "G", "v", "j", "e"]);
        s.screen.type_text(":");
        s.screen.keys(&["C-u"]);
        s.screen
            .type_slowly("AgentPrompt what is this", Duration::from_millis(40));
        s.screen.keys(&["Enter"]);
        // The chat is not shown (a prompt from a file keeps you there); its file tells.
        let deadline = std::time::Instant::now() + support::tmux::SCREEN_WAIT;
        let text = loop {
            let text = s.chat_text().unwrap_or_default();
            if text.contains("_demo: end_turn") {
                break text;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no reply in the chat file:\n{text}\n{}",
                s.screen.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            text.contains("what is this\n\n_about notes.txt lines 2–3_"),
            "{name}: the selection was lost:\n{text}"
        );
        s.screen.keys(&["Escape"]);

        s.command("AgentPrompt uppercase notes.txt @diskwrite");
        s.screen.wait_for("demo: change 2/2");
        s.screen.keys(&["g", "g", "]", "e"]);
        s.screen.keys(&["\\", "a", "a"]);
        s.screen.wait_for("demo: change 1/2 ACCEPTED");
        s.screen.keys(&["]", "e"]);
        s.screen.keys(&["\\", "a", "r"]);
        let screen = s
            .screen
            .wait_until("the buffer in line with the disk", |screen| {
                !screen.contains("demo: change") && !screen.contains("[+]")
            });
        s.capture("disk-caught-up");
        assert!(file_line(&screen, "TODO BUY MILK"), "{screen}");
        assert_eq!(s.notes(), ACCEPTED, "{name}");
        s.assert_no_complaint(&screen);
        s.command("q");
        s.screen.wait_exit();
        assert_eq!(s.notes(), ACCEPTED, "{name}");
    }
}

/// With inlay hints on (`vim.lsp.inlay_hint.enable(true)`), agentls's hints with a proposal's
/// new text show as soon as agentls refreshes them, with no key pressed, and go once the
/// changes are decided. Then a command the agent runs makes agentls write the buffer, which is
/// then not left modified.
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs real peers: run scripts/test.sh"
)]
#[test]
fn neovim_in_tmux_draws_inlay_hints_on_refresh() {
    let tmux = peers::binary("AGENTLS_TEST_TMUX", "tmux");
    for (name, nvim) in neovims() {
        let s = Session::start(
            &tmux,
            &nvim,
            "hints",
            name,
            "vim.lsp.inlay_hint.enable(true)\n",
        );
        s.command("AgentPrompt uppercase notes.txt");
        s.screen.wait_until("both hints", |screen| {
            screen.contains("+ TODO BUY MILK TODO buy milk")
                && screen.contains("+ TODO CALL THE PLUMBER TODO call the plumber")
        });
        s.capture("hints");
        s.screen.keys(&["\\", "a", "A"]);
        let screen = s.screen.wait_until("the hints gone", |screen| {
            !screen.contains("+ TODO") && file_line(screen, "TODO CALL THE PLUMBER")
        });
        s.capture("hints-gone");
        s.assert_no_complaint(&screen);
        // The accepted changes are in the buffer only, until agentls writes it for a command
        // the agent runs (allowed in Neovim's dialog): then the buffer, equal to its file, is
        // not left modified, and `:q` just quits.
        assert!(screen.contains("[+]"), "{screen}");
        assert_eq!(s.notes(), NOTES, "{name}");
        // A prompt while the turn still runs is refused (busy), and the turn ends a moment
        // after the accepted edit lands, a longer one on a loaded machine.
        s.screen.wait_for("demo: end_turn");
        s.command("AgentPrompt @run cat notes.txt");
        s.screen.wait_for("1: Run it");
        s.screen.keys(&["1", "Enter"]);
        let screen = s
            .screen
            .wait_until("the command's end, the buffer saved", |screen| {
                screen.contains("The command printed") && !screen.contains("[+]")
            });
        s.capture("written-for-a-command");
        s.assert_no_complaint(&screen);
        s.command("q");
        s.screen.wait_exit();
        assert_eq!(
            s.notes(),
            NOTES
                .replace("TODO call the plumber", "TODO CALL THE PLUMBER")
                .replace("TODO buy milk", "TODO BUY MILK"),
            "{name}"
        );
    }
}

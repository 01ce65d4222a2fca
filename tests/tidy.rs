//! Rules of the codebase that a compiler does not check: every source file says what it owns in
//! a `//!` line; nothing but `main.rs` prints (stdout is the LSP protocol); no agent or editor
//! name is part of a type, module or function name (vendors are data).

use std::path::{Path, PathBuf};

fn sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_source_file_starts_with_a_module_doc_line() {
    let missing: Vec<_> = sources()
        .into_iter()
        .filter(|p| !std::fs::read_to_string(p).unwrap().starts_with("//!"))
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading `//!` line: {missing:?}"
    );
}

#[test]
fn only_main_prints_to_stdout() {
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|p| !p.ends_with("main.rs"))
        .flat_map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            text.lines()
                .enumerate()
                .filter(|(_, l)| {
                    let code = l.split("//").next().unwrap_or("");
                    code.contains("println!(")
                        || code.contains("print!(")
                        || code.contains("stdout()")
                })
                .map(|(i, l)| format!("{}:{}: {}", p.display(), i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "stdout is the protocol:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn no_vendor_names_in_identifiers() {
    let vendors = [
        "claude",
        "gemini",
        "anthropic",
        "openai",
        "opencode",
        "helix",
        "neovim",
        "nvim",
        "emacs",
        "eglot",
        "vscode",
        "zed",
    ];
    let declarations = [
        "fn ", "struct ", "enum ", "mod ", "trait ", "type ", "const ",
    ];
    let mut offenders = Vec::new();
    for path in sources() {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if words(&name).iter().any(|w| vendors.contains(&w.as_str())) {
            offenders.push(path.display().to_string());
        }
        for (i, line) in std::fs::read_to_string(&path).unwrap().lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for decl in declarations {
                let Some(rest) = code.split(decl).nth(1) else {
                    continue;
                };
                let ident: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if words(&ident).iter().any(|w| vendors.contains(&w.as_str())) {
                    offenders.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "vendor names belong in config and fixtures:\n{}",
        offenders.join("\n")
    );
}

/// The lowercase words of an identifier: split at `_` and at lower-to-upper case changes.
fn words(ident: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in ident.chars() {
        let boundary = c == '_' || (c.is_uppercase() && previous_lower);
        if boundary && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if c != '_' {
            word.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

#[test]
fn words_split_snake_and_camel_case() {
    assert_eq!(words("GeminiCompanion"), ["gemini", "companion"]);
    assert_eq!(words("run_claude_cli"), ["run", "claude", "cli"]);
    assert_eq!(words("initialized"), ["initialized"]);
}

/// The host asks the state by name (`editor/host_queries.rs`): no closure of code outside
/// `editor/` runs on the state task, so a reader can follow every call to what it changes.
/// Unit tests (after a file's `#[cfg(test)]`) may still ask with a closure.
#[test]
fn no_closure_crosses_into_the_state_task_from_outside_editor() {
    let editor = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/editor");
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|p| !p.starts_with(&editor))
        .flat_map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("").to_owned();
            code.lines()
                .enumerate()
                .filter(|(_, l)| l.contains(".query("))
                .map(|(i, l)| format!("{}:{}: {}", p.display(), i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "ask the state by a named query:\n{}",
        offenders.join("\n")
    );
}

/// README's table of agents' modes says what the shipped table of known agents does: the row of
/// each known agent (by its `use` id) names the entry's mode as the one that asks, or, where the
/// entry sets none, no mode other than the one the agent starts in.
#[test]
fn readme_modes_match_the_known_agents() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    for (id, agent) in agentls::known_agents::all() {
        let tag = format!("(`{id}`,");
        let row = readme
            .lines()
            .find(|line| line.starts_with("| ") && line.contains(&tag))
            .unwrap_or_else(|| panic!("README's mode table has no row for {id}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (starts, asks) = (cells[2], cells[3]);
        match &agent.mode {
            Some(mode) => assert!(asks.starts_with(&format!("`{mode}`")), "{id}: {row}"),
            None => assert!(
                !asks.starts_with('`') || asks == starts,
                "{id} sets no mode, yet README names one: {row}"
            ),
        }
    }
}

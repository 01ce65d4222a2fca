//! Where and for how long the commands agents run through `terminal/create` may run: only in
//! the workspace folders (a working directory outside them, or a symlink leading out, is an ACP
//! error unless `fs.allowOutsideWorkspace`), and no longer than agentls, also what they detach
//! into a session of its own. Driven through the demo agent's `@cwd` and `@run`.

mod support;

use serde_json::json;
use support::processes::runs;
use support::{Answer, Options, TestClient};

/// A server whose editor says "Run it" to every command the demo agent asks to run.
async fn running_commands(config_toml: Option<&str>) -> TestClient {
    let client = TestClient::start(Options {
        config_toml: config_toml.map(str::to_owned),
        ..Options::default()
    })
    .await;
    client
        .initialize(TestClient::rich_capabilities(false), None)
        .await;
    client.answer(
        "window/showMessageRequest",
        Answer::With(json!({"title": "Run it"})),
    );
    client
}

/// Prompts `@cwd <dir> @run pwd`; what the demo agent said of it.
async fn pwd_in(client: &TestClient, dir: &str) -> String {
    client.prompt(&format!("@cwd {dir} @run pwd")).await;
    client.take_message("demo: end_turn").await
}

#[tokio::test]
async fn a_terminal_runs_only_inside_the_workspace() {
    let client = running_commands(None).await;
    let sub = client.workspace.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), client.workspace.join("link")).unwrap();

    let inside = pwd_in(&client, "sub").await;
    assert!(
        inside.contains(&format!(
            "The command printed {:?}",
            sub.display().to_string()
        )),
        "{inside}"
    );
    let dirs = ["/etc", "link", &outside.path().display().to_string()];
    for (refusals, dir) in dirs.into_iter().enumerate() {
        let refused = pwd_in(&client, dir).await;
        assert!(
            refused
                .contains("Could not run `pwd`: refused to run `pwd` in that working directory: ")
                && refused.contains("outside the workspace folders"),
            "{dir}: {refused}"
        );
        // The whole answer, with its code (access denied), is in the chat, once per refusal.
        let whole = "(set `fs.allowOutsideWorkspace = true` to permit this) (-32003)";
        support::eventually(|| client.shown_text().matches(whole).count() == refusals + 1)
            .await
            .unwrap_or_else(|| panic!("{}", client.shown_text()));
    }
    assert!(client.shutdown().await.success());
}

#[tokio::test]
async fn allow_outside_workspace_lets_a_terminal_run_elsewhere() {
    let client = running_commands(Some("[fs]\nallowOutsideWorkspace = true\n")).await;
    let said = pwd_in(&client, "/etc").await;
    assert!(said.contains("The command printed \"/etc\""), "{said}");
    assert!(client.shutdown().await.success());
}

/// The pid a detached process wrote to `file`, once it is there.
async fn written_pid(file: &std::path::Path) -> u32 {
    let read = || {
        std::fs::read_to_string(file)
            .ok()?
            .trim()
            .parse::<u32>()
            .ok()
    };
    support::eventually(|| read().is_some())
        .await
        .unwrap_or_else(|| panic!("no pid in {}", file.display()));
    read().unwrap()
}

/// A daemon a command detaches (`setsid`: a new session and process group, its parent gone at
/// once) is in no group agentls signals; it is ended all the same when agentls shuts down. One
/// that exits by itself meanwhile is reaped, not left a zombie.
#[tokio::test]
async fn a_daemon_a_command_detaches_does_not_outlive_agentls() {
    let client = running_commands(None).await;
    let (daemon_file, brief_file) = (
        client.workspace.join("daemon.pid"),
        client.workspace.join("brief.pid"),
    );
    // The command ends once both have detached: until then they are in its process group,
    // which agentls ends with the command (on a busy machine `setsid` may not have run yet).
    let script = format!(
        "setsid sh -c 'echo $$ > \"{d}\"; exec sleep 600' >/dev/null 2>&1 &\n\
         setsid sh -c 'echo $$ > \"{b}\"; exec sleep 0.1' >/dev/null 2>&1 &\n\
         while [ ! -s \"{d}\" ] || [ ! -s \"{b}\" ]; do sleep 0.01; done\n",
        d = daemon_file.display(),
        b = brief_file.display()
    );
    std::fs::write(client.workspace.join("daemon.sh"), script).unwrap();
    client.prompt("@run sh daemon.sh").await;
    let said = client.take_message("demo: end_turn").await;
    assert!(said.contains("exited with Some(0)"), "{said}");
    let daemon = written_pid(&daemon_file).await;
    assert!(runs(daemon), "the daemon {daemon} did not start");
    let brief = written_pid(&brief_file).await;
    let proc_entry = std::path::PathBuf::from(format!("/proc/{brief}"));
    support::eventually(|| !proc_entry.exists())
        .await
        .unwrap_or_else(|| panic!("{brief}, detached and exited, was never reaped"));

    assert!(client.shutdown().await.success());
    if support::eventually(|| !runs(daemon)).await.is_none() {
        let _ = std::process::Command::new("kill")
            .args(["-9", &daemon.to_string()])
            .status();
        panic!("the daemon {daemon} an agent's command detached outlived agentls");
    }
}

/// The agent's command for [`nothing_an_agent_started_outlives_a_killed_server`]: the demo
/// agent inside a shell deaf to SIGTERM and SIGHUP that writes its pid to `agent.pid`, starts
/// a daemon by a double fork (its pid in `forked.pid`) and, once the demo agent ends (at the
/// end of its input), goes on sleeping: an agent that outlives agentls unless something ends it.
fn deaf_agent_toml() -> String {
    let script = format!(
        "trap '' TERM HUP; echo $$ > agent.pid;          (sleep 600 >/dev/null 2>&1 & echo $! > forked.pid) &          {:?} demo-agent; exec sleep 600",
        env!("CARGO_BIN_EXE_agentls")
    );
    support::agents::agent_toml("demo", "deaf", &["/bin/sh", "-c", &script], &[], "")
}

/// Killed with SIGKILL (as Helix's `:q!` does), agentls runs none of its own cleanup; still
/// nothing an agent started outlives it, within about a second: not the agent (which ignores
/// the end of its input and SIGTERM), not a daemon its command detached with `setsid`, not one
/// it detached by a double fork.
#[tokio::test]
async fn nothing_an_agent_started_outlives_a_killed_server() {
    let client = running_commands(Some(&deaf_agent_toml())).await;
    let pid_file = |name: &str| client.workspace.join(format!("{name}.pid"));
    let script = format!(
        "setsid sh -c 'echo $$ > \"{s}\"; exec sleep 600' >/dev/null 2>&1 &\n\
         while [ ! -s \"{s}\" ]; do sleep 0.01; done\n",
        s = pid_file("setsid").display(),
    );
    std::fs::write(client.workspace.join("daemons.sh"), script).unwrap();
    client.prompt("@run sh daemons.sh").await;
    let said = client.take_message("demo: end_turn").await;
    assert!(said.contains("exited with Some(0)"), "{said}");
    let mut pids = Vec::new();
    for name in ["agent", "setsid", "forked"] {
        let pid = written_pid(&pid_file(name)).await;
        assert!(runs(pid), "{name} ({pid}) did not start");
        pids.push((name, pid));
    }

    let killed = std::time::Instant::now();
    // SAFETY: kill(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(client.pid() as i32, libc::SIGKILL) }, 0);
    let all_gone = || pids.iter().all(|(_, pid)| !runs(*pid));
    let gone = support::eventually(all_gone).await;
    let took = killed.elapsed();
    let left: Vec<_> = pids.iter().filter(|(_, pid)| runs(*pid)).collect();
    for (_, pid) in &left {
        // SAFETY: as above.
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    assert!(gone.is_some(), "{left:?} outlived a killed agentls");
    println!("all ended {took:?} after agentls was killed");
    assert!(
        took < std::time::Duration::from_secs(3),
        "ended only after {took:?}"
    );
}

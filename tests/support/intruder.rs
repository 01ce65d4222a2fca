//! Another local account, as an attacker: a process running as `nobody` (uid 65534) that holds
//! as many connections to agentls's loopback ports as it can get and reconnects the moment one
//! is closed, with no token. Only root can start one (the tests that need it run as root in CI).

use std::process::Stdio;

use tokio::process::{Child, Command};

/// The account the intruder runs as.
pub const UID: u32 = 65534;

/// A connection loop per thread, a hundred threads per port, until its time is up or its
/// standard input closes; then prints how many connections it opened.
const SCRIPT: &str = r#"
import socket, sys, threading, time
ports = [int(p) for p in sys.argv[2:]]
end = time.time() + float(sys.argv[1])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
over = lambda: stop.is_set() or time.time() >= end
opened = [0]
def hammer(port):
    while not over():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            continue
        opened[0] += 1
        s.settimeout(0.2)
        try:
            while not over():
                try:
                    if not s.recv(4096):
                        break
                except socket.timeout:
                    pass
        except OSError:
            pass
        s.close()
threads = [threading.Thread(target=hammer, args=(p,)) for p in ports for _ in range(100)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(opened[0], flush=True)
"#;

/// Whether this process may start processes as another account.
pub fn can_run() -> bool {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A running intruder.
pub struct Intruder(Child);

impl Intruder {
    /// Starts hammering `ports` for at most `seconds` as [`UID`]. Panics unless [`can_run`].
    pub fn hammer(ports: &[u16], seconds: u32) -> Self {
        assert!(can_run(), "only root can run a second account");
        let child = Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(SCRIPT)
            .arg(seconds.to_string())
            .args(ports.iter().map(u16::to_string))
            .uid(UID)
            .gid(UID)
            .current_dir("/")
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 as nobody");
        Self(child)
    }

    /// Whether its time is up already.
    pub fn has_ended(&mut self) -> bool {
        !matches!(self.0.try_wait(), Ok(None))
    }

    /// Stops it (its threads notice within 0.2 s) and returns how many connections it opened.
    pub async fn stop(mut self) -> u64 {
        drop(self.0.stdin.take());
        let out = self.0.wait_with_output().await.expect("the intruder ends");
        assert!(
            out.status.success(),
            "the intruder failed: {:?}",
            out.status
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a count")
    }
}

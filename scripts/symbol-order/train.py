#!/usr/bin/env python3
"""The sessions a symbol order is trained on: start, type, start an agent and type beside it;
then prompt it and accept its review.

Run as `train.py <user> <command...>` (the command starts agentls, e.g. under callgrind; its
last word is the agentls binary). The user is one of `USERS`: how the editor starts agentls and
which agent it starts. It drives agentls over stdio like an editor, in a home of its own, and
exits non-zero if a step does not happen, so a broken training run never yields an order file.
Under callgrind it has the profile dumped before the prompt: what
runs to reach an idle session is then a profile of its own, which `scripts/symbol-order.sh`
lays out before what a turn runs. Used by `scripts/symbol-order.sh`.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import queue

WAIT = 120  # seconds for one step (callgrind runs agentls some 50 times slower)
TEXT = "# notes\nTODO: write the plan\nkeep this line\nTODO: ask for review\n"


class Server:
    """agentls on pipes: requests, notifications, and answers to its own requests."""

    def __init__(self, command, cwd, env):
        self.proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        self.inbox = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self.inbox.put(json.loads(out.read(length)))

    def send(self, message):
        body = json.dumps(dict(message, jsonrpc="2.0")).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method, params):
        self.send({"method": method, "params": params})

    def wait_for(self, wanted, what):
        """Reads messages (answering the server's requests) until `wanted(message)` holds."""
        while True:
            try:
                message = self.inbox.get(timeout=WAIT)
            except queue.Empty:
                sys.exit(f"train: no {what} within {WAIT} s")
            if message is None:
                sys.exit(f"train: agentls exited before {what}")
            if "method" in message and "id" in message:
                self.send({"id": message["id"], "result": answer(message)})
            if wanted(message):
                return message

    def request(self, method, params):
        self.next_id += 1
        sent = self.next_id
        self.send({"id": sent, "method": method, "params": params})
        reply = self.wait_for(lambda m: m.get("id") == sent and "method" not in m,
                              f"reply to {method}")
        if "error" in reply:
            sys.exit(f"train: {method} failed: {reply['error']}")
        return reply.get("result")


def answer(request):
    """What an editor answers to the server's request."""
    method = request["method"]
    if method == "workspace/applyEdit":
        return {"applied": True}
    if method == "workspace/configuration":
        return [None for _ in request["params"]["items"]]
    if method == "window/showDocument":
        return {"success": True}
    return None


RICH = {
    "general": {"positionEncodings": ["utf-16"]},
    "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True},
                  "workspaceFolders": True, "configuration": True},
    "window": {"showDocument": {"support": True}, "workDoneProgress": True},
    "textDocument": {"inlayHint": {}, "publishDiagnostics": {}},
}
# Who starts agentls: (config file names an agent `helper`, client capabilities, plugin events).
USERS = {
    # An editor with a package, and a config file naming the agent.
    "configured": (True, RICH, ["reviewChanged", "turnChanged"]),
    # The same editor on the built-in default agent, no config file.
    "default": (False, RICH, ["reviewChanged", "turnChanged"]),
    # An editor with no package (as Helix): standard LSP only.
    "plain": (False, {"workspace": {"applyEdit": True}}, None),
}


def home_for(home, agentls, configured):
    """The environment of a user in `home`, whose config file (if any) names one agent."""
    config = os.path.join(home, "config", "agentls")
    os.makedirs(config)
    if configured:
        with open(os.path.join(config, "config.toml"), "w") as f:
            f.write(f"[agents.helper]\ncommand = {json.dumps(agentls)}\n"
                    "args = [\"demo-agent\"]\n[agents.helper.env]\nHELPER = \"1\"\n")
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, "config"),
               TMPDIR=home)
    env.pop("AGENTLS_LOG", None)
    if configured:
        env["AGENTLS_LOG"] = "info"  # a user who set the log level, to its default
    return env


def dump_profile(command, pid, env):
    """Has callgrind write what ran so far to a file of its own (`<out>.1`), if it profiles."""
    if any("--tool=callgrind" in word for word in command):
        # The same TMPDIR as the profiled process: valgrind's control pipes are there.
        done = subprocess.run(["callgrind_control", "--dump", str(pid)], env=env,
                              capture_output=True, text=True)
        if done.returncode != 0 or "OK" not in done.stdout:
            sys.exit(f"train: callgrind did not dump: {done.stdout}{done.stderr}")


def main():
    with tempfile.TemporaryDirectory() as home:
        folder = os.path.join(home, "workspace")
        os.makedirs(folder)
        path = os.path.join(folder, "notes.txt")
        with open(path, "w") as f:
            f.write(TEXT)
        uri = "file://" + path
        user, command = sys.argv[1], sys.argv[2:]
        if user not in USERS:
            sys.exit(f"train: the user is one of {list(USERS)}, not {user!r}")
        configured, capabilities, plugin_events = USERS[user]
        agentls = os.path.abspath(command[-1])
        command = command[:-1] + [agentls]
        env = home_for(home, agentls, configured)
        server = Server(command, folder, env)
        initialize = {"processId": os.getpid(), "rootUri": "file://" + folder,
                      "clientInfo": {"name": "train"}, "capabilities": capabilities}
        if plugin_events is not None:
            initialize["initializationOptions"] = {"pluginEvents": plugin_events}
        server.request("initialize", initialize)
        server.notify("initialized", {})
        doc = {"uri": uri}
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "text", "version": 1, "text": TEXT}})
        at = {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}

        def type_keys(versions):
            for version in versions:
                server.notify("textDocument/didChange", {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"range": at, "text": "x"}]})
                server.request("textDocument/codeAction", {
                    "textDocument": doc, "range": at, "context": {"diagnostics": []}})

        type_keys(range(2, 22))
        agent = [{"agent": "helper"}] if configured else []
        server.request("workspace/executeCommand",
                       {"command": "agentls.newSession", "arguments": agent})
        server.wait_for(lambda m: m.get("method") == "window/showMessage", "the session")
        type_keys(range(22, 32))  # typing beside an idle session
        dump_profile(command, server.proc.pid, env)
        server.request("workspace/executeCommand", {
            "command": "agentls.prompt",
            "arguments": [{"text": "uppercase the TODO lines in notes.txt"}]})
        server.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                        and m["params"]["uri"] == uri and m["params"]["diagnostics"],
                        "the review's diagnostics")
        line = {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}
        actions = server.request("textDocument/codeAction", {
            "textDocument": doc, "range": line, "context": {"diagnostics": []}}) or []
        accept = next((a for a in actions if a["title"].startswith("Accept all")), None)
        if accept is None:
            sys.exit(f"train: no Accept all among {[a['title'] for a in actions]}")
        server.request("workspace/executeCommand", accept["command"])
        server.request("shutdown", None)
        server.notify("exit", None)
        server.proc.wait(timeout=WAIT)


if __name__ == "__main__":
    main()

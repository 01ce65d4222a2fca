#!/usr/bin/env python3
"""The session a symbol order is trained on: start with a config file, type, start an agent,
prompt it, accept its review.

Run as `train.py <command...>` (the command starts agentls, e.g. under callgrind; its last word
is the agentls binary, which the config names as the agent: its built-in demo agent). It drives
agentls over stdio like an editor, in a home of its own, and exits non-zero if a step does not
happen, so a broken training run never yields an order file. Used by `scripts/symbol-order.sh`.
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


def home_with_config(home, agentls):
    """The environment of a user whose config file names one agent, `helper`."""
    config = os.path.join(home, "config", "agentls")
    os.makedirs(config)
    with open(os.path.join(config, "config.toml"), "w") as f:
        f.write(f"[agents.helper]\ncommand = {json.dumps(agentls)}\nargs = [\"demo-agent\"]\n"
                "[agents.helper.env]\nHELPER = \"1\"\n")
    return dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, "config"))


def main():
    with tempfile.TemporaryDirectory() as home:
        folder = os.path.join(home, "workspace")
        os.makedirs(folder)
        path = os.path.join(folder, "notes.txt")
        with open(path, "w") as f:
            f.write(TEXT)
        uri = "file://" + path
        agentls = os.path.abspath(sys.argv[-1])
        server = Server(sys.argv[1:-1] + [agentls], folder, home_with_config(home, agentls))
        server.request("initialize", {
            "processId": os.getpid(), "rootUri": "file://" + folder,
            "clientInfo": {"name": "train"},
            "initializationOptions": {"pluginEvents": ["reviewChanged", "turnChanged"]},
            "capabilities": {
                "general": {"positionEncodings": ["utf-16"]},
                "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True},
                              "workspaceFolders": True, "configuration": True},
                "window": {"showDocument": {"support": True}, "workDoneProgress": True},
                "textDocument": {"inlayHint": {}, "publishDiagnostics": {}},
            },
        })
        server.notify("initialized", {})
        doc = {"uri": uri}
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "text", "version": 1, "text": TEXT}})
        at = {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}
        for version in range(2, 22):
            server.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": at, "text": "x"}]})
            server.request("textDocument/codeAction", {
                "textDocument": doc, "range": at, "context": {"diagnostics": []}})
        server.request("workspace/executeCommand",
                       {"command": "agentls.newSession", "arguments": [{"agent": "helper"}]})
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

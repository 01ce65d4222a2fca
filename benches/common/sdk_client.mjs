// The ACP TypeScript SDK's client (ClientSideConnection, from npm) reading a recorded stream:
// the peer agentls is compared with in `acp_stream`. Usage:
//   node sdk_client.mjs SDK_ACP_JS REPLAY_SH STREAM SESSION
// Starts the replay agent, initializes, opens a session, prompts once and counts the text
// chunks until the prompt's answer; prints one JSON line: the time from the prompt to its
// answer (ms), the chunks seen, its CPU time (ms) and its peak RSS (bytes).
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkPath, script, stream, session] = process.argv.slice(2);
const acp = await import(pathToFileURL(sdkPath).href);
const agent = spawn("/bin/sh", [script], {
  env: { ...process.env, STREAM: stream, SESSION: session },
  stdio: ["pipe", "pipe", "inherit"],
});
let chunks = 0;
const client = {
  async sessionUpdate(note) {
    if (note.update.sessionUpdate === "agent_message_chunk") chunks++;
  },
  async requestPermission() {
    return { outcome: { outcome: "cancelled" } };
  },
};
const connection = new acp.ClientSideConnection(
  () => client,
  acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout)),
);
await connection.initialize({ protocolVersion: 1, clientCapabilities: {} });
const { sessionId } = await connection.newSession({ cwd: process.cwd(), mcpServers: [] });
const cpuBefore = process.cpuUsage();
const started = performance.now();
const answer = await connection.prompt({ sessionId, prompt: [{ type: "text", text: "go" }] });
const ms = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
console.log(JSON.stringify({
  ms,
  chunks,
  stopReason: answer.stopReason,
  cpuMs: (cpu.user + cpu.system) / 1000,
  peakRss: process.resourceUsage().maxRSS * 1024,
}));
agent.kill();
process.exit(0);

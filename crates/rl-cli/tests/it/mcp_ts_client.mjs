// The official MCP TypeScript SDK's client (@modelcontextprotocol/sdk, pinned in
// xtask/node/mcp-client) calling one of rl's tools as an agent built on it would: default
// options everywhere, so each request gives up after the SDK's DEFAULT_REQUEST_TIMEOUT_MSEC
// (60 s). A long tool answers `status: "running"` with a `test_id`; the same tool is then asked
// again with `{"test_id": ...}` every `poll_after_seconds` (at most 5 s) until it is not running.
//
// usage: node mcp_ts_client.mjs RL_BINARY TOOL ARGUMENTS_JSON [BOUND_SECONDS]
// RL_TEST_MCP_TS names the node_modules folder holding the SDK (`cargo xtask test` installs it);
// the bound (else RL_MCP_TS_BOUND_SECS, else 600) caps the whole exchange. `RL_BINARY mcp` gets
// this process's environment; its stderr is inherited. Prints one JSON line on stdout:
// {"first", "first_ms", "final", "polls", "max_call_ms"}; on any error {"error", ...} and exit 1.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const POLL_CAP_SECONDS = 5;

/** Imports `subpath` of the SDK as its package's exports map resolves it for `import`. */
async function sdk(subpath) {
  const modules = process.env.RL_TEST_MCP_TS;
  if (!modules) {
    throw new Error("RL_TEST_MCP_TS is not set: it names the node_modules folder with the SDK");
  }
  const root = join(modules, "@modelcontextprotocol", "sdk");
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  // An ESM file of the package imported by its absolute URL: a bare specifier would be looked
  // for beside this script, and NODE_PATH does not apply to `import`. The SDK's own imports
  // (zod, ajv, …) resolve from where its files are, in that node_modules.
  const target = manifest.exports["./*"].import.replace("*", subpath);
  return import(pathToFileURL(join(root, target)).href);
}

/** The JSON value a tool answered: its structured content, else its one text block. */
function answerOf(result) {
  if (result.structuredContent !== undefined) {
    return result.structuredContent;
  }
  const text = (result.content ?? []).find((block) => block.type === "text");
  if (!text) {
    throw new Error(`a tool result without JSON: ${JSON.stringify(result)}`);
  }
  return JSON.parse(text.text);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the exchange got so far, said with an error too. */
const state = { polls: 0, max_call_ms: 0 };

async function main() {
  const [rl, tool, argumentsJson, boundArgument] = process.argv.slice(2);
  if (!rl || !tool || argumentsJson === undefined) {
    throw new Error("usage: node mcp_ts_client.mjs RL_BINARY TOOL ARGUMENTS_JSON [BOUND_SECONDS]");
  }
  const toolArguments = JSON.parse(argumentsJson);
  const boundSeconds = Number(boundArgument ?? process.env.RL_MCP_TS_BOUND_SECS ?? 600);
  if (!(boundSeconds > 0)) {
    throw new Error(`the bound is not a positive number of seconds: ${boundArgument}`);
  }
  const deadline = Date.now() + boundSeconds * 1000;

  const { Client } = await sdk("client/index.js");
  const { StdioClientTransport } = await sdk("client/stdio.js");
  const transport = new StdioClientTransport({
    command: rl,
    args: ["mcp"],
    env: process.env,
    stderr: "inherit",
  });
  const client = new Client({ name: "rl-it-typescript", version: "0" }, { capabilities: {} });
  try {
    await client.connect(transport);
    // One call, exactly as an agent makes it: no options, so the SDK's default timeout holds.
    const call = async (callArguments) => {
      const started = Date.now();
      const result = await client.callTool({ name: tool, arguments: callArguments });
      const ms = Date.now() - started;
      state.max_call_ms = Math.max(state.max_call_ms, ms);
      const answer = answerOf(result);
      if (result.isError) {
        throw Object.assign(new Error(`${tool} answered an error`), { answer });
      }
      return { answer, ms };
    };

    const first = await call(toolArguments);
    state.first = first.answer;
    state.first_ms = first.ms;
    let answer = first.answer;
    while (answer?.status === "running" && typeof answer.test_id === "string") {
      const wait = Math.min(Math.max(Number(answer.poll_after_seconds) || 1, 0), POLL_CAP_SECONDS);
      if (Date.now() + wait * 1000 > deadline) {
        throw Object.assign(new Error(`still running after ${boundSeconds} s`), { answer });
      }
      await sleep(wait * 1000);
      answer = (await call({ test_id: answer.test_id })).answer;
      state.polls += 1;
    }
    process.stdout.write(
      `${JSON.stringify({
        first: state.first,
        first_ms: state.first_ms,
        final: answer,
        polls: state.polls,
        max_call_ms: state.max_call_ms,
      })}\n`,
    );
  } finally {
    // Closing stdin ends `rl mcp`; the transport signals it after a grace if it does not.
    await client.close().catch(() => {});
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    const said = { error: String(error?.message ?? error), ...state };
    if (error?.code !== undefined) {
      said.code = error.code;
    }
    if (error?.answer !== undefined) {
      said.answer = error.answer;
    }
    process.stdout.write(`${JSON.stringify(said)}\n`);
    process.exit(1);
  },
);

// jfsm-driver.ts: a minimal driver for the jfsm conformance suite (driver protocol v1).
//
// It reads one JSON request per line on stdin and writes one JSON reply per line on stdout.
// It answers `hello` and `shutdown`, and `unsupported_op` for every other op, so the suite
// runs end to end and reports each requirement that needs a missing op as not covered.
// Replace the body of `handlers` op by op with calls into your engine.
//
// Run it with Node 22.6 or later (`node --experimental-strip-types jfsm-driver.ts`; newer
// versions strip types by default), or, on Node 20, compile it with a pinned compiler:
//   npm install --save-dev typescript@5.9 @types/node@20
//   npx tsc --strict --target es2022 --module nodenext --moduleResolution nodenext \
//       --types node --outDir build jfsm-driver.ts
// and run `node build/jfsm-driver.js`.
// stdout is reserved for replies: log to stderr only.

import * as readline from "node:readline";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Args = { [key: string]: Json };

interface ErrorBody {
  code: string; // invalid_input, quota_exceeded, ..., or unsupported_op / internal_error
  message: string; // say which state holds after the error
  retryable?: boolean;
  state?: string;
  details?: { [key: string]: Json };
}

type Reply =
  | { id: number | null; ok: true; result: Json }
  | { id: number | null; ok: false; error: ErrorBody };

const PROTOCOL = 1;

/** An error with a stable code, answered as an error reply. */
class DriverError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

let compressUrl: string | null = null; // where every compress.v2 request must go
let stopping = false;

const handlers: { [op: string]: (args: Args) => Json | Promise<Json> } = {
  hello(args: Args): Json {
    if (args.protocol !== PROTOCOL) {
      throw new DriverError(
        "invalid_input",
        `protocol ${JSON.stringify(args.protocol)} is not supported (this driver speaks ` +
          `${PROTOCOL}); nothing changed`,
      );
    }
    const url = args.compressUrl;
    if (typeof url !== "string" || !/^https?:\/\//.test(url)) {
      throw new DriverError("invalid_input", "compressUrl must be an http(s) URL; nothing changed");
    }
    compressUrl = url;
    return {
      protocol: PROTOCOL,
      implementation: { name: "my-engine", version: "0.1.0", language: "typescript" },
      capabilities: {
        durableRestart: false, // true only if games survive a kill and restart
        concurrent: false, // this skeleton answers one request at a time
        thresholdOverride: false, // true only if hello.thresholds is honoured
      },
    };
  },

  shutdown(): Json {
    stopping = true; // the reply is written first, then the process exits
    return {};
  },

  // create_game, record_round, generate, intervene, ... : add them here.
};

function isObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

async function handle(line: string): Promise<Reply> {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch (error) {
    return { id: null, ok: false, error: { code: "invalid_input", message: `not JSON: ${error}` } };
  }
  const id = isObject(message) && Number.isInteger(message.id) ? (message.id as number) : null;
  if (!isObject(message) || id === null || id < 0 || typeof message.op !== "string" ||
      !isObject(message.args)) {
    const text = "a request is {id: integer >= 0, op: string, args: object}; nothing changed";
    return { id, ok: false, error: { code: "invalid_input", message: text } };
  }
  const op = message.op;
  if (!Object.prototype.hasOwnProperty.call(handlers, op)) {
    return { id, ok: false, error: { code: "unsupported_op", message: `op ${op} is not implemented` } };
  }
  try {
    const result = await handlers[op](message.args as Args);
    return { id, ok: true, result };
  } catch (error) {
    if (error instanceof DriverError) {
      return { id, ok: false, error: { code: error.code, message: error.message } };
    }
    // A bug in the engine: report it, never crash the driver.
    return { id, ok: false, error: { code: "internal_error", message: String(error) } };
  }
}

function write(reply: Reply): Promise<void> {
  return new Promise((resolve) => process.stdout.write(JSON.stringify(reply) + "\n", () => resolve()));
}

const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
let queue: Promise<void> = Promise.resolve();

input.on("line", (line: string) => {
  if (line.trim() === "") return;
  queue = queue.then(async () => {
    if (stopping) return;
    await write(await handle(line));
    if (stopping) process.exit(0);
  });
});

input.on("close", () => {
  queue.then(() => process.exit(0));
});

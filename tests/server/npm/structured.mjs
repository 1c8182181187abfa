// Structured output against independent validators (docs/serving.md "Structured output").
// node structured.mjs DSV4 CACHE_DIR WORKDIR BUILTIN_MODEL_DIR REQUESTS
//   1. REQUESTS random schemas x seeds (greedy and sampled) on a random tiny model and on the
//      built-in model: every answer with finish_reason "stop" parses and ajv validates it
//      against its schema; answers cut by max_tokens are counted and reported
//   2. client.chat.completions.parse with zodResponseFormat: message.parsed is the object
//   3. tool_choice named and "required" through the SDK, streamed and not: one call whose
//      arguments ajv validates against the tool's parameters
import { createRequire } from "node:module";
import { spawn, execFileSync } from "node:child_process";
import path from "node:path";

const [dsv4, cache, work, builtin, requestsArg] = process.argv.slice(2);
const require = createRequire(path.join(cache, "package.json"));
const { OpenAI } = require("openai");
const { zodResponseFormat } = require("openai/helpers/zod");
const { z } = require("zod");
const Ajv = require("ajv");
const addFormats = require("ajv-formats");
const REQUESTS = Number(requestsArg);

let failures = 0;
function check(cond, what) {
  if (!cond) {
    failures++;
    console.log(`FAIL: ${what}`);
  }
}

async function serve(modelDir) {
  const server = spawn(dsv4, ["serve", "--model", modelDir, "--port", "0", "--batch-size", "8", "--max-context", "1024"],
                       { stdio: ["ignore", "pipe", "pipe"] });
  process.on("exit", () => server.kill("SIGKILL"));
  let err = "";
  server.stderr.on("data", (d) => { err += d; });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    server.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    server.on("exit", () => reject(new Error(`dsv4 serve exited early: ${out}${err}`)));
  });
  return { server, client: new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 }) };
}

// Random schemas of the supported keywords (an independent generator from the C++ tests').
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
// String formats the engine generates (docs/serving.md "format"); "language" is no validator's: an
// annotation, any string.
const FORMATS = ["date-time", "email", "ipv6", "uri", "uri-reference", "uri-template", "url", "json-pointer",
                 "relative-json-pointer", "regex", "byte", "iso-time", "language"];
function randomSchema(r, depth = 0) {
  const pick = Math.floor(r() * (depth > 2 ? 8 : 16));
  switch (pick) {
    case 7: return { type: "string", format: FORMATS[Math.floor(r() * FORMATS.length)] };
    case 0: return { type: "string", maxLength: 1 + Math.floor(r() * 8) };
    case 1: return { type: "integer" };
    case 2: return { type: "number" };
    case 3: return { type: ["boolean", "null"] };
    case 4: return { enum: ["north", "south", 3, null, [1, 2], { k: "v" }] };
    case 5: return { const: "fixed" };
    case 6: return { type: "string", minLength: 2, maxLength: 4 };
    case 8:
    case 9: {
      const properties = {}, required = [];
      const n = 1 + Math.floor(r() * 4);
      for (let i = 0; i < n; ++i) {
        const key = ["id", "name", "tags", "ok", "n\"q", "é"][Math.floor(r() * 6)] + i;
        properties[key] = randomSchema(r, depth + 1);
        if (r() < 0.6) required.push(key);
      }
      if (r() < 0.25) properties.never = { allOf: [{ const: 1 }, { const: 2 }] };  // optional, no value: never written
      return { type: "object", properties, required, additionalProperties: false, title: "t" };
    }
    case 10: {
      const lo = Math.floor(r() * 2);
      return { type: "array", items: randomSchema(r, depth + 1), minItems: lo, maxItems: lo + Math.floor(r() * 3) };
    }
    case 11: return { type: "string", pattern: "^(?!ab|.*x$)[a-cx]{1,5}$" };  // lookahead at the start
    case 12: return { type: "string", pattern: "\\bb", maxLength: 6 };  // word boundary
    case 13: {  // closed objects {} matches both: each generates a key the other lacks
      const side = (key) => ({ type: "object", properties: { [key]: randomSchema(r, depth + 1) },
                               additionalProperties: false });
      return { oneOf: [side("left"), side("top")] };
    }
    case 14: {  // uniqueItems over items kept as hashes (docs/serving.md)
      const items = [{ type: "integer" }, { type: "string", pattern: "^[a-c]{1,2}x$" },
                     { enum: Array.from({ length: 70 }, (_, k) => `v${k}`) },
                     { type: "object", properties: { id: { type: "string" }, n: { type: "integer" } }, required: ["id"],
                       additionalProperties: false },
                     // no required property: the one with the most values is written in every item
                     { type: "object", properties: { on: { type: "boolean" }, at: { type: "number" } },
                       additionalProperties: false }][Math.floor(r() * 5)];
      return { type: "array", items, uniqueItems: true, minItems: Math.floor(r() * 2), maxItems: 4 };
    }
    default: return { anyOf: [randomSchema(r, depth + 1), randomSchema(r, depth + 1)] };
  }
}

const ajv = new Ajv({ strict: false, logger: false });
addFormats(ajv);

async function validityRun(name, modelDir, count, seed0) {
  const { server, client } = await serve(modelDir);
  const r = rng(seed0);
  let stopped = 0, cut = 0;
  const jobs = [];
  for (let i = 0; i < count; ++i) {
    const schema = randomSchema(r);
    jobs.push(async () => {
      const reply = await client.chat.completions.create({
        model: path.basename(modelDir), messages: [{ role: "user", content: `Give item ${i}` }], max_tokens: 96,
        temperature: i % 3 === 0 ? 0 : 0.9, seed: seed0 + i,
        response_format: { type: "json_schema", json_schema: { name: "item", strict: true, schema } },
      });
      const c = reply.choices[0];
      if (c.finish_reason !== "stop") {
        cut++;
        return;
      }
      stopped++;
      let value;
      try {
        value = JSON.parse(c.message.content);
      } catch (e) {
        check(false, `${name}: not JSON: ${JSON.stringify(c.message.content)} for ${JSON.stringify(schema)}`);
        return;
      }
      check(ajv.validate(schema, value),
            `${name}: ${JSON.stringify(value)} fails ${JSON.stringify(schema)}: ${ajv.errorsText()}`);
    });
  }
  for (let i = 0; i < jobs.length; i += 16) await Promise.all(jobs.slice(i, i + 16).map((j) => j()));
  console.log(`${name}: ${count} requests, ${stopped} ended with stop and validate, ${cut} cut by max_tokens`);
  check(stopped > count / 2, `${name}: too few answers ended (${stopped} of ${count})`);
  server.kill("SIGTERM");
  return client;
}

const tiny = path.join(work, "tiny");
execFileSync(dsv4, ["make-tiny", "--out", tiny], { stdio: "ignore" });
await validityRun("tiny", tiny, REQUESTS, 1000);
await validityRun("built-in", builtin, Math.max(20, REQUESTS / 4), 5000);

// 2. The SDK's parse helper with a zod schema.
{
  const { server, client } = await serve(tiny);
  const Item = z.object({ name: z.string().max(8), count: z.number().int(), tags: z.array(z.boolean()).max(2) });
  const parsed = await client.chat.completions.parse({
    model: "tiny", messages: [{ role: "user", content: "An item" }], max_tokens: 400, temperature: 0,
    response_format: zodResponseFormat(Item, "item"),
  });
  const msg = parsed.choices[0].message;
  check(parsed.choices[0].finish_reason === "stop", `parse: finish_reason ${parsed.choices[0].finish_reason}`);
  check(msg.parsed !== null && typeof msg.parsed === "object" && Item.safeParse(msg.parsed).success,
        `parse: ${JSON.stringify(msg)}`);
  server.kill("SIGTERM");
}

// 3. A forced tool call (named and "required") through the SDK, streamed and not: one call to
// the tool whose arguments ajv validates against its parameters; the stream helper's call
// equals the non-streamed one.
{
  const { server, client } = await serve(tiny);
  const parameters = { type: "object", properties: { city: { type: "string", maxLength: 10 }, days: { type: "integer" },
                                                     units: { enum: ["c", "f"] } }, required: ["city"] };
  const tools = [{ type: "function", function: { name: "get_weather", parameters } },
                 { type: "function", function: { name: "now", parameters: { type: "object", properties: {} } } }];
  let called = 0;
  for (const tool_choice of [{ type: "function", function: { name: "get_weather" } }, "required"]) {
    for (let seed = 1; seed <= 6; ++seed) {
      const params = { model: "tiny", messages: [{ role: "user", content: "Weather?" }], max_tokens: 250,
                       temperature: 0.8, seed, tools, tool_choice };
      const full = await client.chat.completions.create(params);
      const streamed = await client.chat.completions.stream(params).finalChatCompletion();
      const calls = full.choices[0].message.tool_calls ?? [];
      const what = `tool_choice ${JSON.stringify(tool_choice)} seed ${seed}`;
      if (full.choices[0].finish_reason !== "tool_calls") {
        check(full.choices[0].finish_reason === "length", `${what}: finish ${full.choices[0].finish_reason}`);
        continue;
      }
      ++called;
      check(calls.length === 1, `${what}: ${JSON.stringify(full.choices[0].message)}`);
      const call = calls[0].function;
      const schema = tools.find((t) => t.function.name === call.name)?.function.parameters;
      check(schema !== undefined && (typeof tool_choice === "string" || call.name === "get_weather"), `${what}: ${call.name}`);
      check(schema === undefined || ajv.validate(schema, JSON.parse(call.arguments)),
            `${what}: ${call.arguments} fails: ${ajv.errorsText()}`);
      const sc = streamed.choices[0].message.tool_calls ?? [];
      check(sc.length === 1 && sc[0].function.name === call.name && sc[0].function.arguments === call.arguments,
            `${what}: streamed ${JSON.stringify(sc)} vs ${JSON.stringify(calls)}`);
    }
  }
  console.log(`forced tool calls: ${called} of 12 answered with a call, the rest cut by max_tokens`);
  check(called >= 6, "too few forced calls completed");
  server.kill("SIGTERM");
}

console.log(failures === 0 ? "structured output: all checks passed" : `${failures} failures`);
process.exit(failures === 0 ? 0 : 1);

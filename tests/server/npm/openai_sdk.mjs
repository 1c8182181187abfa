// dsv4 serve driven by the official OpenAI Node SDK.
// node openai_sdk.mjs DSV4 CACHE_DIR WORKDIR REPLAY_TOOL
//   1. completions and chat, streaming and not (greedy: the stream's text equals the response's)
//   2. 32 concurrent streams with per-request seeds: each text equals offline
//      `dsv4 generate --prompt` for the same prompt, seed and sampling parameters
//   3. a bounded load run (a few hundred requests, streamed and not): every request answered
//      exactly once with a distinct id, the server's RSS flat (before/after, with slack)
//   4. tool calls through the SDK's stream helpers (chat.completions.stream, finalChatCompletion):
//      the accumulated calls equal the non-streamed ones, on the server's chunks for a scripted
//      generation with calls (REPLAY_TOOL: the protocol layer without an engine) and on dsv4
//      serve with tools, tool_choice "none" and parallel_tool_calls false
//   5. SIGTERM: exit code 0
import { createRequire } from "node:module";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const [dsv4, cache, work, replayTool] = process.argv.slice(2);
const require = createRequire(path.join(cache, "package.json"));
const { OpenAI } = require("openai");

let failures = 0;
function check(cond, what) {
  if (!cond) {
    failures++;
    console.log(`FAIL: ${what}`);
  }
}

const model = path.join(work, "tiny");
execFileSync(dsv4, ["make-tiny", "--out", model], { stdio: "ignore" });

// The server: a free port, read from its first line.
const MAX_CONTEXT = 1024;  // the tools preamble alone is ~600 tokens
const server = spawn(dsv4, ["serve", "--model", model, "--port", "0", "--batch-size", "8", "--max-context",
                            String(MAX_CONTEXT), "--max-queue", "1024", "--http-threads", "96"],
                     { stdio: ["ignore", "pipe", "pipe"] });
process.on("exit", () => server.kill("SIGKILL"));  // never leave it running
let serverErr = "";
server.stderr.on("data", (d) => { serverErr += d; });
const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
const baseURL = await new Promise((resolve, reject) => {
  let out = "";
  server.stdout.on("data", (d) => {
    out += d;
    const m = out.match(/listening on (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  server.on("exit", () => reject(new Error(`dsv4 serve exited early: ${out}${serverErr}`)));
});
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const served = (await client.models.list()).data;
check(served.length === 1 && served[0].id === "tiny", `models.list: ${JSON.stringify(served)}`);

// 1. Completions and chat, streaming and not.
{
  const params = { model: "tiny", prompt: "The quick brown fox", max_tokens: 16, temperature: 0 };
  const full = await client.completions.create(params);
  check(full.object === "text_completion" && typeof full.choices[0].text === "string", "completion shape");
  check(full.usage.completion_tokens >= 1 && full.usage.total_tokens === full.usage.prompt_tokens +
        full.usage.completion_tokens, `completion usage ${JSON.stringify(full.usage)}`);
  // finish_reason is one of OpenAI's values; dsv4's own reason is stop_reason (vLLM's field).
  check(["stop", "length"].includes(full.choices[0].finish_reason) && "stop_reason" in full.choices[0],
        `completion finish ${full.choices[0].finish_reason} stop_reason ${full.choices[0].stop_reason}`);
  let streamed = "";
  let finish = null;
  let stopReason;
  let usage = null;
  const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of stream) {
    if (chunk.choices.length) {
      streamed += chunk.choices[0].text;
      finish = chunk.choices[0].finish_reason ?? finish;
      stopReason = chunk.choices[0].stop_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  check(streamed === full.choices[0].text, `completion stream "${streamed}" != "${full.choices[0].text}"`);
  check(finish === full.choices[0].finish_reason, `completion stream finish ${finish}`);
  check(stopReason === full.choices[0].stop_reason, `completion stream stop_reason ${stopReason}`);
  check(usage && usage.completion_tokens === full.usage.completion_tokens, "completion stream usage");
  // A stop string met in the greedy text (two characters from the third on, no U+FFFD: bytes
  // that are not UTF-8): finish_reason "stop", stop_reason the string.
  const greedy = { ...params, ignore_eos: true };
  const text = Array.from((await client.completions.create(greedy)).choices[0].text);
  let stop = "";
  for (let i = 2; i + 2 <= text.length && !stop; i++)
    if (!text.slice(i, i + 2).includes("\uFFFD")) stop = text.slice(i, i + 2).join("");
  check(stop.length > 0, `no stop string in the greedy text ${JSON.stringify(text.join(""))}`);
  const cut = await client.completions.create({ ...greedy, stop: [stop] });
  check(cut.choices[0].finish_reason === "stop" && cut.choices[0].stop_reason === stop &&
        cut.choices[0].text === text.join("").split(stop)[0],
        `stop string ${JSON.stringify(stop)}: ${JSON.stringify(cut.choices[0])}`);

  const chatParams = { model: "tiny", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi there" }],
                       max_tokens: 16, temperature: 0.8, seed: 11 };
  const chat = await client.chat.completions.create(chatParams);
  check(chat.object === "chat.completion" && chat.choices[0].message.role === "assistant", "chat shape");
  let content = "";
  let role = null;
  for await (const chunk of await client.chat.completions.create({ ...chatParams, stream: true })) {
    const d = chunk.choices[0]?.delta ?? {};
    role = role ?? d.role;
    content += d.content ?? "";
  }
  check(role === "assistant", "chat stream role");
  check(content === (chat.choices[0].message.content ?? ""), `chat stream "${content}" != "${chat.choices[0].message.content}"`);
  const withLp = await client.chat.completions.create({ ...chatParams, logprobs: true, top_logprobs: 3 });
  check(withLp.choices[0].logprobs.content.length === withLp.usage.completion_tokens &&
        withLp.choices[0].logprobs.content.every((t) => t.top_logprobs.length === 3), "chat logprobs");
  // Errors surface as the SDK's typed errors.
  try {
    await client.completions.create({ model: "nope", prompt: "x" });
    check(false, "unknown model accepted");
  } catch (e) {
    check(e.status === 404 && e.code === "model_not_found", `unknown model: ${e.status} ${e.code}`);
  }
  try {
    await client.chat.completions.create({ ...chatParams, n: 9 });
    check(false, "n = 9 accepted (--max-n 8)");
  } catch (e) {
    check(e.status === 400 && e.param === "n", `n = 9: ${e.status} ${e.param}`);
  }
  // Several choices through the SDK: indices 0 and 1, choice 0 as the single answer, the prompt
  // counted once.
  const two = await client.chat.completions.create({ ...chatParams, n: 2 });
  const one = await client.chat.completions.create(chatParams);
  check(two.choices.length === 2 && two.choices[0].index === 0 && two.choices[1].index === 1, "n = 2: indices");
  check(two.choices[0].message.content === one.choices[0].message.content, "n = 2: choice 0 = the single answer");
  check(two.usage.prompt_tokens === one.usage.prompt_tokens, "n = 2: the prompt counted once");
}

// 2. 32 concurrent streams == offline generate (same prompts, seeds, sampling).
{
  const words = ["alpha", "river", "code", "世界", "seven", "blue", "Привет", "data"];
  const prompts = Array.from({ length: 32 }, (_, i) => `${words[i % 8]} ${words[(i * 3 + 1) % 8]} ${i}`);
  const T = 0.9, P = 0.95, SEED = 1000, N = 24;
  const texts = await Promise.all(prompts.map(async (prompt, i) => {
    let text = "";
    const stream = await client.completions.create({ model: "tiny", prompt, max_tokens: N, temperature: T, top_p: P,
                                                     seed: SEED + i, stream: true });
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
    return text;
  }));
  const args = ["generate", "--model", model, "--max-tokens", String(N), "--temperature", String(T), "--top-p",
                String(P), "--seed", String(SEED), "--max-context", String(MAX_CONTEXT), "--batch-size", "8",
                "--verbose", "--quiet-steps"];
  for (const p of prompts) args.push("--prompt", p);
  const out = execFileSync(dsv4, args, { maxBuffer: 1 << 26 }).toString();
  const offline = [];
  for (const line of out.split("\n")) {
    const m = line.match(/^request (\d+) text: (.*)$/);
    if (m) offline[Number(m[1])] = JSON.parse(m[2]);
  }
  check(offline.length === 32, `generate printed ${offline.length} texts`);
  let same = 0;
  for (let i = 0; i < 32; i++) {
    if (texts[i] === offline[i]) same++;
    else console.log(`stream ${i}: server ${JSON.stringify(texts[i])} != generate ${JSON.stringify(offline[i])}`);
  }
  check(same === 32, `${same}/32 concurrent streams equal offline generate`);
  check(new Set(texts).size > 16 && texts.every((t) => t.length > 0), "the 32 texts are not distinct and non-empty");
  // They really shared steps: some step ran more than 4 of them.
  const metrics = await (await fetch(`${baseURL}/metrics`)).text();
  const bucket = (le) => {
    const prefix = `dsv4_batch_size_bucket{le="${le}"} `;
    return Number(metrics.split("\n").find((l) => l.startsWith(prefix)).slice(prefix.length));
  };
  check(bucket("+Inf") > bucket("4"), "no step batched more than 4 requests");
}

// 3. Load: every request answered exactly once; RSS flat.
function rssKiB() {
  const status = fs.readFileSync(`/proc/${server.pid}/status`, "utf8");
  return Number(status.match(/VmRSS:\s+(\d+)/)[1]);
}
async function load(n, concurrency, tag) {
  const answers = new Map();  // request tag -> response ids
  let next = 0;
  async function worker() {
    while (next < n) {
      const i = next++;
      const key = `${tag}-${i}`;
      const prompt = `load ${key}`;
      let id = null;
      if (i % 2) {
        for await (const chunk of await client.completions.create({ model: "tiny", prompt, max_tokens: 6, stream: true, seed: i }))
          id = chunk.id;
      } else {
        id = (await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: prompt }],
                                                     max_tokens: 6, seed: i })).id;
      }
      answers.set(key, [...(answers.get(key) ?? []), id]);
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  return answers;
}
{
  await load(64, 16, "warm");
  const before = rssKiB();
  const t0 = Date.now();
  const answers = await load(320, 16, "run");
  const seconds = (Date.now() - t0) / 1000;
  const after = rssKiB();
  const ids = new Set();
  let dup = 0;
  for (const [, list] of answers) {
    if (list.length !== 1) dup++;
    for (const id of list) ids.add(id);
  }
  check(answers.size === 320 && dup === 0, `load: ${answers.size} of 320 answered, ${dup} answered more than once`);
  check(ids.size === 320, `load: ${ids.size} distinct response ids for 320 requests`);
  console.log(`load: 320 requests in ${seconds.toFixed(1)} s (${(320 / seconds).toFixed(1)} req/s); ` +
              `RSS ${(before / 1024).toFixed(1)} -> ${(after / 1024).toFixed(1)} MiB`);
  check(after <= before * 1.25 + 16 * 1024, `server RSS grew from ${before} KiB to ${after} KiB`);
}

// 4. Tool calls through the SDK's stream helpers.
const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object",
                 properties: { city: { type: "string" }, days: { type: "integer" } } } } }];
// The stream helper's final message (its own accumulation of the chunks) and the number of
// argument deltas it reported.
async function streamed(c, params) {
  const stream = c.chat.completions.stream(params);
  let deltas = 0;
  stream.on("tool_calls.function.arguments.delta", () => { deltas++; });
  const final = await stream.finalChatCompletion();
  return { final, deltas };
}
const callsOf = (choice) => (choice.message.tool_calls ?? []).map((t) => (
  { id: t.id, type: t.type, name: t.function.name, arguments: t.function.arguments }));
{
  // The server's chunks for a scripted generation with two calls, one character per update.
  const text = "Let me check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n" +
    "<｜DSML｜parameter name=\"city\" string=\"true\">São \"Paulo\"\n\\ 世界</｜DSML｜parameter>\n" +
    "<｜DSML｜parameter name=\"days\" string=\"false\">[2, {\"a\": null}]</｜DSML｜parameter>\n" +
    "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"now\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>";
  const dir = path.join(work, "replay");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "text"), text);
  execFileSync(replayTool, [path.join(dir, "text"), "1", dir]);
  const sse = fs.readFileSync(path.join(dir, "stream.sse"));
  const complete = fs.readFileSync(path.join(dir, "complete.json"));
  const replay = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => { body += d; });
    req.on("end", () => {
      const stream = JSON.parse(body).stream === true;
      res.writeHead(200, { "content-type": stream ? "text/event-stream" : "application/json" });
      res.end(stream ? sse : complete);
    });
  });
  await new Promise((resolve) => replay.listen(0, "127.0.0.1", resolve));
  const replayClient = new OpenAI({ baseURL: `http://127.0.0.1:${replay.address().port}/v1`, apiKey: "unused",
                                    maxRetries: 0 });
  const params = { model: "tiny", messages: [{ role: "user", content: "weather?" }], tools };
  const whole = await replayClient.chat.completions.create(params);
  const { final, deltas } = await streamed(replayClient, params);
  const want = callsOf(whole.choices[0]);
  check(want.length === 2 && want[0].name === "get_weather" &&
        JSON.stringify(JSON.parse(want[0].arguments)) === JSON.stringify({ city: "São \"Paulo\"\n\\ 世界", days: [2, { a: null }] }) &&
        want[1].arguments === "{}", `replayed complete calls ${JSON.stringify(want)}`);
  check(JSON.stringify(callsOf(final.choices[0])) === JSON.stringify(want),
        `stream helper calls ${JSON.stringify(callsOf(final.choices[0]))} != ${JSON.stringify(want)}`);
  check(final.choices[0].message.content === whole.choices[0].message.content,
        `stream helper content ${final.choices[0].message.content}`);
  check(final.choices[0].finish_reason === "tool_calls" && whole.choices[0].finish_reason === "tool_calls",
        `finish ${final.choices[0].finish_reason} / ${whole.choices[0].finish_reason}`);
  check(deltas > 20, `${deltas} argument deltas: the arguments were not streamed as generated`);
  replay.close();
}
{
  // dsv4 serve: tools rendered, no call allowed, stop after the first call; greedy, so the
  // stream helper's message equals the complete one.
  const params = { model: "tiny", messages: [{ role: "user", content: "Weather in Paris?" }], tools,
                   tool_choice: "none", parallel_tool_calls: false, max_tokens: 24, temperature: 0 };
  const whole = await client.chat.completions.create(params);
  const { final } = await streamed(client, params);
  check(JSON.stringify(callsOf(final.choices[0])) === JSON.stringify(callsOf(whole.choices[0])) &&
        final.choices[0].message.content === whole.choices[0].message.content &&
        final.choices[0].finish_reason === whole.choices[0].finish_reason,
        `served stream helper ${JSON.stringify(final.choices[0])} != ${JSON.stringify(whole.choices[0])}`);
  // tool_choice "none" forbids ｜DSML｜ over the client's own bias: +100 makes greedy write it
  // every step under "auto", never under "none".
  const dsml = (await (await fetch(`${baseURL}/tokenize`, { method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: "｜DSML｜", add_special_tokens: false }) })).json()).tokens;
  check(dsml.length === 1, `｜DSML｜ is not one token: ${JSON.stringify(dsml)}`);
  const pushed = { ...params, max_tokens: 4, ignore_eos: true, logit_bias: { [dsml[0]]: 100 } };
  const auto = await client.chat.completions.create({ ...pushed, tool_choice: "auto" });
  const none = await client.chat.completions.create(pushed);
  check(auto.choices[0].message.content === "｜DSML｜".repeat(4), `logit_bias +100 on ｜DSML｜: ${auto.choices[0].message.content}`);
  check(!none.choices[0].message.content.includes("｜DSML｜") && none.usage.completion_tokens === 4,
        `tool_choice none with +100 on ｜DSML｜: ${JSON.stringify(none.choices[0].message)}`);
}

// 5. SIGTERM: exit code 0.
server.kill("SIGTERM");
const { code, signal } = await exited;
check(code === 0, `dsv4 serve exited with ${code} (signal ${signal}) after SIGTERM: ${serverErr.slice(-500)}`);
if (failures) {
  console.log(`${failures} failures`);
  process.exit(1);
}
console.log("openai_sdk: all checks passed");

// dsv4 serve on 2 ranks (mpirun) with the prefix cache, driven by the official OpenAI Node SDK.
// node ranks_prefix.mjs DSV4 CACHE_DIR WORKDIR MPIRUN-ARGS...
//   1. a conversation, then the same conversation resent with one more turn: the resend reports
//      usage.prompt_tokens_details.cached_tokens > 0 (its prefix hit on the rank holding it)
//   2. the same request twice (greedy): the second hits and answers the same text
//   3. /metrics: hits and queries per rank, the hits on the rank that served the conversation
//   4. SIGTERM to rank 0: every rank exits 0
import { createRequire } from "node:module";
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const [dsv4, cache, work, ...mpirun] = process.argv.slice(2);
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

const server = spawn(mpirun[0], [...mpirun.slice(1), "-np", "2", dsv4, "serve", "--model", model, "--port", "0",
                                 "--tp", "2", "--page-tokens", "16", "--max-context", "1024"],
                     { stdio: ["ignore", "pipe", "pipe"] });
process.on("exit", () => server.kill("SIGKILL"));  // never leave it running
let serverErr = "";
server.stderr.on("data", (d) => { serverErr += d; });
const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
let serverOut = "";
const baseURL = await new Promise((resolve, reject) => {
  server.stdout.on("data", (d) => {
    serverOut += d;
    const m = serverOut.match(/listening on (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  server.on("exit", () => reject(new Error(`dsv4 serve exited early: ${serverOut}${serverErr}`)));
});
check(/prefix cache \d+ blocks/.test(serverOut), `the prefix cache is on by default on ranks: ${serverOut}`);
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });

const system = "You are a careful assistant. Answer in one short sentence. ".repeat(6);
const cached = (r) => r.usage?.prompt_tokens_details?.cached_tokens ?? 0;

// 1. A conversation resent with one more turn.
const turn1 = [{ role: "system", content: system }, { role: "user", content: "Name a colour." }];
const a1 = await client.chat.completions.create({ model: "tiny", messages: turn1, max_tokens: 8, temperature: 0 });
check(a1.usage.prompt_tokens > 64, `a long enough prompt: ${JSON.stringify(a1.usage)}`);
const turn2 = [...turn1, { role: "assistant", content: a1.choices[0].message.content ?? "" },
               { role: "user", content: "And another one?" }];
const a2 = await client.chat.completions.create({ model: "tiny", messages: turn2, max_tokens: 8, temperature: 0 });
check(cached(a2) >= 32, `the resent conversation hit: ${JSON.stringify(a2.usage)}`);

// 2. The same request twice.
const again = await client.chat.completions.create({ model: "tiny", messages: turn2, max_tokens: 8, temperature: 0 });
check(cached(again) >= cached(a2), `the repeat hit at least as much: ${JSON.stringify(again.usage)}`);
check(again.choices[0].message.content === a2.choices[0].message.content,
      `a hit answers as the first time: ${again.choices[0].message.content} vs ${a2.choices[0].message.content}`);

// 3. Hits per rank in /metrics.
const metrics = await (await fetch(`${baseURL}/metrics`)).text();
const per = (name) => [...metrics.matchAll(new RegExp(`^${name}\\{rank="(\\d)"\\} (\\d+)`, "gm"))]
  .map((m) => [Number(m[1]), Number(m[2])]);
const hits = per("dsv4_prefix_cache_hits_total"), queries = per("dsv4_prefix_cache_queries_total");
check(hits.length === 2 && queries.length === 2, `two ranks' counters: ${JSON.stringify({ hits, queries })}`);
const hitSum = hits.reduce((s, [, n]) => s + n, 0);
check(hitSum === cached(a2) + cached(again), `hits add up to the requests' cached_tokens: ${hitSum}`);

// 4. SIGTERM to rank 0 (mpirun would forward a signal sent to it, but then exit 1).
let rank0 = null;
for (const pid of fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
  try {
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
    const env = fs.readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    if (cmd.includes(model) && cmd.includes("serve") && env.includes("OMPI_COMM_WORLD_RANK=0")) rank0 = Number(pid);
  } catch { /* gone or not ours */ }
}
check(rank0 !== null, "rank 0's process");
if (rank0 !== null) process.kill(rank0, "SIGTERM");
const { code, signal } = await exited;
check(code === 0, `mpirun exited with ${code} (signal ${signal}) after SIGTERM to rank 0: ${serverErr.slice(-500)}`);
if (failures) {
  console.log(`${failures} failures`);
  process.exit(1);
}
console.log("ranks_prefix: all checks passed");

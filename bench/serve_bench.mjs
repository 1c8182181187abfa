// Throughput of a running dsv4 serve at several client concurrencies (plain fetch, Node >= 18).
// node bench/serve_bench.mjs URL [--clients 1,8,32] [--requests N] [--max-tokens N] [--stream] [--ignore-eos]
// Each client sends /v1/completions requests back to back (distinct prompts, seeds, temperature
// 0.8) until N requests are done; prints requests/s and completion tokens/s per level.
const args = process.argv.slice(2);
const url = args[0];
if (!url) {
  console.error("usage: node bench/serve_bench.mjs URL [--clients 1,8,32] [--requests N] [--max-tokens N] [--stream] " +
                "[--ignore-eos]");
  process.exit(2);
}
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const levels = opt("--clients", "1,8,32").split(",").map(Number);
const requests = Number(opt("--requests", "64"));
const maxTokens = Number(opt("--max-tokens", "32"));
const stream = args.includes("--stream");
const ignoreEos = args.includes("--ignore-eos");  // every request generates max_tokens

async function one(i) {
  const body = { prompt: `benchmark prompt number ${i}: once upon a time`, max_tokens: maxTokens, temperature: 0.8,
                 seed: i, stream, ignore_eos: ignoreEos, ...(stream ? { stream_options: { include_usage: true } } : {}) };
  const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
                                                      body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  if (!stream) return (await res.json()).usage.completion_tokens;
  const text = await res.text();
  const usage = text.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)))
    .find((c) => c.usage)?.usage;
  return usage.completion_tokens;
}

console.log(`dsv4 serve at ${url}: ${requests} requests per level, max_tokens ${maxTokens}${stream ? ", streamed" : ""}`);
for (const clients of levels) {
  let next = 0, tokens = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < requests) {
      const n = await one(next++);
      tokens += n;
    }
  }));
  const s = (performance.now() - t0) / 1000;
  console.log(`clients ${String(clients).padStart(3)}: ${(requests / s).toFixed(2)} requests/s, ` +
              `${(tokens / s).toFixed(1)} tokens/s (${tokens} tokens in ${s.toFixed(2)} s)`);
}

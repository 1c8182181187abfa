// A stand-in for `dsv4 serve` speaking just enough of its HTTP API to exercise the chat
// page (apps/server/web/chat.html) without the engine: GET / (the page), GET /health,
// GET /v1/models, POST /v1/chat/completions streaming OpenAI SSE chunks (reasoning_content
// first when "thinking" is true; a slow stream when max_tokens >= 500, for the stop
// button), and an OpenAI error body for a user message that contains "please fail".
// Usage: node mock_server.mjs PAGE_FILE PORT   (prints "listening PORT")
import { readFileSync } from "node:fs";
import http from "node:http";

const [page, port] = process.argv.slice(2);
const html = readFileSync(page);
const modelId = "mock-dsv4";

function json(res, status, body) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

function error(res, status, message, param) {
  json(res, status, { error: { message, type: "invalid_request_error", param, code: null } });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function chat(req, res, body) {
  let request;
  try { request = JSON.parse(body); } catch { return error(res, 400, "request body is not valid JSON", null); }
  if (!Array.isArray(request.messages) || request.messages.length === 0)
    return error(res, 400, "messages: must be a non-empty array", "messages");
  if (request.model !== undefined && request.model !== modelId)
    return error(res, 404, `The model '${request.model}' does not exist`, "model");
  const last = request.messages[request.messages.length - 1];
  if (String(last.content).includes("please fail"))
    return error(res, 400, "temperature: must be in [0, 2], got 7", "temperature");
  const thinking = request.thinking === true;
  const slow = request.max_tokens >= 500;
  const turn = request.messages.filter((m) => m.role === "user").length;
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  let closed = false;
  res.on("close", () => { closed = true; });
  const id = "chatcmpl-mock" + Date.now();
  const chunk = (delta, finish) => `data: ${JSON.stringify({
    id, object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: modelId,
    choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  res.write(chunk({ role: "assistant" }, null));
  const pieces = [];
  if (thinking) for (const w of ["The user ", "wants a ", "short ", "reply."]) pieces.push({ reasoning_content: w });
  const words = slow ? Array.from({ length: 400 }, (_, i) => `word${i} `)
                     : [`Reply `, `to turn ${turn}: `, "héllo ", "wörld ", "😀", "\n", "done."];
  for (const w of words) pieces.push({ content: w });
  let n = 0;
  for (const p of pieces) {
    if (closed) return;
    res.write(chunk(p, null));
    n += 1;
    await sleep(slow ? 50 : 15);
  }
  res.write(chunk({}, "stop"));
  if (request.stream_options && request.stream_options.include_usage)
    res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", model: modelId, choices: [],
                                        usage: { prompt_tokens: 10 * turn, completion_tokens: n, total_tokens: 10 * turn + n } })}\n\n`);
  res.write("data: [DONE]\n\n");
  res.end();
}

const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (d) => { body += d; });
  req.on("end", () => {
    if (req.method === "GET" && req.url === "/") {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
      return res.end(html);
    }
    if (req.method === "GET" && req.url === "/health") return json(res, 200, { status: "ok" });
    if (req.method === "GET" && req.url === "/v1/models")
      return json(res, 200, { object: "list", data: [{ id: modelId, object: "model", owned_by: "dsv4" }] });
    if (req.method === "POST" && req.url === "/v1/chat/completions") return void chat(req, res, body);
    error(res, 404, `no route for ${req.method} ${req.url}`, null);
  });
});
server.listen(Number(port), "127.0.0.1", () => console.log("listening", server.address().port));

// Drives the chat page (apps/server/web/chat.html) in headless Chromium with playwright-core:
// loads it, checks the model id from /v1/models, sends a message and waits for the streamed
// answer to finish, sends a second turn with thinking on (the request carries the history and
// "thinking": true; reasoning shows in its own block), stops a long answer, shows a server
// error's message, and saves a screenshot.
// Usage: node chat_page.mjs CACHE_DIR URL OUT_DIR MODE
//   CACHE_DIR holds node_modules/playwright-core; MODE: "mock" (mock_server.mjs: exact texts,
//   reasoning and a slow stream guaranteed) or "real" (dsv4 serve on the random tiny model:
//   structure only — text streamed, finished, no error).
// First waits (up to 120 s) for GET /health, then checks that GET / returns the page
// (byte for byte the file PAGE_FILE when that is set).
// Environment: CHROMIUM (default /usr/bin/chromium); SERVER_PID (stop waiting if it exits);
// PAGE_FILE.
// Exit 0 on success, 1 on failure.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [cache, url, outDir, mode] = process.argv.slice(2);
const require = createRequire(path.join(cache, "package.json"));
const { chromium } = require("playwright-core");
const mock = mode === "mock";
const answerTimeout = 180_000;

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
  console.log("ok:", what);
}

async function waitForServer() {
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      if ((await fetch(new URL("/health", url))).ok) break;
    } catch { /* not listening yet */ }
    if (process.env.SERVER_PID) {
      try { process.kill(Number(process.env.SERVER_PID), 0); } catch { throw new Error("the server exited before answering /health"); }
    }
    if (Date.now() > deadline) throw new Error("no answer from /health within 120 s");
    await new Promise((r) => setTimeout(r, 200));
  }
  const r = await fetch(url);
  const bytes = Buffer.from(await r.arrayBuffer());
  const html = bytes.toString("utf8");
  if (!r.ok || !html.includes("<title>dsv4 chat</title>"))
    throw new Error(`GET / did not return the chat page (HTTP ${r.status}): ${html.slice(0, 200)}`);
  const type = r.headers.get("content-type") || "";
  if (!type.startsWith("text/html")) throw new Error(`GET / has Content-Type "${type}", not text/html`);
  if (process.env.PAGE_FILE && !bytes.equals(fs.readFileSync(process.env.PAGE_FILE)))
    throw new Error(`GET / differs from ${process.env.PAGE_FILE}`);
  console.log("ok: server up, GET / serves the chat page (text/html)");
}

try {
  await waitForServer();
} catch (e) {
  console.error(String(e));
  process.exit(1);
}
fs.mkdirSync(outDir, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  headless: true,
});
let failed = false;
const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
const pageErrors = [];
page.on("pageerror", (e) => pageErrors.push(String(e)));
page.on("console", (m) => { if (m.type() === "error") console.log("page console:", m.text()); });
const bodies = [];  // chat request bodies, in order
page.on("request", (r) => {
  if (r.url().endsWith("/v1/chat/completions") && r.method() === "POST") bodies.push(JSON.parse(r.postData()));
});

const assistants = page.locator("article.msg.assistant");
async function sendAndWait(text, states) {
  const before = await assistants.count();
  await page.fill("#input", text);
  await page.press("#input", "Enter");
  const article = assistants.nth(before);
  await article.waitFor();
  await page.waitForFunction((i) => {
    const a = document.querySelectorAll("article.msg.assistant")[i];
    return a && a.dataset.state !== "streaming";
  }, before, { timeout: answerTimeout });
  const state = await article.getAttribute("data-state");
  check(states.includes(state), `answer to "${text}" ended in state ${state} (${states.join("|")})`);
  return {
    article,
    content: await article.locator(".content").textContent(),
    reasoning: await article.locator(".reasoning .text").textContent(),
    reasoningVisible: await article.locator("details.reasoning").isVisible(),
    meta: (await article.locator(".meta").textContent()) || "",
  };
}

try {
  await page.goto(url);
  await page.waitForFunction(() => document.getElementById("model").textContent !== "loading model…");
  const model = await page.textContent("#model");
  check(model !== "model unavailable" && model !== "no model" && model.length > 0, `model id shown: ${model}`);
  check((await page.textContent("#error")) === "", "no error after loading");

  // Turn 1: chat mode, a short answer.
  await page.fill("#max-tokens", "32");
  await page.dispatchEvent("#max-tokens", "change");
  await page.fill("#temperature", "0.7");
  const t1 = await sendAndWait("Hello! Who are you?", ["done"]);
  check(bodies[0].stream === true && bodies[0].thinking === false, "turn 1 streams with thinking false");
  check(bodies[0].max_tokens === 32 && bodies[0].temperature === 0.7, "turn 1 sends max_tokens and temperature");
  check(bodies[0].model === model, "turn 1 names the listed model");
  check(t1.meta.includes("finish:"), `turn 1 finished: ${t1.meta}`);
  if (mock) {
    check(t1.content === "Reply to turn 1: héllo wörld 😀\ndone.", "turn 1 text streamed exactly");
    check(!t1.reasoningVisible, "no reasoning block without thinking");
  } else {
    check((t1.content + t1.reasoning).length > 0 || t1.meta.includes("finish: stop"),
          `turn 1 streamed text or stopped at EOS (${t1.content.length} characters; ${t1.meta})`);
  }

  // Turn 2: thinking on; the request carries the history.
  await page.check("#thinking");
  await page.selectOption("#effort", "max");
  const t2 = await sendAndWait("Think first, then answer.", ["done"]);
  const b2 = bodies[1];
  check(b2.thinking === true && b2.reasoning_effort === "max", "turn 2 sends thinking true and reasoning_effort");
  check(b2.messages.length === 3 && b2.messages[0].role === "user" && b2.messages[1].role === "assistant" &&
        b2.messages[1].content === t1.content && b2.messages[2].role === "user", "turn 2 carries the history");
  if (mock) {
    check(t2.reasoning === "The user wants a short reply." && t2.reasoningVisible, "reasoning shown in its block");
    check(t2.content === "Reply to turn 2: héllo wörld 😀\ndone.", "turn 2 content separate from reasoning");
  } else {
    // The prompt ends inside <think>: the tiny model's text is reasoning until it writes </think>.
    // A random model may sample its end-of-sequence token first (finish: stop, no text); any
    // other finish must have streamed text.
    check(t2.meta.includes("finish:"), `turn 2 finished: ${t2.meta}`);
    check((t2.content + t2.reasoning).length > 0 || t2.meta.includes("finish: stop"),
          `turn 2 streamed text or stopped at EOS (${t2.reasoning.length} reasoning, ${t2.content.length} content characters; ${t2.meta})`);
    check(t2.reasoning.length === 0 || t2.reasoningVisible, "reasoning, if any, shown in its block");
  }
  await page.click("details.reasoning >> nth=-1 >> summary").catch(() => {});  // expand it for the screenshot
  const shot = path.join(outDir, "chat_page.png");
  await page.screenshot({ path: shot, fullPage: true });
  console.log("screenshot:", shot);

  // Turn 3: a long answer, stopped (600 tokens and the short history fit the tiny model's
  // 1024-token context).
  await page.uncheck("#thinking");
  await page.fill("#max-tokens", "600");
  await page.dispatchEvent("#max-tokens", "change");
  const before = await assistants.count();
  await page.fill("#input", "Write a very long story.");
  await page.press("#input", "Enter");
  await page.waitForFunction((i) => {
    const a = document.querySelectorAll("article.msg.assistant")[i];
    return a && (a.querySelector(".content").textContent.length > 0 || a.dataset.state !== "streaming");
  }, before, { timeout: answerTimeout });
  // The answer may end between a check and the click (then Stop is disabled): try briefly; a
  // click that matters (the mock's slow stream) is checked through the state below.
  await page.click("#stop", { timeout: 2000 }).catch(() => {});
  await page.waitForFunction((i) => document.querySelectorAll("article.msg.assistant")[i].dataset.state !== "streaming",
                             before, { timeout: answerTimeout });
  const s3 = await assistants.nth(before).getAttribute("data-state");
  // The tiny model may finish (or hit EOS) before the click lands; the mock never does.
  check(mock ? s3 === "stopped" : ["stopped", "done"].includes(s3), `stop button: state ${s3}`);
  check(await page.isEnabled("#send"), "send enabled again after stop");

  // Turn 4: an error body's message is shown (the mock answers 400; against the real server
  // the route answers in its place, so the page's handling is checked either way).
  if (!mock) {
    await page.route("**/v1/chat/completions", (route) => route.fulfill({
      status: 400, contentType: "application/json",
      body: JSON.stringify({ error: { message: "temperature: must be in [0, 2], got 7", type: "invalid_request_error", param: "temperature", code: null } }),
    }));
  }
  await sendAndWait("please fail", ["error"]);
  const err = await page.textContent("#error");
  check(err.includes("temperature: must be in [0, 2], got 7"), `error message shown: ${err}`);
  check(pageErrors.length === 0, `no uncaught page errors ${pageErrors.join("; ")}`);
} catch (e) {
  failed = true;
  console.error(e.stack || String(e));
  const shot = path.join(outDir, "chat_page_failure.png");
  await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
  console.error("failure screenshot:", shot);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);

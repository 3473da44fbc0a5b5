// Loads a GGUF model with llama.cpp through node-llama-cpp, CPU only, and prints one JSON line:
//   {"loaded": true} or {"loaded": false, "error": "...", "log": ["llama.cpp's error lines", ...]}
// Usage: node llama_load.mjs NODE_MODULES_DIR MODEL_PATH
// Exit 0 when the model loaded, 1 when llama.cpp refused it, 3 when node-llama-cpp cannot be imported.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modulesDir, modelPath] = process.argv.slice(2);
if (!modulesDir || !modelPath) {
  console.error("usage: node llama_load.mjs NODE_MODULES_DIR MODEL_PATH");
  process.exit(2);
}

let lib;
try {
  lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
} catch (e) {
  console.error(`node-llama-cpp is not importable from ${modulesDir}: ${e.message}`);
  process.exit(3);
}

const log = [];
const llama = await lib.getLlama({
  gpu: false,
  build: "never",
  logLevel: "error",
  progressLogs: false,
  logger: (level, message) => log.push(String(message).trim()),
});
let result;
try {
  const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: true });
  result = { loaded: true };
  await model.dispose();
} catch (e) {
  // llama.cpp's log lines reach the logger asynchronously: wait (up to 3 s) for the reason.
  for (let waited = 0; waited < 3000 && !log.some((l) => l.includes("error loading model")); waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  result = { loaded: false, error: String(e?.message ?? e), log };
}
console.log(JSON.stringify(result));
await llama.dispose();
process.exit(result.loaded ? 0 : 1);

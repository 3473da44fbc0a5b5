// Loads a GGUF model with llama.cpp through node-llama-cpp's JavaScript API (getLlama, loadModel,
// createContext), evaluates the given token ids as one sequence, and asks at every position for the
// greedy next token and the probabilities. Prints one JSON line on stdout:
//   {"next": [{"token": id, "top": [[id, probability], ...8]}, ... one per position]}
// Usage: node llama_next_tokens.mjs NODE_MODULES_DIR MODEL_PATH TOKEN_ID,TOKEN_ID,...
// Exit 1 when the model does not load or evaluate, 3 when node-llama-cpp cannot be imported.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modulesDir, modelPath, tokenList] = process.argv.slice(2);
if (!modulesDir || !modelPath || !tokenList) {
  console.error("usage: node llama_next_tokens.mjs NODE_MODULES_DIR MODEL_PATH TOKEN_ID,TOKEN_ID,...");
  process.exit(2);
}
const tokens = tokenList.split(",").map(Number);

let lib;
try {
  lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
} catch (e) {
  console.error(`node-llama-cpp is not importable from ${modulesDir}: ${e.message}`);
  process.exit(3);
}

const llama = await lib.getLlama({ gpu: false, build: "never", logLevel: "error", progressLogs: false });
try {
  const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: true });
  const context = await model.createContext({ contextSize: 128, batchSize: 64, threads: 1, sequences: 1 });
  const sequence = context.getSequence();
  const input = tokens.map((token) => [token, { generateNext: { token: true, probabilities: true, options: { temperature: 0 } } }]);
  const results = await sequence.controlledEvaluate(input);
  const next = results.map((r) => ({
    token: r?.next?.token ?? null,
    top: [...(r?.next?.probabilities ?? new Map()).entries()].slice(0, 8),
  }));
  console.log(JSON.stringify({ next }));
  await context.dispose();
  await model.dispose();
} catch (e) {
  console.error(`llama.cpp failed: ${e?.message ?? e}`);
  await llama.dispose();
  process.exit(1);
}
await llama.dispose();

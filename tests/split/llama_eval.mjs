// Loads a GGUF model (or the first shard of a split model) with llama.cpp through node-llama-cpp,
// evaluates a fixed prompt and generates tokens greedily. Prints one JSON line on stdout:
//   {"tokens":[...], "confidence":[...], "top":[[token, probability], ...]}
// tokens: the prompt's tokens then the generated ones; confidence: each generated token's
// probability; top: the 8 most likely next tokens after the prompt.
// Usage: node llama_eval.mjs NODE_MODULES_DIR MODEL_PATH [N_TOKENS]
// Exit 3 when node-llama-cpp cannot be imported (the caller skips).
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modulesDir, modelPath, nArg] = process.argv.slice(2);
if (!modulesDir || !modelPath) {
  console.error("usage: node llama_eval.mjs NODE_MODULES_DIR MODEL_PATH [N_TOKENS]");
  process.exit(2);
}
const nTokens = Number(nArg ?? 16);

let lib;
try {
  lib = await import(pathToFileURL(path.join(modulesDir, "node-llama-cpp", "dist", "index.js")).href);
} catch (e) {
  console.error(`node-llama-cpp is not importable from ${modulesDir}: ${e.message}`);
  process.exit(3);
}

const llama = await lib.getLlama({ gpu: false, build: "never", logLevel: "error", progressLogs: false });
const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: true });
const context = await model.createContext({ contextSize: 128, batchSize: 128, threads: 1, sequences: 1 });
const sequence = context.getSequence();

const prompt = model.tokenize("The quick brown fox jumps over the lazy dog. Once upon a time");
const tokens = [...prompt];
const confidence = [];
let top = null;
for await (const out of sequence.evaluateWithMetadata(prompt, { confidence: true, probabilities: true }, { temperature: 0 })) {
  if (top === null) {
    top = [...out.probabilities.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, 8);
  }
  tokens.push(out.token);
  confidence.push(out.confidence);
  if (confidence.length >= nTokens) break;
}
console.log(JSON.stringify({ tokens, confidence, top }));
await context.dispose();
await model.dispose();
await llama.dispose();

// Which Chromium (or Chrome) the browser tests drive, with playwright-core
// (no browser download). The same search as find_chromium in local/setup.sh,
// which checks for one before the tests run: keep the two alike.
//   1. CHROME_PATH, else CHROMIUM_PATH: used as given, never second-guessed;
//   2. chromium, chromium-browser, google-chrome, google-chrome-stable on the
//      PATH, passing over Ubuntu's shim for the Chromium snap unless the snap
//      is installed (Debian's chromium package gives /usr/bin/chromium);
//   3. Google Chrome or Chromium in /Applications (macOS).
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
const APPS = ["/Applications/Google Chrome.app/Contents/MacOS/Google Chrome", "/Applications/Chromium.app/Contents/MacOS/Chromium"];

function executable(file) {
  try {
    if (!fs.statSync(file).isFile()) return false;
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name, env) {
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, name);
    if (executable(file)) return file;
  }
  return null;
}

/** The snap's launcher, or a small script handing over to the snap (Ubuntu's chromium-browser). */
export function isSnapShim(file) {
  let real = file;
  try {
    real = fs.realpathSync(file);
  } catch {}
  if (file.startsWith("/snap/") || real.startsWith("/snap/") || real.endsWith("/snap")) return true;
  try {
    if (fs.statSync(real).size >= 16384) return false;
    const text = fs.readFileSync(real, "latin1");
    return text.startsWith("#!") && text.includes("snap");
  } catch {
    return false;
  }
}

function snapChromiumInstalled(env) {
  return spawnSync("snap", ["list", "chromium"], { stdio: "ignore", env }).status === 0;
}

/** The browser's executable, or an Error saying what was looked at and how to get one. */
export function findChromium(env = process.env) {
  for (const variable of ["CHROME_PATH", "CHROMIUM_PATH"]) {
    if (env[variable]) {
      if (executable(env[variable])) return env[variable];
      return new Error(`${variable}=${env[variable]}: no executable file there`);
    }
  }
  for (const name of NAMES) {
    const file = onPath(name, env);
    if (!file) continue;
    if (isSnapShim(file) && !snapChromiumInstalled(env)) continue;
    return file;
  }
  for (const file of APPS) if (executable(file)) return file;
  return new Error(
    `no Chromium or Chrome for the browser tests: none as CHROME_PATH, CHROMIUM_PATH, ${NAMES.join(", ")} on the PATH` +
      (process.platform === "darwin" ? " or in /Applications" : "") +
      ". Install one (`bash local/setup.sh --check` says how on this system) or set CHROME_PATH to its executable.",
  );
}

let found;

/** The browser's executable for `chromium.launch({ executablePath })`; throws when there is none. */
export function chromiumPath() {
  found ??= findChromium();
  if (found instanceof Error) throw found;
  return found;
}

// `node tests/support/chromium.mjs` prints what the tests would use.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const result = findChromium();
  if (result instanceof Error) {
    console.error(result.message);
    process.exitCode = 1;
  } else {
    console.log(result);
  }
}

// Whether the module at `moduleUrl` (its `import.meta.url`) is the script
// Node was started with, symlinks resolved: the local servers serve from
// the command line when run, and export their start functions when imported.
import fs from "node:fs";
import { fileURLToPath } from "node:url";

export function isMain(moduleUrl) {
  if (!process.argv[1]) return false;
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false;
  }
}

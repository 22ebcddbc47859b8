// The fixed scenarios of the golden tests, one prompt each for the fake
// model; other suites run the same ones (Flue's history == updates).
export const PROMPTS = {
  reason: "hello [[reason]]",
  tool: 'the weather [[tool:weather:{"city":"Oslo"}]]',
  confirm: 'remove it [[tool:delete-note:{"id":"n1"}]]',
  spawn: "look it up [[spawn]]",
  stall: "wait [[stall]]",
};

import { test } from "node:test";
import assert from "node:assert/strict";
import { SseParser } from "../dist/index.js";

const parseAll = (chunks) => {
  const p = new SseParser();
  return chunks.flatMap((c) => p.push(c));
};

test("fields, comments, defaults and multi-line data", () => {
  const msgs = parseAll([": ping\n\nid: 7\nevent: x\ndata: a\ndata:b\nretry: 10\n\ndata: {\"y\":1}\n\n"]);
  assert.deepEqual(msgs, [
    { event: "x", data: "a\nb", id: "7", retry: 10 },
    { event: "message", data: '{"y":1}' },
  ]);
});

test("a message without data is not dispatched; an unterminated one waits", () => {
  assert.deepEqual(parseAll(["id: 3\n\n", "data: half"]), []);
});

test("CR, LF and CRLF line endings, split anywhere, give the same messages", () => {
  const body = "id: 1\r\ndata: one\r\n\r\n:c\rdata: two\r\rid: 3\ndata: three\n\n";
  const whole = parseAll([body]);
  assert.equal(whole.length, 3);
  for (let i = 0; i <= body.length; i++) {
    for (let j = i; j <= body.length; j += 3) {
      assert.deepEqual(parseAll([body.slice(0, i), body.slice(i, j), body.slice(j)]), whole, `split ${i},${j}`);
    }
  }
});

test("an id with NUL is ignored, a bad retry is ignored", () => {
  assert.deepEqual(parseAll(["id: a\0b\nretry: 1x\ndata: d\n\n"]), [{ event: "message", data: "d" }]);
});

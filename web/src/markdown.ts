/**
 * The assistant's answers as markdown: lists, tables, code blocks (with a
 * copy button), links. markdown-it parses with raw HTML off (HTML in an
 * answer shows as text) and only `http(s):` and `mailto:` links (a `#`
 * link would leave the thread: the page routes by its hash);
 * DOMPurify then keeps only the tags and attributes markdown produces, so
 * nothing an answer says can run, style or fetch anything on this page.
 * Links open in a new tab without an opener or a referrer.
 */
import MarkdownIt from "markdown-it";
import DOMPurify from "dompurify";

const SAFE_URL = /^(?:https?:\/\/|mailto:)/i;

const md = new MarkdownIt({ html: false, linkify: true, typographer: false });
md.validateLink = (url: string) => SAFE_URL.test(url.trim());
// Bare URLs become links only with their scheme: "README.md" stays a name.
md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });

const rules = md.renderer.rules;
// Table alignment as a class: this page's CSP allows no inline styles.
for (const cell of ["th_open", "td_open"] as const) {
  rules[cell] = (tokens, idx, options, _env, self) => {
    const t = tokens[idx]!;
    const align = /text-align:\s*(left|center|right)/.exec(String(t.attrGet("style") ?? ""))?.[1];
    if (t.attrs) t.attrs = t.attrs.filter(([k]) => k !== "style");
    if (align) t.attrJoin("class", `align-${align}`);
    return self.renderToken(tokens, idx, options);
  };
}
// Images in an answer become links to them: the page loads nothing an
// answer names (no tracking pixels, nothing its CSP would have to refuse).
rules.image = (tokens, idx) => {
  const t = tokens[idx]!;
  const src = String(t.attrGet("src") ?? "");
  const alt = md.utils.escapeHtml(t.content || src || "image");
  return src ? `<a href="${md.utils.escapeHtml(src)}">${alt}</a>` : alt;
};

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

const SANITIZE = {
  ALLOWED_TAGS: [
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "pre", "code",
    "em", "strong", "s", "del", "a", "table", "thead", "tbody", "tr", "th", "td",
  ],
  ALLOWED_ATTR: ["href", "title", "class", "start"],
  ALLOWED_URI_REGEXP: SAFE_URL,
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true as const,
};

/** `text` as sanitised markdown, with a copy button on each code block. */
export function renderMarkdown(text: string): DocumentFragment {
  const frag = purify.sanitize(md.render(text), SANITIZE);
  // The line breaks between blocks are not the answer's text.
  for (const n of [...frag.childNodes]) if (n.nodeType === Node.TEXT_NODE && !n.textContent?.trim()) n.remove();
  for (const pre of [...frag.querySelectorAll("pre")]) {
    const box = document.createElement("div");
    box.className = "code-block";
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy-code";
    copy.dataset.testid = "copy-code";
    copy.dataset.copy = "";
    copy.setAttribute("aria-label", "Copy code");
    copy.textContent = "Copy";
    pre.replaceWith(box);
    box.append(copy, pre);
  }
  return frag;
}

/** Copies a code block's text (the clipboard API, else a hidden textarea). */
export async function copyCode(button: HTMLElement): Promise<void> {
  const code = button.parentElement?.querySelector("pre")?.textContent ?? "";
  let ok = false;
  try {
    await navigator.clipboard.writeText(code);
    ok = true;
  } catch {
    const ta = document.createElement("textarea");
    ta.value = code;
    ta.setAttribute("readonly", "");
    ta.className = "visually-hidden";
    document.body.append(ta);
    ta.select();
    ok = document.execCommand("copy");
    ta.remove();
  }
  button.textContent = ok ? "Copied" : "Copy failed";
  setTimeout(() => (button.textContent = "Copy"), 1500);
}

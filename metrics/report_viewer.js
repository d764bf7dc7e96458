// The run report's one script (metrics/report_html.py pins its hash in each page's Content-Security-Policy,
// so no other script can run there). Pages work without it; it adds: on the index, search, filters and sort
// over the trajectories; on a trajectory page, folded repeated text shown on demand, Python highlighting
// when a block scrolls into view, and previous/next that follow the index's current filter and order.
// Text from the results is only ever put in the page as text nodes, never parsed as markup.
(() => {
  "use strict";
  const STORE = "recode-report:";

  function store(key, value) {
    try { localStorage.setItem(STORE + key, JSON.stringify(value)); } catch (e) { /* storage off: no memory */ }
  }
  function recall(key) {
    try { return JSON.parse(localStorage.getItem(STORE + key) || "null"); } catch (e) { return null; }
  }
  function pageKey(url) { return url.split("#")[0].split("?")[0]; }

  // ------------------------------------------------------------------ index: search, filter, sort

  const PAGE = 200;  // rows drawn at a time

  function setUpIndex(table) {
    const data = JSON.parse(document.getElementById("trajectory-data").textContent);
    data.forEach((item, order) => {
      item.order = order;
      item.text = ` ${item.cells.map((cell) => cell[0]).join(" ")} ${item.status} `.toLowerCase();
    });
    const head = table.tHead.rows[0];
    const numeric = Array.from(head.cells, (cell) => cell.dataset.type === "num");
    const search = document.getElementById("q");
    const selects = Array.from(document.querySelectorAll("select[data-filter]"));
    const shown = document.getElementById("shown");
    const more = document.getElementById("more");
    const key = "index:" + pageKey(location.href);
    let sortColumn = -1, sortDirection = 1, visible = data, limit = PAGE;

    function rowOf(item) {
      const row = document.createElement("tr");
      item.cells.forEach(([text], column) => {
        const cell = row.insertCell();
        if (column === 0) {
          const link = document.createElement("a");
          link.href = item.href;
          link.textContent = text;
          cell.appendChild(link);
        } else {
          cell.textContent = text;
        }
        if (column === 5) cell.className = item.css;
        else if (numeric[column]) cell.className = "num";
        else cell.title = text;  // the whole text when the column cuts it
      });
      return row;
    }

    function render() {
      const body = table.tBodies[0];
      body.textContent = "";
      const fragment = document.createDocumentFragment();
      for (const item of visible.slice(0, limit)) fragment.appendChild(rowOf(item));
      body.appendChild(fragment);
      more.hidden = visible.length <= limit;
      more.textContent = `show ${Math.min(PAGE, visible.length - limit)} more of ${visible.length - limit}`;
      shown.textContent = visible.length === data.length ? `${data.length} trajectories`
        : `${visible.length} of ${data.length} trajectories`;
    }

    function value(item) {
      const [text, sortValue] = item.cells[sortColumn];
      const raw = sortValue === null || sortValue === undefined ? (numeric[sortColumn] ? -Infinity : text) : sortValue;
      return typeof raw === "string" ? raw.toLowerCase() : raw;
    }

    function apply() {
      const phrase = search.value.toLowerCase().trim().replace(/\s+/g, " ");
      visible = data.filter((item) => item.text.includes(phrase)
        && selects.every((select) => !select.value || item[select.dataset.filter] === select.value));
      if (sortColumn >= 0) {
        visible.sort((a, b) => {
          const x = value(a), y = value(b);
          return (x < y ? -1 : x > y ? 1 : 0) * sortDirection || a.order - b.order;
        });
      }
      for (const cell of head.cells) cell.removeAttribute("aria-sort");
      if (sortColumn >= 0) head.cells[sortColumn].setAttribute("aria-sort", sortDirection > 0 ? "ascending" : "descending");
      limit = PAGE;
      render();
      store(key, {q: search.value, filters: selects.map((select) => select.value), sortColumn, sortDirection});
      store("order:" + pageKey(location.href), visible.map((item) => pageKey(new URL(item.href, location.href).href)));
    }

    head.addEventListener("click", (event) => {
      const cell = event.target.closest("th");
      if (!cell) return;
      sortDirection = cell.cellIndex === sortColumn ? -sortDirection : 1;
      sortColumn = cell.cellIndex;
      apply();
    });
    search.addEventListener("input", apply);
    for (const select of selects) select.addEventListener("change", apply);
    more.addEventListener("click", () => { limit += PAGE; render(); });
    const saved = recall(key);
    if (saved) {
      search.value = saved.q || "";
      selects.forEach((select, i) => { select.value = (saved.filters || [])[i] || ""; });
      sortColumn = saved.sortColumn;
      sortDirection = saved.sortDirection || 1;
    }
    document.getElementById("list-off").hidden = true;
    apply();
  }

  // ------------------------------------------------------------------ trajectory: previous / next

  function setUpNeighbours(nav) {
    const index = nav.querySelector("a[data-index]");
    const order = recall("order:" + pageKey(index.href));
    const here = pageKey(location.href);
    const at = order ? order.indexOf(here) : -1;
    if (at < 0) return;  // not opened from the index's current list: keep the report's own order
    const set = (rel, target) => {
      const link = nav.querySelector(`a[rel=${rel}]`);
      if (target) { link.href = target; link.removeAttribute("aria-disabled"); }
      else { link.removeAttribute("href"); link.setAttribute("aria-disabled", "true"); }
    };
    set("prev", order[at - 1]);
    set("next", order[at + 1]);
    nav.querySelector(".position").textContent = `${at + 1} of ${order.length} (as filtered and sorted in the report)`;
  }

  function setUpKeys() {
    document.addEventListener("keydown", (event) => {
      if (event.target.closest("input, select, textarea") || event.ctrlKey || event.metaKey || event.altKey) return;
      const rel = {p: "prev", n: "next"}[event.key];
      const link = rel && document.querySelector(`nav.pager a[rel=${rel}][href]`);
      if (link) location.href = link.href;
    });
  }

  // ------------------------------------------------------------------ trajectory: repeated text

  const linesCache = new Map();

  function sourceOf(node) {  // a marker links to the text it repeats; an expanded marker keeps that in data-src
    return node.dataset.src || (node.getAttribute("href") || "").slice(1);
  }

  function segmentLines(node) {
    if (node.dataset.a !== undefined) return linesOf(sourceOf(node)).slice(Number(node.dataset.a), Number(node.dataset.b));
    return node.textContent.split("\n");
  }

  function linesOf(id) {
    if (!linesCache.has(id)) {
      const holder = document.getElementById(id);
      const lines = [];
      for (const node of holder.querySelectorAll(":scope > pre.lit, :scope > a.same")) {
        lines.push(...segmentLines(node));
      }
      linesCache.set(id, lines);
    }
    return linesCache.get(id);
  }

  function expand(markerLink) {
    const block = document.createElement("pre");
    block.className = "lit exp";
    block.dataset.src = sourceOf(markerLink);
    block.dataset.a = markerLink.dataset.a;
    block.dataset.b = markerLink.dataset.b;
    block.textContent = segmentLines(markerLink).join("\n");
    block.title = markerLink.textContent;
    markerLink.replaceWith(block);
    highlightWithin(block);
  }

  function setUpMarkers() {
    document.addEventListener("click", (event) => {
      const markerLink = event.target.closest("a.same");
      if (markerLink) { event.preventDefault(); expand(markerLink); return; }
      const button = event.target.closest("button.expand-all");
      if (button) {
        for (const link of document.getElementById(button.dataset.target).querySelectorAll("a.same")) expand(link);
        button.remove();
      }
    });
  }

  // ------------------------------------------------------------------ Python highlighting (on open)

  const KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else " +
    "except finally for from global if import in is lambda nonlocal not or pass raise return try while with " +
    "yield match case").split(" "));
  const BUILTINS = new Set(("abs all any bool dict enumerate float getattr hasattr int isinstance len list map " +
    "max min print range repr round self set sorted str sum super tuple type zip np torch cls").split(" "));
  const TOKEN = new RegExp([
    String.raw`(#[^\n]*)`,                                                          // 1 comment
    String.raw`((?:\b[rRbBuUfF]{1,2})?(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)` +
      String.raw`|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?))`,                     // 2 string
    String.raw`(@[\w.]+)`,                                                          // 3 decorator
    String.raw`(\b\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?j?\b|\b0[xXoObB][\da-fA-F_]+\b)`,  // 4 number
    String.raw`([A-Za-z_]\w*)`,                                                      // 5 name
  ].join("|"), "g");

  function highlightText(text) {
    const fragment = document.createDocumentFragment();
    let last = 0, previous = "";
    const add = (value, kind) => {
      if (!value) return;
      if (!kind) { fragment.appendChild(document.createTextNode(value)); return; }
      const span = document.createElement("span");
      span.className = kind;
      span.textContent = value;
      fragment.appendChild(span);
    };
    TOKEN.lastIndex = 0;
    for (let match; (match = TOKEN.exec(text)) !== null;) {
      if (match[0] === "") { TOKEN.lastIndex++; continue; }
      add(text.slice(last, match.index));
      const [, comment, string, decorator, number, name] = match;
      let kind = comment ? "c" : string ? "s" : decorator ? "d" : number ? "n" : "";
      if (name) kind = KEYWORDS.has(name) ? "k" : previous === "def" || previous === "class" ? "f"
        : BUILTINS.has(name) ? "b" : "";
      add(match[0], kind);
      previous = name || "";
      last = TOKEN.lastIndex;
    }
    add(text.slice(last));
    return fragment;
  }

  const MAX_HIGHLIGHT = 300000;

  function highlight(element) {
    element.classList.add("hl");
    if (element.textContent.length > MAX_HIGHLIGHT) return;
    if (element.matches("pre.diff")) {
      for (const line of element.children) {
        const text = line.textContent;
        if (line.classList.contains("head") || line.classList.contains("hunk")) continue;
        line.textContent = text.slice(0, 1);
        line.appendChild(highlightText(text.slice(1)));
      }
      return;
    }
    const text = element.textContent;
    element.textContent = "";
    element.appendChild(highlightText(text));
  }

  // Highlight a block when it first scrolls into view: closed sections and off-screen turns cost nothing.
  const SELECTOR = "code.py:not(.hl), div.py > pre.lit:not(.hl), pre.diff:not(.hl)";
  const observer = "IntersectionObserver" in window ? new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (entry.isIntersecting) { observer.unobserve(entry.target); highlight(entry.target); }
    }
  }, {rootMargin: "400px"}) : null;

  function highlightWithin(root) {
    for (const element of root.matches(SELECTOR) ? [root] : root.querySelectorAll(SELECTOR)) {
      if (observer) observer.observe(element); else highlight(element);
    }
  }

  function openTarget() {
    const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    for (let node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    if (target) target.scrollIntoView();
  }

  // ------------------------------------------------------------------ start

  const table = document.getElementById("trajectories");
  if (table) setUpIndex(table);
  const nav = document.querySelector("nav.pager");
  if (nav) {
    setUpNeighbours(nav);
    setUpKeys();
    setUpMarkers();
    window.addEventListener("hashchange", openTarget);
    openTarget();
    highlightWithin(document.body);
  }
  document.documentElement.dataset.ready = "1";
})();

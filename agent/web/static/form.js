"use strict";
// One feedback request: what the agent did, and a form of records saved as a draft on every change.
const parts = location.pathname.split("/");
const base = parts.slice(0, 2).join("/") + "/";
const rid = parts[parts.length - 1];
const api = base + "api/r/" + rid;
const LABELS = {
  interface: "Interface", category: "Category", description: "Description", analysis: "Analysis",
  actionable_feedback: "Actionable feedback", direct_code_feedback: "Code suggestion",
};
const HINTS = {
  interface: "the function, class or method concerned, e.g. Presto.fit",
  category: "the kind of problem",
  description: "what is wrong, as observed",
  analysis: "why it is wrong: what the paper, the task or the tests expect",
  actionable_feedback: "concrete steps that fix it, without code",
  direct_code_feedback: "the corrected code fragment for this issue only",
};
let view = null;
let revision = 0;
let saveTimer = null;
let saving = Promise.resolve();
let frozen = false;

const $ = (id) => document.getElementById(id);

function text(tag, content, className) {
  const node = document.createElement(tag);
  node.textContent = content;
  if (className) node.className = className;
  return node;
}

function numbered(pre, source, differs) {
  const marked = new Set(differs);
  pre.replaceChildren();
  source.split("\n").forEach((line, i) => {
    const row = document.createElement("span");
    row.className = marked.has(i + 1) ? "line differs" : "line";
    row.appendChild(text("span", String(i + 1), "ln"));
    row.appendChild(document.createTextNode(line + "\n"));
    pre.appendChild(row);
  });
}

function scrollToDifference(pre) {
  const first = pre.querySelector(".differs");
  if (first) pre.scrollTop = Math.max(0, first.offsetTop - 48);
}

function showDiff(pre, diff) {
  pre.replaceChildren();
  for (const line of diff.split("\n")) {
    const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
    pre.appendChild(text("span", line + "\n", kind));
  }
}

function fieldControl(name, value) {
  if (name === "category") {
    const select = document.createElement("select");
    select.appendChild(new Option("choose…", ""));
    for (const [code, hint] of Object.entries(view.categories)) select.appendChild(new Option(`${code}: ${hint}`, code));
    select.value = Object.hasOwn(view.categories, value) ? value : "";
    return select;
  }
  const control = document.createElement(name === "interface" ? "input" : "textarea");
  if (name === "interface") control.type = "text";
  else control.rows = name === "direct_code_feedback" ? 6 : 2;
  if (name === "direct_code_feedback") control.className = "mono";
  control.value = typeof value === "string" ? value : "";
  return control;
}

function addRecord(record) {
  const box = document.createElement("fieldset");
  box.className = "record";
  const legend = document.createElement("legend");
  box.appendChild(legend);
  for (const name of view.fields) {
    const label = document.createElement("label");
    label.className = "field";
    const head = text("span", LABELS[name], "name");
    if (view.shown_fields.includes(name)) head.appendChild(text("span", `shown at L${view.level}`, "badge"));
    label.appendChild(head);
    label.appendChild(text("span", HINTS[name], "hint"));
    const control = fieldControl(name, (record || {})[name]);
    control.name = name;
    control.addEventListener("input", scheduleSave);
    control.addEventListener("change", scheduleSave);
    label.appendChild(control);
    label.appendChild(text("span", "", "error field-error"));
    box.appendChild(label);
  }
  const remove = text("button", "Remove this record", "remove");
  remove.type = "button";
  remove.addEventListener("click", () => { box.remove(); renumber(); scheduleSave(); });
  box.appendChild(remove);
  $("records").appendChild(box);
  renumber();
}

function renumber() {
  document.querySelectorAll("#records .record").forEach((box, i) => {
    box.querySelector("legend").textContent = `Record ${i + 1}`;
  });
}

function records() {
  return [...document.querySelectorAll("#records .record")].map((box) => {
    const record = {};
    for (const name of view.fields) record[name] = box.querySelector(`[name="${name}"]`).value;
    return record;
  });
}

async function post(path, payload) {
  const answer = await fetch(api + path, {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(payload),
  });
  return [answer.status, await answer.json()];
}

function scheduleSave() {
  if (frozen) return;
  $("save-status").textContent = "Unsaved changes…";
  clearTimeout(saveTimer);
  saveTimer = setTimeout(() => { saving = save(); }, 400);
}

async function save() {
  saveTimer = null;
  const [status, body] = await post("/draft", {records: records(), revision});
  if (status === 200) {
    revision = body.revision;
    $("save-status").textContent = `Draft saved at ${body.saved_at}`;
  } else {
    frozen = status === 409 || status === 404;
    $("save-status").textContent = body.error;
    $("save-status").className = "error";
  }
}

function showErrors(errors) {
  document.querySelectorAll(".field-error").forEach((slot) => { slot.textContent = ""; });
  document.querySelectorAll(".invalid").forEach((node) => node.classList.remove("invalid"));
  $("form-errors").textContent = (errors.form || []).join(" ");
  const boxes = document.querySelectorAll("#records .record");
  (errors.records || []).forEach((problems, i) => {
    for (const [name, message] of Object.entries(problems)) {
      const control = boxes[i] && boxes[i].querySelector(`[name="${name}"]`);
      if (!control) continue;
      control.classList.add("invalid");
      control.parentElement.querySelector(".field-error").textContent = message;
    }
  });
  const first = document.querySelector(".invalid");
  if (first) first.focus();
}

async function submit(event) {
  event.preventDefault();
  if (saveTimer) { clearTimeout(saveTimer); saving = save(); }
  await saving;
  $("submit").disabled = true;
  const [status, body] = await post("/submit", {feedback: records()});
  if (status === 200) {
    frozen = true;
    $("form").hidden = true;
    $("done").hidden = false;
    $("done").textContent = `Submitted ${body.records} record(s): the run continues with them.`;
    const back = text("a", " Back to the waiting requests.");
    back.href = base;
    $("done").appendChild(back);
    return;
  }
  $("submit").disabled = false;
  if (body.errors) showErrors(body.errors);
  else $("form-errors").textContent = body.error;
}

async function load() {
  const answer = await fetch(api, {cache: "no-store"});
  const data = await answer.json();
  if (answer.status !== 200) {
    $("title").textContent = "Nothing to answer here";
    $("gone").hidden = false;
    $("gone").textContent = data.error;
    return;
  }
  view = data.view;
  revision = data.draft.revision;
  document.title = `Feedback: task ${view.task_index} turn ${view.turn} L${view.level}`;
  $("title").textContent = `Task ${view.task_index} · turn ${view.turn} · guidance level L${view.level}`;
  $("subtitle").textContent = `${data.model} · ${data.folder}`;
  for (const note of data.notes) $("notes").appendChild(text("p", note, "note"));
  $("digest").textContent = view.digest;
  showDiff($("diff"), view.diff);
  numbered($("code"), view.code, view.code_differs);
  numbered($("canonical"), view.canonical, view.canonical_differs);
  $("instruction").textContent = view.instruction;
  $("latex").textContent = view.latex;
  const names = view.shown_fields.map((name) => LABELS[name].toLowerCase());
  const shown = names.length > 1 ? names.slice(0, -1).join(", ") + " and " + names[names.length - 1] : names[0];
  $("level-note").textContent = `At L${view.level} the agent is shown the ${shown} of each record; the other fields `
    + "are recorded for the study. Fields marked \"shown\" must not be empty.";
  const stored = data.draft.records.length ? data.draft.records : [{}];
  stored.forEach(addRecord);
  if (data.draft.saved_at) $("save-status").textContent = `Draft saved at ${data.draft.saved_at}`;
  $("add").addEventListener("click", () => { addRecord({}); scheduleSave(); });
  $("form").addEventListener("submit", submit);
  $("main").hidden = false;
  scrollToDifference($("code"));
  scrollToDifference($("canonical"));
}

load();

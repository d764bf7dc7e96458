"use strict";
// The list of requests waiting for feedback, refreshed every two seconds.
const base = location.pathname.replace(/\/+$/, "") + "/";

function cell(row, text, href) {
  const td = row.insertCell();
  if (href) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    td.appendChild(a);
  } else {
    td.textContent = text;
  }
}

function minutes(seconds) {
  return seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min`;
}

async function refresh() {
  const status = document.getElementById("status");
  const table = document.getElementById("pending");
  try {
    const answer = await fetch(base + "api/pending", {cache: "no-store"});
    const data = await answer.json();
    const body = table.tBodies[0];
    body.replaceChildren();
    for (const item of data.pending) {
      const row = body.insertRow();
      row.dataset.id = item.id;
      cell(row, `Task ${item.task_index}, turn ${item.turn}, L${item.level} · ${item.model}`, base + "r/" + item.id);
      cell(row, item.folder);
      cell(row, minutes(item.waiting_sec));
      cell(row, item.draft_saved_at ? `${item.draft_records} record(s), saved ${item.draft_saved_at}` : "none");
    }
    table.hidden = data.pending.length === 0;
    status.textContent = data.pending.length === 0
      ? "No request waits for feedback right now."
      : `${data.pending.length} request(s) wait for feedback.`;
  } catch (error) {
    status.textContent = "The run's feedback server does not answer (the run may have ended).";
  }
}

refresh();
setInterval(refresh, 2000);

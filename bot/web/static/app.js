// Perch dashboard: the little that needs script. Pages work without it (forms post, pages
// reload); with it, destructive buttons ask first, the overview refreshes its live part,
// and the Logs page follows new lines over server-sent events.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form instanceof HTMLFormElement ? form.dataset.confirm : undefined;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

function refreshing(section) {
  const every = Number(section.dataset.refresh) * 1000;
  if (!every) return;
  const tick = async () => {
    if (document.hidden || section.contains(document.activeElement)) return;
    try {
      const response = await fetch(window.location.href, { credentials: "same-origin" });
      if (!response.ok || response.redirected) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.getElementById(section.id);
      if (fresh) section.replaceChildren(...fresh.childNodes);
    } catch (_) {
      // the daemon may be restarting; try again at the next tick
    }
  };
  window.setInterval(tick, every);
}

function following(list) {
  const follow = document.getElementById("follow");
  const onlyProblems = document.getElementById("problems-only");
  const state = document.getElementById("live-state");
  const atBottom = () => list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  const scroll = () => { if (!follow || follow.checked) list.scrollTop = list.scrollHeight; };
  scroll();
  if (onlyProblems) {
    onlyProblems.addEventListener("change", () => {
      list.classList.toggle("problems-only", onlyProblems.checked);
    });
  }
  const source = new EventSource(list.dataset.stream);
  source.onopen = () => state && state.classList.remove("off");
  source.onerror = () => state && state.classList.add("off");
  source.onmessage = (event) => {
    const line = JSON.parse(event.data);
    const keep = atBottom();
    const item = document.createElement("li");
    item.className = "level-" + String(line.level).toLowerCase();
    item.textContent = line.text;
    list.append(item);
    while (list.children.length > 2000) list.firstElementChild.remove();
    if (keep) scroll();
  };
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-refresh]").forEach(refreshing);
  const log = document.getElementById("log");
  if (log && log.dataset.stream) following(log);
});

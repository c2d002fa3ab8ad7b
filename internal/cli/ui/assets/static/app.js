// Live refresh: the element #live names the URL of its own data
// (data-live) and the seconds between two reads of it (data-every). While
// the tab is visible the script fetches it and puts the server-rendered
// (escaped) HTML in its place; a hidden tab reads nothing. After a failure
// it waits twice as long before the next try, up to a minute, and back to
// data-every after a success. A 403 (the session expired, or ended) stops
// it: no later read can succeed, so it shows the server's message instead.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !live.dataset.live) {
    return;
  }
  const url = live.dataset.live;
  const every = Math.max(Number(live.dataset.every) || 10, 1) * 1000;
  const longest = 60 * 1000;
  const stamp = document.getElementById("updated");
  let wait = every;
  let timer = 0;
  let busy = false;
  let stopped = false;
  function show(text) {
    if (stamp) stamp.textContent = text;
  }
  // schedule sets the next read, or none while the tab is hidden.
  function schedule() {
    clearTimeout(timer);
    timer = 0;
    if (!busy && !stopped && document.visibilityState === "visible") {
      timer = setTimeout(refresh, wait);
    }
  }
  function failed(why) {
    wait = Math.min(wait * 2, longest);
    show("live refresh failed (" + why + "); next try in " + wait / 1000 + " s");
  }
  async function refresh() {
    timer = 0;
    if (busy || document.visibilityState !== "visible") {
      return;
    }
    busy = true;
    try {
      const r = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin" });
      if (r.status === 403) {
        stopped = true;
        show("live refresh stopped: " + (await r.text()).trim());
        return;
      }
      if (!r.ok) {
        failed("HTTP " + r.status);
        return;
      }
      const d = await r.json();
      // The rows the operator selected stay selected across a refresh.
      const kept = new Set([...live.querySelectorAll('input[name="id"]:checked')].map((e) => e.value));
      live.innerHTML = d.html;
      for (const e of live.querySelectorAll('input[name="id"]')) {
        e.checked = kept.has(e.value);
      }
      document.dispatchEvent(new Event("selection"));
      wait = every;
      show("live: updated " + d.at + " UTC; every " + every / 1000 + " s while this tab is visible");
    } catch (e) {
      failed(e.message);
    } finally {
      busy = false;
      schedule();
    }
  }
  document.addEventListener("visibilitychange", schedule);
  schedule();
})();

// Row selection on the task list: the checkbox of a row selects it for
// the bulk form (#bulk), whose scope turns to "the selected rows" when one
// is ticked; the header's checkbox ticks every row of the page. Choosing
// "select all matching the filter" acts on the filter instead, as before.
(function () {
  const form = document.getElementById("bulk");
  if (!form) {
    return;
  }
  const scope = document.getElementById("scope-selected");
  const count = document.getElementById("selected-count");
  function rows() {
    return [...document.querySelectorAll('#task-list input[name="id"]')];
  }
  function update() {
    const n = rows().filter((e) => e.checked).length;
    count.textContent = String(n);
    const page = document.getElementById("select-page");
    if (page) page.checked = n > 0 && n === rows().length;
  }
  document.addEventListener("change", (ev) => {
    const e = ev.target;
    if (e.id === "select-page") {
      for (const r of rows()) r.checked = e.checked;
    } else if (e.name !== "id") {
      return;
    }
    if (rows().some((r) => r.checked)) scope.checked = true;
    update();
  });
  document.addEventListener("selection", update);
  update();
})();

// Live refresh: the element #live names the URL of its own data
// (data-live); every 2 s, while the tab is visible, fetch it and put the
// server-rendered (escaped) HTML in its place.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !live.dataset.live) {
    return;
  }
  const url = live.dataset.live;
  const stamp = document.getElementById("updated");
  let busy = false;
  async function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    try {
      const r = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin" });
      if (!r.ok) {
        if (stamp) stamp.textContent = "live refresh failed: HTTP " + r.status;
        return;
      }
      const d = await r.json();
      live.innerHTML = d.html;
      live.dataset.updated = d.at;
      if (stamp) stamp.textContent = "live: updated " + d.at + " UTC";
    } catch (e) {
      if (stamp) stamp.textContent = "live refresh failed: " + e.message;
    } finally {
      busy = false;
    }
  }
  setInterval(refresh, 2000);
})();

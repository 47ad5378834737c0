// The approval center's only script (the Content-Security-Policy allows no other):
// live updates of the queue and the countdowns. Every page works without it.
"use strict";

(function () {
  const live = document.getElementById("live");
  const deadlines = new WeakMap(); // card -> performance.now() at which it expires

  function track(card) {
    if (!deadlines.has(card)) {
      deadlines.set(card, performance.now() + Number(card.dataset.leftMs || 0));
    }
  }

  function tick() {
    let expired = false;
    document.querySelectorAll("[data-left-ms]").forEach(function (card) {
      track(card);
      const left = Math.max(0, Math.round((deadlines.get(card) - performance.now()) / 1000));
      const shown = card.querySelector("[data-countdown]");
      if (!shown) return;
      if (left <= 0) {
        shown.textContent = "expired";
        card.classList.add("expired");
        card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
        expired = true;
      } else {
        const m = Math.floor(left / 60);
        const s = left % 60;
        shown.textContent = (m > 0 ? m + " min " + String(s).padStart(2, "0") : s) + " s left";
        card.classList.toggle("soon", left <= 10);
      }
    });
    return expired;
  }

  // Merge a fresh rendering of the queue by held-call id: cards already shown stay as
  // they are (a reason being typed survives), new ones are added, gone ones removed.
  function merge(html) {
    const fresh = new DOMParser().parseFromString(html, "text/html");
    const items = document.getElementById("queue-items");
    const newItems = fresh.getElementById("queue-items");
    if (!items || !newItems) return;
    const shown = new Map();
    Array.from(items.children).forEach(function (el) { shown.set(el.dataset.key, el); });
    const next = Array.from(newItems.children).map(function (el) {
      return shown.get(el.dataset.key) || document.importNode(el, true);
    });
    items.replaceChildren.apply(items, next);
    const count = document.querySelector("[data-count]");
    const freshCount = fresh.querySelector("[data-count]");
    if (count && freshCount) count.textContent = freshCount.textContent;
    const recent = document.getElementById("recent");
    const freshRecent = fresh.getElementById("recent");
    if (recent && freshRecent) recent.replaceWith(document.importNode(freshRecent, true));
    tick();
  }

  let fetching = false;
  let again = false;
  function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    fetch(live.dataset.live, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (response.status === 401) { window.location.assign("/login"); return null; }
        return response.ok ? response.text() : null;
      })
      .then(function (html) { if (html !== null) merge(html); })
      .catch(function () { /* the next change or reconnect tries again */ })
      .finally(function () {
        fetching = false;
        if (again) { again = false; refresh(); }
      });
  }

  if (live) {
    const events = new EventSource(live.dataset.events);
    let opened = false;
    events.addEventListener("open", function () {
      if (opened) refresh(); // reconnected: a change may have passed meanwhile
      opened = true;
    });
    events.addEventListener("change", refresh);
  }
  tick();
  window.setInterval(function () {
    if (tick() && live) refresh();
  }, 1000);
})();

// The dashboard's live parts: every few seconds, while the tab is visible, each
// element marked data-live fetches itself again (htmx: hx-trigger="emq:tick").
// A part that holds the focus (a limit being typed) waits for the next tick, and
// a hidden tab asks the server nothing. No inline script: the page's CSP forbids it.
(function () {
  "use strict";
  var seconds = Number(document.body.getAttribute("data-refresh")) || 3;

  function tick() {
    if (document.visibilityState !== "visible" || typeof htmx === "undefined") return;
    var live = document.querySelectorAll("[data-live]");
    for (var i = 0; i < live.length; i++) {
      if (!live[i].contains(document.activeElement)) htmx.trigger(live[i], "emq:tick");
    }
  }

  setInterval(tick, seconds * 1000);
  // Back from a hidden tab: fresh at once, not a period later.
  document.addEventListener("visibilitychange", tick);
})();

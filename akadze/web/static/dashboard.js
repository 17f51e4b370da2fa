// akadze dashboard: the only script. Refreshes the sections that ask for it (data-refresh,
// every data-every ms) while the tab is visible. Every page works without it.
"use strict";
(function () {
  function refresh(section) {
    var url = section.getAttribute("data-refresh");
    var every = parseInt(section.getAttribute("data-every"), 10) || 3000;
    function tick() {
      if (document.hidden) {
        setTimeout(tick, every);
        return;
      }
      fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (response) {
          if (!response.ok) throw new Error(response.status);
          return response.text();
        })
        .then(function (html) {
          // the server escaped every name and message in this fragment
          section.innerHTML = html;
          section.removeAttribute("data-stale");
        })
        .catch(function () {
          section.setAttribute("data-stale", "true");
        })
        .finally(function () {
          setTimeout(tick, every);
        });
    }
    setTimeout(tick, every);
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-refresh]").forEach(refresh);
  });
})();

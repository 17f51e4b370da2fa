// akadze dashboard: the only script. Every page works without it; with it:
// - the live part of a page (section[data-refresh]) is fetched again every data-every ms while
//   the tab is visible, unless updates are paused (the header's button, kept in this browser),
//   a box in it is ticked, or the keyboard focus is inside it; the section is not an aria-live
//   region, so screen readers do not read whole tables again, and it is swapped only when it
//   changed;
// - the header's time zone choice offers this browser's zone and applies at once.
"use strict";
(function () {
  var KEY = "akadze.live";

  function paused() {
    try {
      return window.localStorage.getItem(KEY) === "paused";
    } catch (e) {
      return false;
    }
  }

  function setPaused(value) {
    try {
      if (value) window.localStorage.setItem(KEY, "paused");
      else window.localStorage.removeItem(KEY);
    } catch (e) {
      /* storage refused: the choice lasts for this page */
    }
  }

  function busy(section) {
    return (
      section.querySelector("input[type=checkbox]:checked") !== null ||
      section.contains(document.activeElement)
    );
  }

  function refresh(section, state) {
    var url = section.getAttribute("data-refresh");
    var every = parseInt(section.getAttribute("data-every"), 10) || 3000;
    var last = null;
    function tick() {
      if (document.hidden || state.paused || busy(section)) {
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
          if (!state.paused && !busy(section) && html !== last) {
            section.innerHTML = html;
            last = html;
          }
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

  function liveToggle(sections) {
    var button = document.getElementById("live-toggle");
    var status = document.getElementById("live-status");
    var state = { paused: paused() };
    if (!button || sections.length === 0) return state;
    function show() {
      button.setAttribute("aria-pressed", state.paused ? "true" : "false");
      button.textContent = state.paused ? "Resume updates" : "Pause updates";
    }
    button.hidden = false;
    show();
    button.addEventListener("click", function () {
      state.paused = !state.paused;
      setPaused(state.paused);
      show();
      if (status) status.textContent = state.paused ? "Live updates paused" : "Live updates resumed";
    });
    return state;
  }

  function zoneChoice() {
    var select = document.getElementById("tz-choice");
    if (!select) return;
    var mine = "";
    try {
      mine = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (e) {
      mine = "";
    }
    if (mine && mine !== "UTC") {
      var known = Array.prototype.some.call(select.options, function (o) {
        return o.value === mine;
      });
      if (!known) {
        var option = document.createElement("option");
        option.value = mine;
        option.textContent = "this browser's (" + mine + ")";
        select.insertBefore(option, select.options[1] || null);
      }
    }
    select.addEventListener("change", function () {
      // "other…" (an empty value) opens the page listing every zone
      select.form.submit();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.className += " js";
    var sections = document.querySelectorAll("[data-refresh]");
    var state = liveToggle(sections);
    sections.forEach(function (section) {
      refresh(section, state);
    });
    zoneChoice();
  });
})();

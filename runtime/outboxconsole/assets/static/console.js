// outboxgen console: the little that needs a script. Every page reads without it.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Pages that change on their own (the overview, a message on its way) carry
  // data-refresh="seconds" on <body>: reload them, but never while the reader is typing,
  // has ticked a box, has opened a pause form, or the tab is hidden.
  var secs = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (secs > 0) {
    setInterval(function () {
      if (document.visibilityState !== "visible") return;
      var a = document.activeElement;
      if (a && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(a.tagName)) return;
      if (document.querySelector("input[type=checkbox]:checked")) return;
      if (document.querySelector("details.pause[open]")) return; // a pause form being filled in
      if (window.getSelection && String(window.getSelection()) !== "") return;
      location.reload();
    }, secs * 1000);
  }

  // The failed list's "select all" box.
  var all = document.querySelector(".select-all");
  if (all) {
    all.addEventListener("change", function () {
      var boxes = document.querySelectorAll("#failed-list tbody input[type=checkbox]");
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = all.checked;
    });
  }
})();

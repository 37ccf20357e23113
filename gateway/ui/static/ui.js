// Progressive enhancement only: every view works without this file. It
// marks the page as scripted and lets a reader hide the steps that passed.
"use strict";
document.documentElement.classList.add("js");
document.addEventListener("DOMContentLoaded", function () {
  var table = document.querySelector("table.steps");
  if (!table) {
    return;
  }
  var button = document.createElement("button");
  button.type = "button";
  button.textContent = "Hide passing steps";
  button.className = "toggle";
  button.addEventListener("click", function () {
    var hide = button.textContent.indexOf("Hide") === 0;
    table.querySelectorAll("tr.pass").forEach(function (row) {
      row.hidden = hide;
    });
    button.textContent = hide ? "Show every step" : "Hide passing steps";
  });
  table.parentNode.insertBefore(button, table);
});

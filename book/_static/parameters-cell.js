// The parameters a chapter ran with (papermill's injected cell, tagged injected-parameters) collapsed like a
// hide-input cell: the chapter opens with its prose, and "Show code cell source" reveals the values used. The
// source's own parameters cell is tagged [parameters, hide-input]; papermill gives the cell it injects only its
// own tag, so the same <details> markup myst-nb writes for hide-input is built here.
(function () {
  function collapse() {
    document.querySelectorAll(".cell.tag_injected-parameters > .cell_input").forEach(function (input) {
      if (input.parentNode.tagName === "DETAILS") { return; }
      var details = document.createElement("details");
      details.className = "admonition hide above-input";
      var summary = document.createElement("summary");
      summary.setAttribute("aria-label", "Toggle hidden content");
      summary.innerHTML = '<p class="collapsed admonition-title">Show the parameters this chapter ran with</p>' +
                          '<p class="expanded admonition-title">Hide the parameters</p>';
      input.parentNode.insertBefore(details, input);
      details.appendChild(summary);
      details.appendChild(input);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", collapse);
  } else {
    collapse();
  }
})();
